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

pub fn init(ctx: &Context) {
    // SAFETY: ctx.ctx is the live OnLoad context; every function pointer is filled in at load
    // and checked; the callbacks match the C signatures and live as long as the module.
    unsafe {
        if let Some(f) = raw::RedisModule_RegisterClusterMessageReceiver {
            f(ctx.ctx, LEASE_MESSAGE, Some(on_lease));
        }
        if let Some(f) = raw::RedisModule_RegisterCommandFilter {
            f(
                ctx.ctx,
                Some(on_command),
                raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
            );
        }
    }
    arm_timer(ctx.ctx);
    subscribe_atomic_migration(ctx);
}

fn arm_timer(ctx: *mut raw::RedisModuleCtx) {
    // SAFETY: ctx is a live context (OnLoad's or the timer callback's); the callback matches.
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

// ---------------------------------------------------------------------------------------------
// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`).
//
// The migration runs no `CLUSTER SETSLOT`: the source sends the slots' keys to the target as an
// AOF-format snapshot (our type's `aof_rewrite`: `SEQ.SET key value`), then streams the writes
// for those slots, pauses its writers, and the target claims the slots. The server tells
// modules through a server event, which is where the importing node learns that a slot is
// changing owner (node::cluster::import_started / import_finished / import_cancelled).
//
// The constants and the event's data layout are Valkey's, from its `src/valkeymodule.h` (atomic
// slot migration came with Valkey 9.0); the `redis-module` crate's header predates them.
// Checked on Valkey 9.1.2: the event fires as id 19 with these subevents, and the job name and
// slot ranges read through this layout are those `CLUSTER GETSLOTMIGRATIONS` shows.
// ---------------------------------------------------------------------------------------------

/// `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (valkeymodule.h, Valkey 9.0+): without
/// it Valkey refuses `CLUSTER MIGRATESLOTS` while imid is loaded ("ERR The module imid does not
/// support atomic slot migrations").
const VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;
/// `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` (valkeymodule.h, Valkey 9.0+), data version 1.
const VALKEY_EVENT_ATOMIC_SLOT_MIGRATION: u64 = 19;
/// Its subevents (`VALKEYMODULE_SUBEVENT_ATOMIC_SLOT_MIGRATION_*`); the export side (1, 3, 5)
/// needs nothing: the source is the old owner.
const ASM_IMPORT_STARTED: u64 = 0;
const ASM_IMPORT_ABORTED: u64 = 2;
const ASM_IMPORT_COMPLETED: u64 = 4;

/// The highest hash slot.
const LAST_SLOT: u16 = 16_383;

/// `ValkeyModuleSlotRange`: one inclusive range of hash slots.
#[repr(C)]
struct SlotRange {
    start: c_int,
    end: c_int,
}

/// `ValkeyModuleAtomicSlotMigrationInfoV1`, the event's data.
#[repr(C)]
struct MigrationInfoV1 {
    version: u64,
    job_name: [c_char; cluster::NODE_ID_LEN + 1],
    slot_ranges: *const SlotRange,
    num_slot_ranges: u32,
}

/// Whether this server is Valkey (its INFO says `server_name:valkey`). Redis numbers its own
/// module options and events independently (Redis 8.4's slot migration event is another one),
/// so Valkey's numbers are used on Valkey only.
fn is_valkey() -> bool {
    crate::glue::ServerInfo::read(c"server").is_some_and(|i| i.text_is(c"server_name", "valkey"))
}

/// The module options to declare on top of the others: atomic slot migration support, on a
/// Valkey cluster node whose server knows the option (Valkey 9.0+). Called once, from init.
pub fn module_options(ctx: &Context) -> c_int {
    if !crate::config::CLUSTER_MODE.load(std::sync::atomic::Ordering::Relaxed) || !is_valkey() {
        return 0;
    }
    // SAFETY: GetModuleOptionsAll takes no arguments and is filled in at load (Redis 7.2+,
    // every Valkey); where it is missing nothing is declared.
    let known = unsafe { raw::RedisModule_GetModuleOptionsAll.map_or(0, |f| f()) };
    if known & VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION == 0 {
        ctx.log_notice("imid: this Valkey has no atomic slot migration (Valkey 9.0+)");
        return 0;
    }
    VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION
}

/// Subscribes to Valkey's atomic slot migration event (cluster mode, Valkey only). A server
/// that does not know the event refuses the subscription; that is logged and the load goes on:
/// such a server cannot run the migration either.
fn subscribe_atomic_migration(ctx: &Context) {
    if !is_valkey() {
        return;
    }
    let event = raw::RedisModuleEvent {
        id: VALKEY_EVENT_ATOMIC_SLOT_MIGRATION,
        dataver: 1,
    };
    // SAFETY: ctx.ctx is the live OnLoad context; the callback matches the C signature and
    // lives as long as the module.
    let rc = unsafe {
        raw::RedisModule_SubscribeToServerEvent.map_or(raw::REDISMODULE_ERR as c_int, |f| {
            f(ctx.ctx, event, Some(on_atomic_migration))
        })
    };
    if rc != raw::REDISMODULE_OK as c_int {
        ctx.log_notice(
            "imid: this Valkey has no atomic slot migration event (Valkey 9.0+); not subscribed",
        );
    }
}

/// The slots of the event's ranges (ends past 16383 clamped; a range that is inverted or has
/// a negative bound gives none).
///
/// # Safety
/// `info` must be the live event data of the running callback.
unsafe fn migration_slots(info: &MigrationInfoV1) -> Vec<u16> {
    if info.slot_ranges.is_null() {
        return Vec::new();
    }
    // SAFETY: per the contract, Valkey passes `num_slot_ranges` ranges at `slot_ranges`.
    let ranges =
        unsafe { std::slice::from_raw_parts(info.slot_ranges, info.num_slot_ranges as usize) };
    let mut slots = Vec::new();
    for r in ranges {
        let (Ok(a), Ok(b)) = (u16::try_from(r.start), u16::try_from(r.end)) else {
            continue;
        };
        slots.extend(a..=b.min(LAST_SLOT));
    }
    slots
}

/// The job's name as text, for the log.
fn job_name(info: &MigrationInfoV1) -> String {
    let bytes: Vec<u8> = info
        .job_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The node ID of `slot`'s owner in this node's view of the cluster (`CLUSTER NODES`), or
/// `None`. At an import's start the owner is the migration's source: Valkey checks that before
/// it creates the import (the event carries no source of its own).
fn slot_owner(ctx: &Ctx, slot: u16) -> Option<Vec<u8>> {
    owner_in_nodes(&ctx.call_text(c"CLUSTER", c"NODES")?, slot)
}

/// The node whose line of `CLUSTER NODES` output lists `slot` (a slot, or a `start-end` range;
/// `[slot->-node]` migration markers are not ownership).
fn owner_in_nodes(text: &[u8], slot: u16) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(text).ok()?;
    text.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let id = f.next()?;
        let owns = f.skip(7).any(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
        });
        (owns && id.len() == cluster::NODE_ID_LEN).then(|| id.as_bytes().to_vec())
    })
}

