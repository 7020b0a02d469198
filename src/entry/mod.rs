//! The top floor: where Redis comes into imid. Every callback Redis makes (commands, data type
//! callbacks, configs, server events, the cluster bus receiver, the timers, the command filter,
//! the fence's blocked clients, INFO) is an `extern "C"` function here, and each enters through
//! one panic guard, [`guard`], but the two in `fence` that cannot panic. They decode their raw
//! arguments into the safe handles of `host` and call down into the handlers (`commands`), the
//! data types (`types`) and the node's state (`node`), which hold the rules. Registration
//! (commands, configs, data types, subscriptions) is here too. With `host`, the only layer whose
//! unsafe code touches Redis; nothing below imports it.
//!
//! The files: here the guard, a callback with nothing to answer ([`guarded`]) and a command's
//! entry ([`call`]); `load` (OnLoad, its steps in order); `registry` (command registration:
//! CreateCommand, SetCommandInfo, ACL categories); `config` (the configs' registration, the
//! string config callbacks); `data_type` (RDB, AOF, digest, memory, copy, free, aux data);
//! `events`; `cluster` (the bus receiver, the lease timer, the command filter); `migration`
//! (Valkey 9's and Redis 8.4+'s atomic slot migration); `fence`; `info` (INFO's `imid` section).

pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod data_type;
pub(crate) mod events;
pub(crate) mod fence;
pub(crate) mod info;
mod load;
pub(crate) mod migration;
pub(crate) mod registry;

use crate::error::{Error, INTERNAL};
use crate::host::{self, Arg, Ctx};
use redis_module::raw;
use std::fmt;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub(crate) use load::load;

/// What Redis called, for the log line of a caught panic (formatted only then).
#[derive(Clone, Copy)]
pub(crate) enum EntryPoint<'a> {
    /// A command, named by its argument 0.
    Command(&'a [Arg]),
    /// Any other callback, by a fixed name ("the lease timer", ...).
    Named(&'static str),
    /// A data type's callback, and the type's label (see `types::DataType::LABEL`):
    /// `rdb_load`, `rdb_load (sequence map)`.
    TypeCallback(&'static str, &'static str),
}

impl fmt::Display for EntryPoint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryPoint::Command(args) => match args.first() {
                Some(a) => f.write_str(&String::from_utf8_lossy(a.bytes())),
                None => f.write_str("a command"),
            },
            EntryPoint::Named(name) => f.write_str(name),
            EntryPoint::TypeCallback(name, "") => f.write_str(name),
            EntryPoint::TypeCallback(name, label) => write!(f, "{name} ({label})"),
        }
    }
}

/// The one guard every entry from Redis goes through: commands, server events, the timers, the
/// cluster bus receiver, the command filter, config getters and setters, both data types'
/// callbacks, a blocked client's reply and timeout. A panic must not unwind into Redis (that aborts
/// the server and loses the dataset in memory): it is caught, logged as `imid: internal error in
/// <entry>: <message>` (through `ctx`, or without a context when the callback has none), and the
/// entry returns `fallback()`, its own safe answer (an error reply, null, `REDISMODULE_ERR`,
/// nothing).
///
/// Costs nothing beyond the `catch_unwind` landing pad when nothing panics: the entry is
/// formatted and the fallback made only after a panic.
#[inline]
pub(crate) fn guard<T>(
    ctx: *mut raw::RedisModuleCtx,
    entry: EntryPoint,
    fallback: impl FnOnce() -> T,
    f: impl FnOnce() -> T,
) -> T {
    let run = || {
        #[cfg(feature = "test-hooks")]
        crate::node::test_hooks::maybe_panic(&entry);
        f()
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(v) => v,
        Err(payload) => {
            let msg = panic_text(payload.as_ref());
            host::log(
                ctx,
                c"warning",
                &format!("imid: internal error in {entry}: {msg}"),
            );
            fallback()
        }
    }
}

/// A callback with a context and nothing to answer (a server event, a timer): `f` runs inside
/// the guard with the call's [`Ctx`]; a panic is logged under `name`.
///
/// # Safety
/// `ctx` is the live context of the running callback.
pub(crate) unsafe fn guarded(
    ctx: *mut raw::RedisModuleCtx,
    name: &'static str,
    f: impl FnOnce(&Ctx),
) {
    // SAFETY: the caller's promise; the `Ctx` lives only within this call.
    let c = unsafe { Ctx::from_raw(ctx) };
    guard(ctx, EntryPoint::Named(name), || (), || f(&c));
}

/// A server event's callback for event `id` with data of type `T`: [`guarded`], with the data
/// read as `T`. Nothing runs for another event or without data.
///
/// # Safety
/// `ctx` is the live context of the running callback, and an event `id` passes, for the
/// callback's duration, a live `T` (or a later version of it that starts with its fields).
pub(crate) unsafe fn event_data<T>(
    ctx: *mut raw::RedisModuleCtx,
    (eid, id): (raw::RedisModuleEvent, u64),
    data: *mut std::ffi::c_void,
    name: &'static str,
    f: impl FnOnce(&Ctx, &T),
) {
    if eid.id != id || data.is_null() {
        return;
    }
    // SAFETY: the caller's promise.
    unsafe { guarded(ctx, name, |c| f(c, &*data.cast::<T>())) }
}

/// From Redis into a handler: the argument slice, the guard, the error reply. A handler parses,
/// computes, then replies through the context as its last step (so that a panic, caught here,
/// never leaves a half-written reply behind).
///
/// A panic becomes `ERR internal error` plus a log line naming the command.
///
/// Inlined into each command's C entry point with its handler, so that the handler is a direct
/// call the compiler can inline too: one call frame per command instead of three (measured on
/// UID.GEN's single-ID path).
#[inline(always)]
pub(crate) fn call(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: impl FnOnce(&Ctx, &[Arg]) -> Result<(), Error>,
) -> c_int {
    // SAFETY: Redis passes the live context and `argc` live strings in `argv` for the duration
    // of the call; neither outlives it.
    let (c, args) = unsafe { (Ctx::from_raw(ctx), Arg::from_raw(argv, argc)) };
    if let Err(e) = guard(
        ctx,
        EntryPoint::Command(args),
        || Err(INTERNAL),
        || handler(&c, args),
    ) {
        c.reply_error(&e);
    }
    raw::REDISMODULE_OK as c_int
}

/// The message of a caught panic.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_text_reads_both_payload_kinds() {
        let p = catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_text(p.as_ref()), "plain");
        let n = 3;
        let p = catch_unwind(|| panic!("formatted {n}")).unwrap_err();
        assert_eq!(panic_text(p.as_ref()), "formatted 3");
    }
}
