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

use crate::core::generator::{Clock, SystemClock};
use redis_module::{raw, Context, RedisError, RedisResult, RedisString, RedisValue, Status};
use std::ffi::CString;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};

const REAL: u8 = 0;
const OFFSET: u8 = 1;
const FROZEN: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(REAL);
static VALUE: AtomicI64 = AtomicI64::new(0);

pub fn now_ms() -> u64 {
    let real = SystemClock.now_ms();
    let v = VALUE.load(Ordering::Relaxed);
    match MODE.load(Ordering::Relaxed) {
        OFFSET => real.saturating_add_signed(v),
        FROZEN => u64::try_from(v).unwrap_or(0),
        _ => real,
    }
}

fn test_clock(_ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let mode = args
        .get(1)
        .map(|a| a.to_string_lossy().to_ascii_uppercase());
    let value = args.get(2).map(|a| a.parse_integer());
    match (mode.as_deref(), value, args.len()) {
        (Some("REAL"), None, 2) => MODE.store(REAL, Ordering::Relaxed),
        (Some("OFFSET"), Some(Ok(v)), 3) => {
            VALUE.store(v, Ordering::Relaxed);
            MODE.store(OFFSET, Ordering::Relaxed);
        }
        (Some("FREEZE"), Some(Ok(v)), 3) if v >= 0 => {
            VALUE.store(v, Ordering::Relaxed);
            MODE.store(FROZEN, Ordering::Relaxed);
        }
        _ => return Err(RedisError::Str("ERR syntax error")),
    }
    Ok(RedisValue::SimpleStringStatic("OK"))
}

fn test_panic(_ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let v: Vec<u8> = Vec::new();
    // An out-of-bounds index that the compiler cannot see through.
    Ok(RedisValue::Integer(i64::from(v[args.len()])))
}

macro_rules! raw_command {
    ($fname:ident, $handler:path) => {
        extern "C" fn $fname(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            let context = Context::new(ctx);
            let args = redis_module::decode_args(ctx, argv, argc);
            let r = crate::commands::guard(&context, args, $handler);
            context.reply(r) as c_int
        }
    };
}
raw_command!(test_clock_c, test_clock);
raw_command!(test_panic_c, test_panic);

pub fn register(ctx: &Context) -> Status {
    type Cmd =
        extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;
    let cmds: [(&str, Cmd); 2] = [
        ("imid.test-clock", test_clock_c),
        ("imid.test-panic", test_panic_c),
    ];
    for (name, f) in cmds {
        let (Ok(n), Ok(flags)) = (CString::new(name), CString::new("fast")) else {
            return Status::Err;
        };
        // SAFETY: the live OnLoad context; name and flags are NUL-terminated and copied by Redis.
        let rc = unsafe {
            raw::RedisModule_CreateCommand
                .map(|c| c(ctx.ctx, n.as_ptr(), Some(f), flags.as_ptr(), 0, 0, 0))
        };
        if rc != Some(raw::REDISMODULE_OK as c_int) {
            return Status::Err;
        }
    }
    ctx.log_warning("imid: built with test-hooks: IMID.TEST-CLOCK and IMID.TEST-PANIC are enabled; not for production");
    Status::Ok
}
