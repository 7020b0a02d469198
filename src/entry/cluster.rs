//! Cluster-mode callbacks for slot adoption, raw parsing only (the rules are in `node::cluster` and
//! `node::promises`): the cluster-bus receiver for peers' time promises, a once-a-second timer that
//! sends this primary's promise (and, on a replica, notes its primary), and a command filter that
//! notices the slot assignment commands run on this node (SETSLOT IMPORTING/NODE/STABLE, ADDSLOTS).
//!
//! Registered only in cluster mode: a standalone server pays nothing for them. The filter runs
//! before every command a client sends to a cluster node; it compares the command's name with
//! `CLUSTER` and returns (a few dozen instructions).

use super::{guard, guarded, EntryPoint};
use crate::host::cluster::NODE_ID_LEN;
use crate::host::Ctx;
use crate::node::cluster;
use crate::node::promises::LEASE_MESSAGE;
use redis_module::raw;
use std::ffi::c_void;
use std::os::raw::{c_char, c_int, c_uchar};
use std::sync::atomic::{AtomicBool, Ordering};

/// How often a primary sends its lease to the other nodes when no renewal did.
const SEND_EVERY_MS: i64 = 1000;

/// Registers the command filter (OnLoad, cluster mode only): its last step, after which
/// nothing can fail. The bus receiver and the lease timer come later, from the first cron tick
/// ([`arm_once`]): a module holding a timer cannot be unloaded, and Redis 8.2 and Valkey 9
/// crash when the unload they attempt after OnLoad (a `MODULE LOADEX` config left unapplied)
/// meets one; and no server removes a bus receiver on unload (Redis 8.2 cannot even unregister
/// the first one of a message type: `RM_RegisterClusterMessageReceiver` with a NULL callback
/// leaves the list head pointing to the freed entry), so a receiver registered by a load that
/// is then undone would call into the unloaded library on the next lease from a peer. Until
/// that first tick (a tenth of a second at the default `hz`) peers' leases are not heard; they
/// are sent again every second.
pub(crate) fn init(ctx: &Ctx) {
    // SAFETY: ctx is the live OnLoad context; the function pointer is filled in at load
    // and checked; the callback matches the C signature and lives as long as the module.
    unsafe {
        if let Some(f) = raw::RedisModule_RegisterCommandFilter {
            f(
                ctx.raw(),
                Some(on_command),
                raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
            );
        }
    }
}

static ARMED: AtomicBool = AtomicBool::new(false);

/// Registers the bus receiver and arms the lease timer, the first time it is called (from the
/// cron event, in cluster mode only); the timer re-arms itself from then on.
pub(crate) fn arm_once(ctx: &Ctx) {
    if ARMED.swap(true, Ordering::Relaxed) {
        return;
    }
    // SAFETY: ctx is the cron event's live context; the callback matches the C signature and
    // lives as long as the module.
    unsafe {
        if let Some(f) = raw::RedisModule_RegisterClusterMessageReceiver {
            f(ctx.raw(), LEASE_MESSAGE, Some(on_lease));
        }
    }
    arm_timer(ctx.raw());
}

fn arm_timer(ctx: *mut raw::RedisModuleCtx) {
    // SAFETY: ctx is a live context (the cron event's or the timer callback's); the callback
    // matches.
    unsafe {
        if let Some(f) = raw::RedisModule_CreateTimer {
            f(ctx, SEND_EVERY_MS, Some(on_timer), std::ptr::null_mut());
        }
    }
}

unsafe extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    // SAFETY: ctx is the live context of this timer callback.
    unsafe { guarded(ctx, "the lease timer", cluster::tick) };
    arm_timer(ctx);
}

unsafe extern "C" fn on_lease(
    ctx: *mut raw::RedisModuleCtx,
    sender: *const c_char,
    _type: u8,
    payload: *const c_uchar,
    len: u32,
) {
    if payload.is_null() {
        return;
    }
    let Ok(len) = usize::try_from(len) else {
        return;
    };
    // SAFETY: Redis passes `len` readable bytes at `payload` for the duration of the callback.
    let bytes = unsafe { std::slice::from_raw_parts(payload, len) };
    // SAFETY: Redis passes the sender's node ID, NODE_ID_LEN bytes (not NUL-terminated), alive
    // for the duration of the callback.
    let sender = (!sender.is_null())
        .then(|| unsafe { std::slice::from_raw_parts(sender.cast::<u8>(), NODE_ID_LEN) });
    // SAFETY: ctx is the live context of this receiver callback.
    unsafe {
        guarded(ctx, "the cluster bus receiver", |c| {
            cluster::received(c, sender, bytes)
        })
    }
}

/// The bytes of argument `pos` of the filtered command, or None.
///
/// # Safety
/// `f` must be the live filter context of the running filter callback.
pub(super) unsafe fn filter_arg<'a>(
    f: *mut raw::RedisModuleCommandFilterCtx,
    pos: c_int,
) -> Option<&'a [u8]> {
    // SAFETY: per the contract above; the string and its buffer live while the filter runs.
    unsafe {
        let s = raw::RedisModule_CommandFilterArgGet?(f, pos);
        if s.is_null() {
            return None;
        }
        let mut len = 0usize;
        let p = raw::RedisModule_StringPtrLen?(s, &mut len);
        (!p.is_null()).then(|| std::slice::from_raw_parts(p.cast::<u8>(), len))
    }
}

unsafe extern "C" fn on_command(f: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: f is this callback's live filter context.
    let is_cluster =
        unsafe { filter_arg(f, 0) }.is_some_and(|a| a.eq_ignore_ascii_case(b"CLUSTER"));
    if !is_cluster {
        return;
    }
    // SAFETY: as above.
    let (sub, slot, how, node) = unsafe {
        (
            filter_arg(f, 1),
            filter_arg(f, 2),
            filter_arg(f, 3),
            filter_arg(f, 4),
        )
    };
    let Some(sub) = sub else { return };
    guard(
        std::ptr::null_mut(),
        EntryPoint::Named("the command filter"),
        || (),
        || cluster::cluster_command(sub, slot, how, node),
    );
}
