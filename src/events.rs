//! Server events imid listens to.

use crate::glue::Ctx;
use crate::node;
use redis_module::{raw, Context, Status};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

/// Subscribes to the events imid acts on: forked children (AOF rewrites, RDB saves) and
/// synchronous saves, the start of a load, a change of replication role, and the server's cron.
pub fn subscribe(ctx: &Context) -> Status {
    let events = [
        (raw::REDISMODULE_EVENT_FORK_CHILD, on_fork_child as Callback),
        (
            raw::REDISMODULE_EVENT_PERSISTENCE,
            on_persistence as Callback,
        ),
        (raw::REDISMODULE_EVENT_LOADING, on_inherit as Callback),
        (
            raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
            on_inherit as Callback,
        ),
        (raw::REDISMODULE_EVENT_CRON_LOOP, on_cron as Callback),
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
    // A promoted replica takes over its primary's slots (node::cluster); a replica imports
    // nothing. Only cluster mode has slots to adopt.
    if eid.id == raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED
        && crate::config::CLUSTER_MODE.load(std::sync::atomic::Ordering::Relaxed)
    {
        match subevent {
            raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER => node::cluster::promoted(),
            _ => node::cluster::demoted(),
        }
    }
}

/// A forked child was born (the start of a BGSAVE's snapshot) or has exited: the snapshot
/// bookkeeping (`node::exposure`), and after an exit the primary writes its time high-water
/// mark again (see `node::ids::after_fork_child`).
unsafe extern "C" fn on_fork_child(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if eid.id != raw::REDISMODULE_EVENT_FORK_CHILD {
        return;
    }
    guarded(ctx, "a fork event", |ctx| match subevent {
        raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN => node::exposure::on_fork_born(),
        raw::REDISMODULE_SUBEVENT_FORK_CHILD_DIED => {
            node::exposure::on_fork_died();
            if !node::ids::after_fork_child(ctx) {
                MARK_PENDING.store(true, Ordering::Relaxed);
            }
        }
        _ => {}
    });
}

/// A synchronous save starts or a save ends (`node::exposure`). A BGSAVE's own start and end
/// events fire inside its child, where they change nothing.
unsafe extern "C" fn on_persistence(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if eid.id != raw::REDISMODULE_EVENT_PERSISTENCE {
        return;
    }
    guarded(ctx, "a persistence event", |_| match subevent {
        raw::REDISMODULE_SUBEVENT_PERSISTENCE_SYNC_RDB_START => {
            node::exposure::on_sync_save_start()
        }
        raw::REDISMODULE_SUBEVENT_PERSISTENCE_ENDED => node::exposure::on_save_end(true),
        raw::REDISMODULE_SUBEVENT_PERSISTENCE_FAILED => node::exposure::on_save_end(false),
        _ => {}
    });
}

/// The server's cron (`hz` times a second): the exposure warning, if due.
unsafe extern "C" fn on_cron(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    if eid.id != raw::REDISMODULE_EVENT_CRON_LOOP {
        return;
    }
    guarded(ctx, "the cron event", |ctx| {
        node::exposure::on_cron(ctx);
        // A mark deferred by paused writes, once the pause is over.
        if MARK_PENDING.load(Ordering::Relaxed) && node::ids::after_fork_child(ctx) {
            MARK_PENDING.store(false, Ordering::Relaxed);
        }
    });
}

/// The time mark to write after a forked child exited was deferred: writes were paused then
/// (`node::ids::after_fork_child`); the cron writes it once they are not.
static MARK_PENDING: AtomicBool = AtomicBool::new(false);

/// Runs an event handler with the callback's context. A panic must not unwind into Redis (that
/// aborts the server): it is caught and logged.
///
/// # Safety
/// `ctx` must be the live context of the running event callback.
unsafe fn guarded(ctx: *mut raw::RedisModuleCtx, what: &str, f: impl FnOnce(&Ctx)) {
    // SAFETY: per this function's contract; the Ctx lives only within the callback.
    let c = unsafe { Ctx::from_raw(ctx) };
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&c))).is_err() {
        c.log_warning(&format!("imid: internal error in {what}"));
    }
}
