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
//! `IMID.TEST-PANIC-NEXT <entry>`: the next call from Redis into the entry named `<entry>`, as
//! the guard's log line names it (`digest`, `rdb_load`, `mem_usage`, `a config setter`, `the
//! cron event`, `the lease timer`, ...), panics inside the guard, once.
//! `IMID.TEST-REPLICATE-FLOOR <ms>`: writes `MSGID.FLOOR <ms>` to the AOF and replicas, as a
//! lease renewal does, without any check or local effect (to test what replay and replicas do
//! with a floor no client could set).

use crate::core::generator::system_now_ms;
use crate::error::{Error, SYNTAX};
use crate::glue::registry::{self, command};
use crate::glue::{Arg, Ctx, Entry};
use redis_module::{Context, Status};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
use std::sync::Mutex;

const REAL: u8 = 0;
const OFFSET: u8 = 1;
const FROZEN: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(REAL);
static VALUE: AtomicI64 = AtomicI64::new(0);

pub(crate) fn now_ms() -> u64 {
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

/// Whether IMID.TEST-PANIC-NEXT armed a panic, and the entry it is for.
static ARMED: AtomicBool = AtomicBool::new(false);
static PANIC_AT: Mutex<String> = Mutex::new(String::new());

fn test_panic_next(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, entry] = args else {
        return Err(Error::WrongArity);
    };
    let mut g = PANIC_AT.lock().unwrap_or_else(|e| e.into_inner());
    *g = String::from_utf8_lossy(entry.bytes()).into_owned();
    ARMED.store(true, Ordering::Relaxed);
    ctx.reply_ok();
    Ok(())
}

/// Called by `glue::guard` inside its `catch_unwind`, before the entry runs: panics there
/// once when IMID.TEST-PANIC-NEXT armed this entry.
#[allow(clippy::panic)] // the point of this hook
pub(crate) fn maybe_panic(entry: Entry) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let name = entry.to_string();
    let mut g = PANIC_AT.lock().unwrap_or_else(|e| e.into_inner());
    if !name.eq_ignore_ascii_case(&g) {
        return;
    }
    g.clear();
    ARMED.store(false, Ordering::Relaxed);
    drop(g);
    panic!("IMID.TEST-PANIC-NEXT armed for {name}");
}

fn test_replicate_floor(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, ms] = args else {
        return Err(Error::WrongArity);
    };
    ctx.replicate_arg(c"MSGID.FLOOR", ms);
    ctx.reply_ok();
    Ok(())
}

const COMMANDS: &[registry::Command] = &[
    command!(
        "imid.test-clock",
        test_clock,
        "fast",
        "",
        -2,
        None,
        "Test builds only: steers the module's wall clock"
    ),
    command!(
        "imid.test-panic",
        test_panic,
        "fast",
        "",
        1,
        None,
        "Test builds only: panics inside a guarded handler"
    ),
    command!(
        "imid.test-panic-next",
        test_panic_next,
        "fast",
        "",
        2,
        None,
        "Test builds only: the next call into the named entry panics"
    ),
    command!(
        "imid.test-replicate-floor",
        test_replicate_floor,
        "write",
        "",
        2,
        None,
        "Test builds only: replicates MSGID.FLOOR with any value"
    ),
];

pub(crate) fn register(ctx: &Context) -> Status {
    if registry::register(ctx, COMMANDS) == Status::Err {
        return Status::Err;
    }
    ctx.log_warning("imid: built with test-hooks: IMID.TEST-CLOCK, IMID.TEST-PANIC, IMID.TEST-PANIC-NEXT and IMID.TEST-REPLICATE-FLOOR are enabled; not for production");
    Status::Ok
}
