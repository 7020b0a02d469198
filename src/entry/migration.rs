//! Atomic slot migration, raw side: the subscription to the server's migration event and its
//! callback, which decodes the event's data and hands it to `node::migration` (the rules)
//! inside [`guard`]; one for Valkey 9 (`CLUSTER MIGRATESLOTS`), one for Redis 8.4+ (`CLUSTER
//! MIGRATION`). (The module option Valkey needs is set in `host::server`.)
//!
//! The two servers number their events independently, and the same numbers mean different
//! things, so each is subscribed to only on its own server ([`subscribe`]). Where each layout
//! comes from and what was checked: [`MigrationInfoV1`] (Valkey), `RedisMigrationInfoV1`
//! (Redis).

use super::event_data;
use crate::host::cluster::NODE_ID_LEN;
use crate::host::server::is_valkey;
use crate::host::Ctx;
use crate::node::migration::{before_snapshot, on_import, on_migrate, Phase};
use redis_module::raw;
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

/// `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` (valkeymodule.h, Valkey 9.0+), data version 1.
const VALKEY_EVENT_ATOMIC_SLOT_MIGRATION: u64 = 19;

/// The highest hash slot.
const LAST_SLOT: u16 = 16_383;

/// `ValkeyModuleSlotRange`: one inclusive range of hash slots.
#[repr(C)]
struct SlotRange {
    start: c_int,
    end: c_int,
}

/// `ValkeyModuleAtomicSlotMigrationInfoV1`, the event's data. The constants and the event's
/// data layout are from Valkey's `src/valkeymodule.h` (atomic slot migration came with Valkey
/// 9.0); the `redis-module` crate's header predates them. Checked on Valkey 9.1.2: the event
/// fires as id 19 with these subevents, and the job name and slot ranges read through this
/// layout are those `CLUSTER GETSLOTMIGRATIONS` shows.
#[repr(C)]
struct MigrationInfoV1 {
    version: u64,
    job_name: [c_char; NODE_ID_LEN + 1],
    slot_ranges: *const SlotRange,
    num_slot_ranges: u32,
}

/// Subscribes to the server's atomic slot migration event (OnLoad, cluster mode): Valkey's or
/// Redis's. A server that does not know the event refuses the subscription; that is logged and
/// the load goes on: such a server cannot run the migration either.
///
/// The two servers number their events independently, and the same numbers mean different
/// things: on Valkey 9.1 event 18 is an authentication attempt and 19 the slot migration, on
/// Redis 8.4+ 18 is the slot migration and 19 its trimming. So each is subscribed to only on
/// its own server (`host::server::is_valkey`). The trimming event (19) is not subscribed to:
/// imid keeps nothing per key outside the keys, so a trim has nothing of imid's to undo (and
/// subscribing to the per-key trim notification would force Redis to trim on its main thread).
pub(crate) fn subscribe(ctx: &Ctx) {
    let (id, callback, refused): (u64, raw::RedisModuleEventCallback, &str) = if is_valkey() {
        (
            VALKEY_EVENT_ATOMIC_SLOT_MIGRATION,
            Some(on_migration_event::<Valkey>),
            "imid: this Valkey has no atomic slot migration event (Valkey 9.0+); not subscribed",
        )
    } else {
        (
            REDIS_EVENT_CLUSTER_SLOT_MIGRATION,
            Some(on_migration_event::<Redis>),
            "imid: this Redis has no atomic slot migration event (Redis 8.4+); not subscribed",
        )
    };
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    // SAFETY: ctx is the live OnLoad context; the callback matches the C signature and
    // lives as long as the module.
    let rc = unsafe {
        raw::RedisModule_SubscribeToServerEvent.map_or(raw::REDISMODULE_ERR as c_int, |f| {
            f(ctx.raw(), event, callback)
        })
    };
    if rc != raw::REDISMODULE_OK as c_int {
        ctx.log_notice(refused);
    } else if !is_valkey() {
        crate::host::server::set_redis_atomic_migration();
    }
}

/// A server's slot migration event: its id, the name a caught panic is logged under, its data
/// and what imid does at each subevent it acts on.
trait MigrationEvent {
    const ID: u64;
    const NAME: &'static str;
    type Info;
    type Step;
    fn step(subevent: u64) -> Option<Self::Step>;
    fn on(c: &Ctx, step: Self::Step, info: &Self::Info);
}

