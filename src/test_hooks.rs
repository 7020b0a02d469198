//! Test-only hooks, compiled in only with the cargo feature `test-hooks` (never in a release
//! build made by `make build` / `make run`): a wall clock the tests can move, and a command
//! that panics, to prove the guard holds.
//!
//! Why not libfaketime: it cannot preload into Debian's redis-server (jemalloc calls
//! clock_gettime while libfaketime initialises, and the process aborts), so the module's own
//! clock is made steerable instead.
//!
//! `IMID.TEST-CLOCK OFFSET <ms>`: the module's clock reads real time + ms (ms may be negative).
//! `IMID.TEST-CLOCK FREEZE <unix_ms>`: the clock reads exactly unix_ms until changed.
//! `IMID.TEST-CLOCK REAL`: back to the system clock.
//! `IMID.TEST-PANIC`: panics inside a guarded handler.
//! `IMID.TEST-REPLICATE-FLOOR <ms>`: writes `MSGID.FLOOR <ms>` to the AOF and replicas, as a
//! lease renewal does, without any check or local effect (to test what replay and replicas do
//! with a floor no client could set).

use crate::core::generator::system_now_ms;
use crate::glue::{Arg, Ctx, Error, SYNTAX};
use redis_module::{Context, Status};
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};

const REAL: u8 = 0;
const OFFSET: u8 = 1;
const FROZEN: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(REAL);
static VALUE: AtomicI64 = AtomicI64::new(0);

pub fn now_ms() -> u64 {
    let real = system_now_ms();
    let v = VALUE.load(Ordering::Relaxed);
    match MODE.load(Ordering::Relaxed) {
        OFFSET => real.saturating_add_signed(v),
        FROZEN => u64::try_from(v).unwrap_or(0),
        _ => real,
    }
}

fn test_clock(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let mode = args
        .get(1)
        .map(|a| String::from_utf8_lossy(a.bytes()).to_ascii_uppercase());
    let value = args.get(2).map(Arg::int);
    match (mode.as_deref(), value, args.len()) {
        (Some("REAL"), None, 2) => MODE.store(REAL, Ordering::Relaxed),
        (Some("OFFSET"), Some(Some(v)), 3) => {
            VALUE.store(v, Ordering::Relaxed);
            MODE.store(OFFSET, Ordering::Relaxed);
        }
        (Some("FREEZE"), Some(Some(v)), 3) if v >= 0 => {
            VALUE.store(v, Ordering::Relaxed);
            MODE.store(FROZEN, Ordering::Relaxed);
        }
        _ => return Err(SYNTAX),
    }
    ctx.reply_ok();
    Ok(())
}

#[allow(clippy::indexing_slicing)] // the point of this command
fn test_panic(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let v: Vec<u8> = Vec::new();
    // An out-of-bounds index that the compiler cannot see through.
    ctx.reply_int(i64::from(v[args.len()]));
    Ok(())
}

fn test_replicate_floor(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, ms] = args else {
        return Err(Error::WrongArity);
    };
    ctx.replicate_arg(c"MSGID.FLOOR", ms);
    ctx.reply_ok();
    Ok(())
}

const COMMANDS: &[crate::registry::Command] = &[
    crate::command!(
        "imid.test-clock",
        test_clock,
        "fast",
        "",
        -2,
        None,
        "Test builds only: steers the module's wall clock"
    ),
    crate::command!(
        "imid.test-panic",
        test_panic,
        "fast",
        "",
        1,
        None,
        "Test builds only: panics inside a guarded handler"
    ),
    crate::command!(
        "imid.test-replicate-floor",
        test_replicate_floor,
        "write",
        "",
        2,
        None,
        "Test builds only: replicates MSGID.FLOOR with any value"
    ),
];

pub fn register(ctx: &Context) -> Status {
    if crate::registry::register(ctx, COMMANDS) == Status::Err {
        return Status::Err;
    }
    ctx.log_warning("imid: built with test-hooks: IMID.TEST-CLOCK, IMID.TEST-PANIC and IMID.TEST-REPLICATE-FLOOR are enabled; not for production");
    Status::Ok
}
