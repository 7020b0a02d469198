//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`), raw side: the subscription to the
//! migration event and its callback, which decodes the event's data and hands it to
//! `node::migration` (the rules) inside [`guard`]. (The module option that declares support is
//! set in `host::server`.)
//!
//! The constants and the event's data layout are Valkey's, from its `src/valkeymodule.h`
//! (atomic slot migration came with Valkey 9.0); the `redis-module` crate's header predates
//! them. Checked on Valkey 9.1.2: the event fires as id 19 with these subevents, and the job
//! name and slot ranges read through this layout are those `CLUSTER GETSLOTMIGRATIONS` shows.

use super::{guard, Entry};
use crate::host::cluster::NODE_ID_LEN;
use crate::host::server::is_valkey;
use crate::host::Ctx;
use crate::node::migration::{on_import, Phase};
use redis_module::raw;
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

/// `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` (valkeymodule.h, Valkey 9.0+), data version 1.
const VALKEY_EVENT_ATOMIC_SLOT_MIGRATION: u64 = 19;
/// Its subevents (`VALKEYMODULE_SUBEVENT_ATOMIC_SLOT_MIGRATION_*`); the export side (1, 3, 5)
/// needs nothing: the source is the old owner.
const IMPORT_STARTED: u64 = 0;
const IMPORT_ABORTED: u64 = 2;
const IMPORT_COMPLETED: u64 = 4;

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
    job_name: [c_char; NODE_ID_LEN + 1],
    slot_ranges: *const SlotRange,
    num_slot_ranges: u32,
}

/// Subscribes to Valkey's atomic slot migration event (OnLoad, cluster mode, Valkey only). A
/// server that does not know the event refuses the subscription; that is logged and the load
/// goes on: such a server cannot run the migration either.
pub(crate) fn subscribe(ctx: &Ctx) {
    if !is_valkey() {
        return;
    }
    let event = raw::RedisModuleEvent {
        id: VALKEY_EVENT_ATOMIC_SLOT_MIGRATION,
        dataver: 1,
    };
    // SAFETY: ctx is the live OnLoad context; the callback matches the C signature and
    // lives as long as the module.
    let rc = unsafe {
        raw::RedisModule_SubscribeToServerEvent.map_or(raw::REDISMODULE_ERR as c_int, |f| {
            f(ctx.raw(), event, Some(on_migration_event))
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

/// The job's name as text (NUL-terminated in its 41 bytes), for the log.
fn job_name(info: &MigrationInfoV1) -> String {
    let bytes: Vec<u8> = info
        .job_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

unsafe extern "C" fn on_migration_event(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    let phase = match subevent {
        IMPORT_STARTED => Phase::Started,
        IMPORT_COMPLETED => Phase::Completed,
        IMPORT_ABORTED => Phase::Aborted,
        _ => return,
    };
    if eid.id != VALKEY_EVENT_ATOMIC_SLOT_MIGRATION || data.is_null() {
        return;
    }
    // SAFETY: ctx is the live context of this event callback; the Ctx is used only within it.
    let c = unsafe { Ctx::from_raw(ctx) };
    guard(
        ctx,
        Entry::Named("the atomic slot migration event"),
        || (),
        || {
            // SAFETY: Valkey passes a live ValkeyModuleAtomicSlotMigrationInfo (version 1, or a
            // later one that starts with the same fields) for the duration of the callback.
            let info = unsafe { &*data.cast::<MigrationInfoV1>() };
            // SAFETY: as above.
            let slots = unsafe { migration_slots(info) };
            let line = on_import(&c, phase, &job_name(info), &slots);
            c.log_notice(&line);
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

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
            job_name: [0; NODE_ID_LEN + 1],
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
