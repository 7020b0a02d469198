//! Command handlers, one file per family, plus what they share: the panic guard, argument
//! parsing, error construction and replies with named fields.

pub mod msgid;
pub mod openid;
pub mod seq;
pub mod uid;

use redis_module::{raw, Context, RedisError, RedisResult, RedisString, RedisValue};
use std::os::raw::{c_char, c_long};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A handler as the registration table (`lib.rs`, `registry.rs`) takes it.
pub type Handler = fn(&Context, Vec<RedisString>) -> RedisResult;

/// Runs a handler so that a panic becomes `ERR internal error` and a log line instead of
/// unwinding into Redis (which would abort the server and lose the dataset in memory).
///
/// Handlers compute their whole reply before writing any of it, so a panic never leaves a
/// half-written reply behind.
pub fn guard(ctx: &Context, args: Vec<RedisString>, handler: Handler) -> RedisResult {
    // The command name is only needed for the log line after a panic: keep the pointer (the
    // client's argv holds the string for the whole call) and make the text only then. Copying
    // it into a String on every call cost ~220 instructions per command (callgrind).
    let name = args.first().map(|a| a.inner);
    run_guarded(
        || handler(ctx, args),
        |msg| {
            let name = name
                .map(|n| String::from_utf8_lossy(RedisString::string_as_slice(n)).into_owned())
                .unwrap_or_default();
            ctx.log_warning(&format!("imid: internal error in {name}: {msg}"))
        },
    )
}

/// The Redis-free part of [`guard`], unit-tested with a panicking closure.
pub fn run_guarded<T>(
    f: impl FnOnce() -> Result<T, RedisError>,
    log: impl FnOnce(&str),
) -> Result<T, RedisError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_owned());
            log(&msg);
            Err(RedisError::Str("ERR internal error"))
        }
    }
}

/// An `ERR` reply naming the rule broken.
pub fn err(msg: impl std::fmt::Display) -> RedisError {
    RedisError::String(format!("ERR {msg}"))
}

/// Redis's own WRONGTYPE text, as for a GET on a list.
pub fn wrongtype() -> RedisError {
    RedisError::Str("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// An integer argument in `min..=max`; anything else (not an integer, out of range) is an
/// `ERR` naming the argument and its range.
pub fn int_arg(arg: &RedisString, name: &str, min: i64, max: i64) -> Result<i64, RedisError> {
    match arg.parse_integer() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(err(format_args!(
            "{name} must be an integer in {min}..{max}"
        ))),
    }
}

/// A reply value for [`reply_fields`].
pub enum Val<'a> {
    Int(i64),
    Bulk(&'a [u8]),
}

fn reply_val(ctx: &Context, v: &Val) {
    match v {
        Val::Int(i) => {
            raw::reply_with_long_long(ctx.ctx, *i);
        }
        Val::Bulk(b) => {
            raw::reply_with_string_buffer(ctx.ctx, b.as_ptr().cast::<c_char>(), b.len());
        }
    }
}

/// Named fields in the documented order: a RESP3 map after `HELLO 3`, else a flat array of
/// name/value pairs (Redis turns the map header into an array of twice the length on RESP2).
pub fn reply_fields(ctx: &Context, fields: &[(&str, Val)]) -> RedisResult {
    raw::reply_with_map(ctx.ctx, fields.len() as c_long);
    for (name, v) in fields {
        reply_val(ctx, &Val::Bulk(name.as_bytes()));
        reply_val(ctx, v);
    }
    Ok(RedisValue::NoReply)
}

/// A bulk string reply without an intermediate allocation.
pub fn reply_bulk(ctx: &Context, bytes: &[u8]) -> RedisResult {
    reply_val(ctx, &Val::Bulk(bytes));
    Ok(RedisValue::NoReply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_panic_into_internal_error() {
        let mut logged = String::new();
        let r: Result<u8, _> = run_guarded(
            || {
                let v: Vec<u8> = Vec::new();
                let i = v.len() + 3;
                Ok(v[i]) // index out of bounds
            },
            |m| logged = m.to_owned(),
        );
        match r {
            Err(RedisError::Str(s)) => assert_eq!(s, "ERR internal error"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(logged.contains("index out of bounds"), "{logged}");
    }

    #[test]
    fn guard_passes_results_through() {
        let r = run_guarded(|| Ok(7), |_| panic!("no log expected"));
        assert_eq!(r.ok(), Some(7));
        let r: Result<(), _> = run_guarded(|| Err(err("x")), |_| panic!("no log expected"));
        assert!(matches!(r, Err(RedisError::String(s)) if s == "ERR x"));
    }
}