/// The callback of either server's event.
unsafe extern "C" fn on_migration_event<E: MigrationEvent>(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    let Some(step) = E::step(subevent) else {
        return;
    };
    // SAFETY: ctx is this callback's live context; the server passes its live event data,
    // version 1 or a later one that starts with the same fields.
    unsafe {
        event_data(ctx, (eid, E::ID), data, E::NAME, |c, info| {
            E::on(c, step, info)
        })
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

/// Valkey's event (`CLUSTER MIGRATESLOTS`): on the target, its import's phases.
struct Valkey;

impl MigrationEvent for Valkey {
    const ID: u64 = VALKEY_EVENT_ATOMIC_SLOT_MIGRATION;
    const NAME: &'static str = "Valkey's atomic slot migration event";
    type Info = MigrationInfoV1;
    type Step = Phase;

    /// `VALKEYMODULE_SUBEVENT_ATOMIC_SLOT_MIGRATION_IMPORT_*`; the export side (1, 3, 5) needs
    /// nothing: the source is the old owner.
    fn step(subevent: u64) -> Option<Phase> {
        match subevent {
            0 => Some(Phase::Started),   // IMPORT_STARTED
            4 => Some(Phase::Completed), // IMPORT_COMPLETED
            2 => Some(Phase::Aborted),   // IMPORT_ABORTED
            _ => None,
        }
    }

    fn on(c: &Ctx, phase: Phase, info: &MigrationInfoV1) {
        on_valkey_import(c, phase, info);
    }
}

/// One phase of a Valkey import, and its log line.
fn on_valkey_import(c: &Ctx, phase: Phase, info: &MigrationInfoV1) {
    // SAFETY: `info` is the live event data.
    let slots = unsafe { migration_slots(info) };
    c.log_notice(&on_import(c, phase, &job_name(info), &slots, None));
}

/// `REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION` (Redis 8.4+), data version 1.
const REDIS_EVENT_CLUSTER_SLOT_MIGRATION: u64 = 18;

/// `RedisModuleSlotRange`: one inclusive range of hash slots.
#[repr(C)]
#[derive(Clone, Copy)]
struct RedisSlotRange {
    start: u16,
    end: u16,
}

/// `RedisModuleSlotRangeArray`: a count, then that many ranges (a flexible array member).
#[repr(C)]
struct RedisSlotRangeArray {
    num_ranges: i32,
    ranges: [RedisSlotRange; 0],
}

/// `RedisModuleClusterSlotMigrationInfoV1`, the event's data: from Redis 8.6.3's
/// `src/redismodule.h` (`REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION`), the event since Redis
/// 8.4; Redis 8.2 and older refuse the subscription. Its data names the source and the
/// destination.
#[repr(C)]
struct RedisMigrationInfoV1 {
    version: u64,
    source_node_id: [c_char; NODE_ID_LEN + 1],
    destination_node_id: [c_char; NODE_ID_LEN + 1],
    task_id: *const c_char,
    slots: *const RedisSlotRangeArray,
}

/// What a Redis migration event asks of imid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RedisStep {
    /// On the target (and its replicas).
    Import(Phase),
    /// On the source.
    Migrate(Phase),
    /// In the fork child writing the source's snapshot: commands to send before the keys.
    BeforeSnapshot,
}

/// The step a subevent of Redis's event (`REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_*`) asks.
fn redis_step(subevent: u64) -> Option<RedisStep> {
    Some(match subevent {
        0 => RedisStep::Import(Phase::Started),   // IMPORT_STARTED
        2 => RedisStep::Import(Phase::Completed), // IMPORT_COMPLETED
        // IMPORT_FAILED: a failure, and a cancel (which Redis reports as a failure)
        1 => RedisStep::Import(Phase::Aborted),
        3 => RedisStep::Migrate(Phase::Started), // MIGRATE_STARTED
        5 => RedisStep::Migrate(Phase::Completed), // MIGRATE_COMPLETED
        4 => RedisStep::Migrate(Phase::Aborted), // MIGRATE_FAILED
        6 => RedisStep::BeforeSnapshot,          // MIGRATE_MODULE_PROPAGATE
        _ => return None,
    })
}

/// The slots of a Redis event's ranges (a range that is inverted or past 16383 is cut to what
/// is valid).
///
/// # Safety
/// `slots` must be null or the live range array of the running callback's event data.
unsafe fn redis_slots(slots: *const RedisSlotRangeArray) -> Vec<u16> {
    if slots.is_null() {
        return Vec::new();
    }
    // SAFETY: per the contract, `slots` points to a live array header.
    let n = usize::try_from(unsafe { (*slots).num_ranges }).unwrap_or(0);
    // SAFETY: Redis allocates the header and its `num_ranges` ranges together (the flexible
    // array member), alive for the callback; `addr_of!` takes the member's address without
    // making a reference to the zero-length array.
    let ranges = unsafe {
        std::slice::from_raw_parts(
            std::ptr::addr_of!((*slots).ranges).cast::<RedisSlotRange>(),
            n,
        )
    };
    let mut out = Vec::new();
    for r in ranges {
        out.extend(r.start..=r.end.min(LAST_SLOT));
    }
    out
}

/// A NUL-terminated node ID field of the event (40 characters and a NUL).
fn node_id(field: &[c_char; NODE_ID_LEN + 1]) -> Vec<u8> {
    field
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect()
}

/// The task's ID as text, for the log.
///
/// # Safety
/// `p` must be null or a NUL-terminated string alive for the running callback.
unsafe fn task_id(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the contract.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

/// Redis's event (`CLUSTER MIGRATION`): the import on the target, the migration on the
/// source, and the commands to send before the source's snapshot.
struct Redis;

impl MigrationEvent for Redis {
    const ID: u64 = REDIS_EVENT_CLUSTER_SLOT_MIGRATION;
    const NAME: &'static str = "Redis's slot migration event";
    type Info = RedisMigrationInfoV1;
    type Step = RedisStep;

    fn step(subevent: u64) -> Option<RedisStep> {
        redis_step(subevent)
    }

    fn on(c: &Ctx, step: RedisStep, info: &RedisMigrationInfoV1) {
        on_redis_step(c, step, info);
    }
}

/// What one step of a Redis migration does, and its log line.
fn on_redis_step(c: &Ctx, step: RedisStep, info: &RedisMigrationInfoV1) {
    // SAFETY: `info` is the live event data; `slots` is the task's own range array.
    let slots = unsafe { redis_slots(info.slots) };
    // SAFETY: as above; the task's ID is NUL-terminated.
    let task = unsafe { task_id(info.task_id) };
    let line = match step {
        RedisStep::Import(phase) => {
            let source = node_id(&info.source_node_id);
            let source = (source.len() == NODE_ID_LEN).then_some(&source[..]);
            on_import(c, phase, &task, &slots, source)
        }
        RedisStep::Migrate(phase) => {
            on_migrate(phase, &task, &slots, &node_id(&info.destination_node_id))
        }
        RedisStep::BeforeSnapshot => match before_snapshot(c, &slots) {
            Ok(()) => return,
            Err(why) => format!(
                "imid: atomic slot migration {task}: this node's promise could not go before the snapshot: {why}"
            ),
        },
    };
    c.log_notice(&line);
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

    #[test]
    fn redis_event_data_reads_through_its_layout() {
        // the offsets of Redis 8.6.3's RedisModuleClusterSlotMigrationInfoV1 on 64-bit Linux
        assert_eq!(
            std::mem::offset_of!(RedisMigrationInfoV1, source_node_id),
            8
        );
        assert_eq!(
            std::mem::offset_of!(RedisMigrationInfoV1, destination_node_id),
            49
        );
        assert_eq!(std::mem::offset_of!(RedisMigrationInfoV1, task_id), 96);
        assert_eq!(std::mem::offset_of!(RedisMigrationInfoV1, slots), 104);
        assert_eq!(std::mem::offset_of!(RedisSlotRangeArray, ranges), 4);
        // an array as Redis lays it out: the count, then the ranges right after it
        #[repr(C)]
        struct Three {
            num_ranges: i32,
            ranges: [RedisSlotRange; 3],
        }
        let a = Three {
            num_ranges: 3,
            ranges: [
                RedisSlotRange { start: 3, end: 5 },
                RedisSlotRange {
                    start: 16_382,
                    end: 20_000,
                },
                RedisSlotRange { start: 9, end: 8 },
            ],
        };
        let p = std::ptr::addr_of!(a).cast::<RedisSlotRangeArray>();
        // SAFETY: `p` points at a header followed by its three ranges, alive for the call.
        assert_eq!(unsafe { redis_slots(p) }, vec![3, 4, 5, 16_382, 16_383]);
        // SAFETY: a null array is checked before use.
        assert!(unsafe { redis_slots(std::ptr::null()) }.is_empty());
        let mut id = [0 as c_char; NODE_ID_LEN + 1];
        id[0] = b'a' as c_char;
        id[1] = b'b' as c_char;
        assert_eq!(node_id(&id), b"ab");
        // SAFETY: a NUL-terminated literal; null is checked.
        assert_eq!(unsafe { task_id(c"t1".as_ptr()) }, "t1");
        // SAFETY: as above.
        assert_eq!(unsafe { task_id(std::ptr::null()) }, "");
        assert_eq!(redis_step(0), Some(RedisStep::Import(Phase::Started)));
        assert_eq!(redis_step(1), Some(RedisStep::Import(Phase::Aborted)));
        assert_eq!(redis_step(2), Some(RedisStep::Import(Phase::Completed)));
        assert_eq!(redis_step(3), Some(RedisStep::Migrate(Phase::Started)));
        assert_eq!(redis_step(4), Some(RedisStep::Migrate(Phase::Aborted)));
        assert_eq!(redis_step(5), Some(RedisStep::Migrate(Phase::Completed)));
        assert_eq!(redis_step(6), Some(RedisStep::BeforeSnapshot));
        assert_eq!(redis_step(7), None);
    }
}
