//! Cluster-mode hooks for slot adoption (the rules are in `node::cluster`): the cluster-bus
//! receiver for peers' time promises, a once-a-second timer that sends this primary's promise
//! (and, on a replica, notes its primary), and a command filter that notices the slot
//! assignment commands run on this node (SETSLOT IMPORTING/NODE/STABLE, ADDSLOTS).
//!
//! Registered only in cluster mode: a standalone server pays nothing for them. The filter runs
//! before every command a client sends to a cluster node; it compares the command's name with
//! `CLUSTER` and returns (a few dozen instructions).

use crate::glue::{self, Ctx, LEASE_MESSAGE};
use crate::node::{cluster, ids};
use redis_module::{raw, Context};
use std::ffi::c_void;
use std::os::raw::{c_char, c_int, c_uchar};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How often a primary sends its lease to the other nodes when no renewal did.
const SEND_EVERY_MS: i64 = 1000;

/// Registers the command filter: the last step of OnLoad, after which nothing can fail. The
/// bus receiver and the lease timer come later, from the first cron tick ([`arm_once`]): a
/// module holding a timer cannot be unloaded, and Redis 8.2 and Valkey 9 crash when the unload
/// they attempt after OnLoad (a `MODULE LOADEX` config left unapplied) meets one; and no
/// server removes a bus receiver on unload (Redis 8.2 cannot even unregister the first one of
/// a message type: `RM_RegisterClusterMessageReceiver` with a NULL callback leaves the list
/// head pointing to the freed entry), so a receiver registered by a load that is then undone
/// would call into the unloaded library on the next lease from a peer. Until that first tick
/// (a tenth of a second at the default `hz`) peers' leases are not heard; they are sent again
/// every second.
pub fn init(ctx: &Context) {
    // SAFETY: ctx.ctx is the live OnLoad context; the function pointer is filled in at load
    // and checked; the callback matches the C signature and lives as long as the module.
    unsafe {
        if let Some(f) = raw::RedisModule_RegisterCommandFilter {
            f(
                ctx.ctx,
                Some(on_command),
                raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
            );
        }
    }
}

static ARMED: AtomicBool = AtomicBool::new(false);

/// Registers the bus receiver and arms the lease timer, the first time it is called (from the
/// cron event, in cluster mode only); the timer re-arms itself from then on.
pub fn arm_once(ctx: *mut raw::RedisModuleCtx) {
    if ARMED.swap(true, Ordering::Relaxed) {
        return;
    }
    // SAFETY: ctx is the cron event's live context; the callback matches the C signature and
    // lives as long as the module.
    unsafe {
        if let Some(f) = raw::RedisModule_RegisterClusterMessageReceiver {
            f(ctx, LEASE_MESSAGE, Some(on_lease));
        }
    }
    arm_timer(ctx);
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
    let r = std::panic::catch_unwind(|| {
        // SAFETY: ctx is the live context of this timer callback, used only within it.
        let c = unsafe { Ctx::from_raw(ctx) };
        // Once, on the first tick: the imports this node was in the middle of when it last
        // stopped (kept in nodes.conf), which no SETSLOT seen by the filter announced.
        if !IMPORTS_RESTORED.swap(true, Ordering::Relaxed) {
            if let Some(nodes) = c.call_text(c"CLUSTER", c"NODES") {
                cluster::restore_imports(&nodes);
            }
        }
        // Primaries send their promise; replicas have their primary's lease by replication
        // and note who their primary is, for a promotion (node::cluster::promoted).
        if c.is_primary() {
            ids::send_promise(&c);
        } else if let Some(primary) = c.cluster_primary() {
            cluster::set_primary(&primary);
        }
    });
    if r.is_err() {
        // SAFETY: as above.
        unsafe { Ctx::from_raw(ctx) }.log_warning("imid: internal error in the lease timer");
    }
    arm_timer(ctx);
}

unsafe extern "C" fn on_lease(
    ctx: *mut raw::RedisModuleCtx,
    sender: *const c_char,
    _type: u8,
    payload: *const c_uchar,
    len: u32,
) {
    if payload.is_null() || (len != 8 && len != 16) {
        return;
    }
    // SAFETY: Redis passes `len` readable bytes at `payload` for the duration of the callback.
    let bytes = unsafe { std::slice::from_raw_parts(payload, len as usize) };
    // SAFETY: Redis passes the sender's node ID, NODE_ID_LEN bytes (not NUL-terminated).
    let sender = (!sender.is_null())
        .then(|| unsafe { std::slice::from_raw_parts(sender.cast::<u8>(), cluster::NODE_ID_LEN) });
    let word = |i: usize| {
        bytes
            .get(i..i + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    };
    // An 8-byte message (an older imid) carries one lease for both families.
    let leases = match (word(0), word(8)) {
        (Some(msgid), Some(uid)) => cluster::Leases { msgid, uid },
        (Some(ms), None) => cluster::Leases { msgid: ms, uid: ms },
        _ => return,
    };
    if let Err(why) = cluster::heard(sender, leases, crate::node::now_ms()) {
        // At most one line a minute: a peer repeats its promise every second.
        let now = crate::node::now_ms();
        if now.saturating_sub(LAST_REFUSAL_LOG.load(Ordering::Relaxed)) >= 60_000 {
            LAST_REFUSAL_LOG.store(now, Ordering::Relaxed);
            // SAFETY: ctx is the live context of this receiver callback, used only within it.
            unsafe { Ctx::from_raw(ctx) }
                .log_warning(&format!("imid: {why} (INFO imid: cluster_leases_refused)"));
        }
    }
}

/// Whether the first timer tick restored the imports in progress (node::cluster).
static IMPORTS_RESTORED: AtomicBool = AtomicBool::new(false);

/// When a refused lease was last logged (ms).
static LAST_REFUSAL_LOG: AtomicU64 = AtomicU64::new(0);

/// The bytes of argument `pos` of the filtered command, or None.
///
/// # Safety
/// `f` must be the live filter context of the running filter callback.
unsafe fn filter_arg<'a>(f: *mut raw::RedisModuleCommandFilterCtx, pos: c_int) -> Option<&'a [u8]> {
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
    let (sub, slot) = unsafe { (filter_arg(f, 1), filter_arg(f, 2)) };
    let Some(sub) = sub else { return };
    let sub = sub.to_ascii_uppercase();
    match sub.as_slice() {
        b"SETSLOT" => {
            let Some(slot) = slot
                .and_then(|s| std::str::from_utf8(s).ok())
                .and_then(|s| s.parse::<u16>().ok())
            else {
                return;
            };
            // SAFETY: as above.
            let (how, node) = unsafe { (filter_arg(f, 3), filter_arg(f, 4)) };
            let how = how.map(<[u8]>::to_ascii_uppercase);
            match how.as_deref() {
                Some(b"IMPORTING") => cluster::import_started(slot, node),
                Some(b"NODE") => {
                    let mine = glue::my_cluster_id();
                    if node.is_some() && node == mine.as_ref().map(|m| &m[..]) {
                        cluster::import_finished(slot);
                    } else {
                        cluster::import_cancelled(slot);
                    }
                }
                Some(b"STABLE") => cluster::import_cancelled(slot),
                _ => {}
            }
        }
        b"ADDSLOTS" | b"ADDSLOTSRANGE" => cluster::slots_added(),
        _ => {}
    }
}
