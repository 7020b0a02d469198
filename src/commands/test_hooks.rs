//! The test-only commands, compiled in only with the cargo feature `test-hooks` (never in a
//! release build made by `make build` / `make run`); the state they set is `node::test_hooks`.
//! Each handler's doc says what its command does: IMID.TEST-CLOCK, IMID.TEST-PANIC,
//! IMID.TEST-PANIC-NEXT, IMID.TEST-REPLICATE-FLOOR, IMID.TEST-DEAF, IMID.TEST-MAP-PENDING.

use crate::error::{Error, SYNTAX};
use crate::host::{Arg, Ctx};
use crate::node::test_hooks::{arm_panic, set_clock, set_deaf, ClockMode};

/// IMID.TEST-CLOCK REAL | OFFSET ms | FREEZE unix_ms
///
/// `OFFSET <ms>`: the module's clock reads real time + ms (ms may be negative). `FREEZE
/// <unix_ms>`: the clock reads exactly unix_ms until changed. `REAL`: back to the system clock.
pub(crate) fn test_clock(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let mode = args
        .get(1)
        .map(|a| String::from_utf8_lossy(a.bytes()).to_ascii_uppercase());
    let value = args.get(2).map(Arg::int);
    let mode = match (mode.as_deref(), value, args.len()) {
        (Some("REAL"), None, 2) => ClockMode::Real,
        (Some("OFFSET"), Some(Some(v)), 3) => ClockMode::Offset(v),
        (Some("FREEZE"), Some(Some(v)), 3) if v >= 0 => ClockMode::Frozen(v.unsigned_abs()),
        _ => return Err(SYNTAX),
    };
    set_clock(mode);
    ctx.reply_ok();
    Ok(())
}

/// IMID.TEST-PANIC: panics inside a guarded handler.
#[allow(clippy::indexing_slicing)] // the point of this command
pub(crate) fn test_panic(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let v: Vec<u8> = Vec::new();
    // An out-of-bounds index that the compiler cannot see through.
    ctx.reply_int(i64::from(v[args.len()]));
    Ok(())
}

/// IMID.TEST-PANIC-NEXT entry: the next call from Redis into the entry named `<entry>`, as the
/// guard's log line names it (`digest`, `rdb_load`, `mem_usage`, `a config setter`, `the cron
/// event`, `the lease timer`, ...), panics inside the guard, once.
pub(crate) fn test_panic_next(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, entry] = args else {
        return Err(Error::WrongArity);
    };
    arm_panic(&String::from_utf8_lossy(entry.bytes()));
    ctx.reply_ok();
    Ok(())
}

/// IMID.TEST-REPLICATE-FLOOR ms: writes `MSGID.FLOOR <ms>` to the AOF and replicas, as a lease
/// renewal does, without any check or local effect (to test what replay and replicas do with a
/// floor no client could set).
pub(crate) fn test_replicate_floor(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, ms] = args else {
        return Err(Error::WrongArity);
    };
    ctx.replicate_arg(c"MSGID.FLOOR", ms);
    ctx.reply_ok();
    Ok(())
}

/// IMID.TEST-DEAF 1|0: the cluster bus receiver drops (1) or hears (0) the peers' promises (to
/// test what travels inside a slot migration without the bus).
pub(crate) fn test_deaf(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, on] = args else {
        return Err(Error::WrongArity);
    };
    match on.int() {
        Some(v @ (0 | 1)) => set_deaf(v == 1),
        _ => return Err(SYNTAX),
    }
    ctx.reply_ok();
    Ok(())
}

/// IMID.TEST-MAP-PENDING key -> `[pending, queued]`: 1 when the sequence map at key has
/// background work left (an index resize, a compaction pass), else 0 (a missing key too); and
/// how many maps wait in the cron's queue (`types::map::idle`).
pub(crate) fn test_map_pending(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key] = args else {
        return Err(Error::WrongArity);
    };
    let k = crate::types::map::key::MapKey::open_read(ctx, key)?;
    let pending = k.get().is_some_and(crate::core::seqmap::SeqMap::pending);
    drop(k);
    ctx.reply_array(2);
    ctx.reply_int(i64::from(pending));
    ctx.reply_int(crate::core::to_i64(crate::types::map::idle::queued() as u64));
    Ok(())
}
