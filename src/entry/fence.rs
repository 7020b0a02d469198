//! The fence's callbacks (`node::fence` holds the rules): a blocked client's reply and free
//! callbacks, the event loop's before-sleep event, and the one-shot timers. A blocked client
//! has no Redis timeout and no timeout callback (`host::fence`, `Ctx::block`): the fence times
//! its calls out itself, so the reply callback is the one place a blocked call is answered. Handed
//! down to `host::fence` at load ([`install`]), which blocks clients, subscribes and arms
//! timers with them.

use super::{guard, guarded, EntryPoint};
use crate::host::fence::{set_hooks, Hooks, Timer};
use crate::host::Ctx;
use crate::node::fence::{self, Released};
use redis_module::raw;
use std::ffi::c_void;
use std::os::raw::c_int;

/// Hands the callbacks down (OnLoad).
pub(crate) fn install() {
    crate::host::aof::set_wake(Some(on_fsynced));
    set_hooks(Hooks {
        reply: Some(on_reply),
        free: Some(on_free),
        before_sleep: Some(on_loop),
        timer: Some(on_timer),
        replconf: Some(on_command),
    });
}

/// A released client: its reply, or the fence's error.
unsafe extern "C" fn on_reply(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: ctx is the live context of this reply callback.
    unsafe { answer(ctx, "a fenced reply", fence::reply_released) }
}

/// A blocked client's reply callback: `f` answers the client, inside the guard (an internal
/// error reply if it panics).
///
/// # Safety
/// `ctx` is the live context of the callback; the `Ctx` made from it is used only within it.
unsafe fn answer(ctx: *mut raw::RedisModuleCtx, name: &'static str, f: fn(&Ctx)) -> c_int {
    // SAFETY: the caller's promise.
    let c = unsafe { Ctx::from_raw(ctx) };
    guard(
        ctx,
        EntryPoint::Named(name),
        || c.reply_error(&crate::error::INTERNAL),
        || f(&c),
    );
    raw::REDISMODULE_OK as c_int
}

/// Frees what `host::fence::Blocked::unblock` passed: a `Box<Released>`, counted as dropped
/// when its client was gone (no reply callback ran).
unsafe extern "C" fn on_free(_ctx: *mut raw::RedisModuleCtx, p: *mut c_void) {
    if !p.is_null() {
        // SAFETY: every payload is a Box<Released> turned into a raw pointer by `unblock`
        // (the only caller, through `node::fence`), freed once, here.
        let released = unsafe { Box::from_raw(p.cast::<Released>()) };
        fence::freed(&released);
    }
}

/// The event loop's events (subscribed while clients wait): after it wakes, before it sleeps.
unsafe extern "C" fn on_loop(
    ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent == raw::REDISMODULE_SUBEVENT_EVENTLOOP_AFTER_SLEEP {
        fence::after_sleep();
        return;
    }
    if subevent != raw::REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP {
        return;
    }
    // SAFETY: ctx is the live context of this event callback.
    unsafe { guarded(ctx, "the fence's before-sleep event", fence::before_sleep) }
}

/// One of the fence's one-shot timers (`data` says which).
unsafe extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    let which = Timer::of(data);
    // SAFETY: ctx is the live context of this timer callback.
    unsafe { guarded(ctx, "the fence timer", |c| fence::on_timer(c, which)) }
}

/// imid's fsync thread finished a job (`host::aof`): run on the main thread by the event loop,
/// with no context.
unsafe extern "C" fn on_fsynced(_data: *mut c_void) {
    guard(
        std::ptr::null_mut(),
        EntryPoint::Named("the AOF fsync's completion"),
        || (),
        fence::fsynced,
    );
}

/// The command filter that reads what replicas report fsynced (registered once the fence is
/// first on: `Ctx::watch_replconf`): a replica's `REPLCONF ACK <offset> FACK <aof offset>`
/// (Redis 7.2+ and Valkey with AOF on), before Redis handles it. For any other command it
/// compares one byte and returns.
unsafe extern "C" fn on_command(f: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: f is this callback's live filter context (for every read below).
    let first = unsafe { super::cluster::filter_arg(f, 0) };
    if !first.is_some_and(|a| a.first().is_some_and(|b| b.eq_ignore_ascii_case(&b'r'))) {
        return;
    }
    guard(
        std::ptr::null_mut(),
        EntryPoint::Named("the REPLCONF filter"),
        || (),
        || {
            // SAFETY: as above.
            let args = unsafe { [0, 1, 2, 3, 4].map(|i| super::cluster::filter_arg(f, i)) };
            let word = |i: usize, w: &[u8]| {
                args.get(i)
                    .copied()
                    .flatten()
                    .is_some_and(|a| a.eq_ignore_ascii_case(w))
            };
            let num = |i: usize| {
                args.get(i)
                    .copied()
                    .flatten()
                    .and_then(|a| std::str::from_utf8(a).ok()?.parse::<u64>().ok())
            };
            if !(word(0, b"REPLCONF") && word(1, b"ACK") && word(3, b"FACK")) {
                return;
            }
            // SAFETY: as above; the client id of the filtered command (Redis 7.2+, which is
            // where FACK exists).
            let client = unsafe { raw::RedisModule_CommandFilterGetClientId.map(|g| g(f)) };
            if let (Some(client), Some(ack), Some(fsynced)) = (client, num(2), num(4)) {
                fence::replica_acked(client, ack, fsynced);
            }
        },
    );
}
