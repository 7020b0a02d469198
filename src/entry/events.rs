//! Server event subscription and the raw event callbacks: each decodes its event into an
//! [`Event`] and runs `node::events::on_event` inside [`guard`].

use super::guarded;
use crate::config::CLUSTER_MODE;
use crate::host::Ctx;
use crate::node::events::{on_event, Event};
use redis_module::raw;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// Subscribes to the events imid acts on: forked children (AOF rewrites, RDB saves) and
/// synchronous saves, the start of a load, a change of replication role, the server's cron,
/// and a changed config (the AOF's settings: `node::durable`).
/// All or nothing: when the server refuses one (an event it does not know), the earlier ones
/// are cancelled before the load fails, since Redis 7.0 keeps the subscriptions of a module
/// whose load failed and would call into the unloaded library on the next event.
pub(crate) fn subscribe(ctx: &Ctx) -> bool {
    let events = [
        raw::REDISMODULE_EVENT_FORK_CHILD,
        raw::REDISMODULE_EVENT_PERSISTENCE,
        raw::REDISMODULE_EVENT_LOADING,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        raw::REDISMODULE_EVENT_CRON_LOOP,
        raw::REDISMODULE_EVENT_CONFIG,
    ];
    let set = |id: u64, callback: raw::RedisModuleEventCallback| {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: ctx is the live context of OnLoad; the callback matches the C signature
        // and lives as long as the module (None cancels this module's subscription).
        unsafe {
            match raw::RedisModule_SubscribeToServerEvent {
                Some(subscribe) => subscribe(ctx.raw(), event, callback),
                None => raw::REDISMODULE_ERR as i32,
            }
        }
    };
    for (done, id) in events.iter().enumerate() {
        if set(*id, Some(on_server_event)) != raw::REDISMODULE_OK as i32 {
            ctx.log_warning(&format!(
                "imid: cannot subscribe to server event {id}; not loading"
            ));
            for earlier in events.iter().take(done) {
                set(*earlier, None);
            }
            return false;
        }
    }
    true
}

/// The event imid acts on, with the name its log line uses should it panic; `None` for the
/// subevents it ignores.
fn decode(id: u64, subevent: u64) -> Option<(Event, &'static str)> {
    let event = match id {
        raw::REDISMODULE_EVENT_LOADING => match subevent {
            raw::REDISMODULE_SUBEVENT_LOADING_RDB_START
            | raw::REDISMODULE_SUBEVENT_LOADING_AOF_START
            | raw::REDISMODULE_SUBEVENT_LOADING_REPL_START => (Event::LoadStart, "a load event"),
            raw::REDISMODULE_SUBEVENT_LOADING_ENDED => (Event::LoadEnd, "a load event"),
            _ => return None,
        },
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED => (
            Event::RoleChanged {
                primary: subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER,
            },
            "a role event",
        ),
        raw::REDISMODULE_EVENT_FORK_CHILD => match subevent {
            raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN => (Event::ForkBorn, "a fork event"),
            raw::REDISMODULE_SUBEVENT_FORK_CHILD_DIED => (Event::ForkDied, "a fork event"),
            _ => return None,
        },
        raw::REDISMODULE_EVENT_PERSISTENCE => match subevent {
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_SYNC_RDB_START => {
                (Event::SyncSaveStart, "a persistence event")
            }
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_ENDED => {
                (Event::SaveEnded { ok: true }, "a persistence event")
            }
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_FAILED => {
                (Event::SaveEnded { ok: false }, "a persistence event")
            }
            _ => return None,
        },
        raw::REDISMODULE_EVENT_CRON_LOOP => (Event::Cron, "the cron event"),
        raw::REDISMODULE_EVENT_CONFIG => (Event::ConfigChanged, "a config event"),
        _ => return None,
    };
    Some(event)
}

/// The one callback of every subscribed event.
unsafe extern "C" fn on_server_event(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    let Some((event, name)) = decode(eid.id, subevent) else {
        return;
    };
    // SAFETY: ctx is the live context of this event callback.
    unsafe {
        guarded(ctx, name, |c| {
            // In cluster mode the first cron tick registers the bus receiver and arms the lease
            // timer (not in OnLoad: see `super::cluster::init`).
            if event == Event::Cron && CLUSTER_MODE.load(Ordering::Relaxed) {
                super::cluster::arm_once(c);
            }
            // Maps a write left with background work, stepped a bounded time per tick.
            if event == Event::Cron {
                crate::types::map::idle::on_cron(c);
            }
            on_event(c, event)
        })
    }
}
