//! Server events imid listens to.

use crate::glue::Ctx;
use crate::node;
use redis_module::{raw, Context, Status};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

/// Subscribes to the events imid acts on: the end of forked children (AOF rewrites, RDB
/// saves), the start of a load, and a change of replication role.
pub fn subscribe(ctx: &Context) -> Status {
    let events = [
        (raw::REDISMODULE_EVENT_FORK_CHILD, on_fork_child as Callback),
        (raw::REDISMODULE_EVENT_LOADING, on_inherit as Callback),
        (
            raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
            on_inherit as Callback,
        ),
    ];
    for (id, callback) in events {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: ctx.ctx is the live context of OnLoad; the callback matches the C signature.
        let rc = unsafe {
            match raw::RedisModule_SubscribeToServerEvent {
                Some(subscribe) => subscribe(ctx.ctx, event, Some(callback)),
                None => raw::REDISMODULE_ERR as i32,
            }
        };
        if rc != raw::REDISMODULE_OK as i32 {
            ctx.log_warning(&format!("imid: cannot subscribe to server event {id}"));
            return Status::Err;
        }
    }
    Status::Ok
}

type Callback =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut c_void);

/// A load (RDB or AOF at startup, a full sync from a primary, DEBUG RELOAD) or a role change
/// (this node becomes a replica, or is promoted): from now on a missing sequence key may be
/// one whose writes were lost, so its first SEQ.NEXT skips the gap (see `node::inherited`).
unsafe extern "C" fn on_inherit(
    _ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    let inherits = match eid.id {
        raw::REDISMODULE_EVENT_LOADING => matches!(
            subevent,
            raw::REDISMODULE_SUBEVENT_LOADING_RDB_START
                | raw::REDISMODULE_SUBEVENT_LOADING_AOF_START
                | raw::REDISMODULE_SUBEVENT_LOADING_REPL_START
        ),
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED => true,
        _ => false,
    };
    if inherits {
        node::mark_inherited();
    }
    // A promoted replica takes over its primary's slots: adopt them again (node::cluster).
    if eid.id == raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED {
        node::cluster::forget_all();
    }
}

/// When a forked child has exited, the primary writes its time high-water mark again (see
/// `node::ids::after_fork_child`).
unsafe extern "C" fn on_fork_child(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if eid.id != raw::REDISMODULE_EVENT_FORK_CHILD
        || subevent != raw::REDISMODULE_SUBEVENT_FORK_CHILD_DIED
    {
        return;
    }
    write_mark_or_retry(ctx);
}

/// How often a mark deferred by paused writes is tried again.
const PAUSED_RETRY_MS: i64 = 100;
/// A retry timer is armed (one at a time, however many children exit during a pause).
static RETRY_ARMED: AtomicBool = AtomicBool::new(false);

/// Writes the mark after a child exited, or, while writes are paused, arms a timer that tries
/// again every PAUSED_RETRY_MS until the pause is over (pauses end: they have a timeout, and a
/// failover's ends with the failover).
fn write_mark_or_retry(ctx: *mut raw::RedisModuleCtx) {
    // A panic must not unwind into Redis (that aborts the server).
    let r = std::panic::catch_unwind(|| {
        // SAFETY: ctx is the live context of the running callback, used only within it.
        let c = unsafe { Ctx::from_raw(ctx) };
        node::ids::after_fork_child(&c)
    });
    match r {
        Ok(true) => {}
        Ok(false) => {
            if !RETRY_ARMED.swap(true, Ordering::Relaxed) {
                // SAFETY: ctx is a live context; the callback matches the timer signature.
                unsafe {
                    if let Some(f) = raw::RedisModule_CreateTimer {
                        f(ctx, PAUSED_RETRY_MS, Some(on_retry), std::ptr::null_mut());
                    }
                }
            }
        }
        Err(_) => {
            // SAFETY: as above.
            unsafe { Ctx::from_raw(ctx) }
                .log_warning("imid: internal error after a forked child exited");
        }
    }
}

unsafe extern "C" fn on_retry(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    RETRY_ARMED.store(false, Ordering::Relaxed);
    write_mark_or_retry(ctx);
}