unsafe extern "C" fn on_atomic_migration(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if eid.id != VALKEY_EVENT_ATOMIC_SLOT_MIGRATION || data.is_null() {
        return;
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: Valkey passes a live ValkeyModuleAtomicSlotMigrationInfo (version 1 or a
        // later one that starts with the same fields) for the duration of the callback.
        let info = unsafe { &*data.cast::<MigrationInfoV1>() };
        let what = match subevent {
            ASM_IMPORT_STARTED => "started",
            ASM_IMPORT_COMPLETED => "completed",
            ASM_IMPORT_ABORTED => "aborted",
            _ => return,
        };
        // SAFETY: as above.
        let slots = unsafe { migration_slots(info) };
        // SAFETY: ctx is the live context of this callback, used only within it.
        let c = unsafe { Ctx::from_raw(ctx) };
        let source = match (subevent, slots.first()) {
            (ASM_IMPORT_STARTED, Some(&s)) => slot_owner(&c, s),
            _ => None,
        };
        for &s in &slots {
            match subevent {
                ASM_IMPORT_STARTED => cluster::import_started(s, source.as_deref()),
                ASM_IMPORT_COMPLETED => cluster::import_finished(s),
                _ => cluster::import_cancelled(s),
            }
        }
        let range = match (slots.first(), slots.last()) {
            (Some(a), Some(b)) => format!("{a}-{b}"),
            _ => String::from("none"),
        };
        let from = match (subevent, &source) {
            (ASM_IMPORT_STARTED, Some(id)) => format!(", source {}", String::from_utf8_lossy(id)),
            (ASM_IMPORT_STARTED, None) => String::from(", source unknown"),
            _ => String::new(),
        };
        Context::new(ctx).log_notice(&format!(
            "imid: atomic slot migration {}: import {what} for {} slot(s) ({range}){from}",
            job_name(info),
            slots.len(),
        ));
    }));
    if r.is_err() {
        // SAFETY: as above.
        unsafe { Ctx::from_raw(ctx) }
            .log_warning("imid: internal error in the atomic slot migration event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_of_a_slot_is_read_from_cluster_nodes() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let text = format!(
            "{a} 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 [5461->-{b}]\n\
             {b} 127.0.0.1:7002@17002 master - 0 1 2 connected 5461-10922 16000\n\
             {} 127.0.0.1:7003@17003 master - 0 1 3 connected\n",
            "c".repeat(40)
        );
        let t = text.as_bytes();
        assert_eq!(owner_in_nodes(t, 0), Some(a.clone().into_bytes()));
        assert_eq!(owner_in_nodes(t, 5460), Some(a.into_bytes()));
        assert_eq!(
            owner_in_nodes(t, 5461),
            Some(b.clone().into_bytes()),
            "a migration marker is not ownership"
        );
        assert_eq!(owner_in_nodes(t, 16000), Some(b.into_bytes()));
        assert_eq!(owner_in_nodes(t, 12000), None, "no owner");
        assert_eq!(owner_in_nodes(b"\xff\xfe", 0), None, "not text");
        assert_eq!(
            owner_in_nodes(b"short 1:1@2 master - 0 0 1 connected 0-16383", 0),
            None
        );
    }

    #[test]
    fn the_event_slots_are_its_ranges_clamped() {
        let ranges = [
            SlotRange { start: 3, end: 5 },
            SlotRange {
                start: 16_382,
                end: 20_000,
            },
            SlotRange { start: 9, end: 8 },
            SlotRange { start: -1, end: 2 },
        ];
        let info = |p: *const SlotRange, n: u32| MigrationInfoV1 {
            version: 1,
            job_name: [0; cluster::NODE_ID_LEN + 1],
            slot_ranges: p,
            num_slot_ranges: n,
        };
        // SAFETY: the info points at `ranges`, alive for the call.
        let slots = unsafe { migration_slots(&info(ranges.as_ptr(), 4)) };
        assert_eq!(slots, vec![3, 4, 5, 16_382, 16_383]);
        // SAFETY: a null range pointer is checked before use.
        assert!(unsafe { migration_slots(&info(std::ptr::null(), 4)) }.is_empty());
        let mut named = info(ranges.as_ptr(), 0);
        named.job_name[0] = b'j' as c_char;
        assert_eq!(job_name(&named), "j");
    }
}
