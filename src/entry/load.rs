//! OnLoad: what imid does when Redis loads it, in the one order that leaves nothing behind when a
//! step fails.

use super::registry::{self, Command};
use super::{cluster, config, data_type, events, fence, guard, migration, EntryPoint};
use crate::config::CLUSTER_MODE;
use crate::host::{self, Ctx};
use crate::node;
use redis_module::{Context, ContextFlags, RedisString, Status};
use std::sync::atomic::Ordering;

/// OnLoad, through the guard: a panic fails the load instead of aborting the server. `tables`:
/// the commands to register (`lib.rs`).
pub(crate) fn load(ctx: &Context, args: &[RedisString], tables: &[&[Command]]) -> Status {
    guard(
        ctx.ctx,
        EntryPoint::Named("OnLoad"),
        || Status::Err,
        || steps(ctx, args, tables),
    )
}

/// OnLoad's own steps, in the one order that leaves nothing behind when a step fails: Redis
/// then unloads the library, but it removes only commands, configs and (Redis 7.2+, Valkey)
/// event subscriptions and filters. It keeps timers, cluster-bus receivers and (Redis 7.0) event
/// subscriptions and filters pointing into the unloaded code, and a server crashes on the next
/// cron tick or message. So every step that can fail comes first (configs loaded and checked,
/// the UID layout, commands registered), then the data types (they fail only when another module
/// holds its name), and only then what calls into the module on its own: server events, then
/// (cluster mode) the command filter, after which nothing can fail; the bus receiver and the
/// lease timer wait for the first cron tick (see `entry::cluster::init`). (The `redis_module!`
/// macro's own steps before this function, the INFO callback, live in the module's structure
/// and go with it.)
fn steps(ctx: &Context, args: &[RedisString], tables: &[&[Command]]) -> Status {
    // Configs are registered here rather than in the macro's table because the macro ignores
    // a failed RedisModule_LoadConfigs: a `MODULE LOADEX ... CONFIG imid.x <bad>` would then
    // leave the module loaded with defaults, e.g. encoding plain public IDs when keys were
    // asked for. Failing OnLoad unloads it cleanly.
    if config::register(ctx, args) == Status::Err {
        return Status::Err;
    }
    // SAFETY: ctx.ctx is the live context of OnLoad, and `c` lives only within it.
    let c = unsafe { Ctx::from_raw(ctx.ctx) };
    let cluster = ctx.get_flags().contains(ContextFlags::CLUSTER);
    CLUSTER_MODE.store(cluster, Ordering::Relaxed);
    if let Err(e) = node::ids::configure_uid(node::now_ms(), cluster) {
        c.log_warning(&format!("imid: {e}; not loading"));
        return Status::Err;
    }
    #[cfg(feature = "test-hooks")]
    c.log_warning("imid: built with test-hooks: IMID.TEST-CLOCK, IMID.TEST-PANIC, IMID.TEST-PANIC-NEXT, IMID.TEST-REPLICATE-FLOOR, IMID.TEST-DEAF and IMID.TEST-MAP-PENDING are enabled; not for production");
    registry::add_module_category(&c);
    if !tables.iter().all(|t| registry::register(&c, t)) {
        return Status::Err;
    }
    host::server::set_module_options(&c, cluster && host::server::is_valkey());
    if !data_type::create(&c) {
        return Status::Err;
    }
    // A subscription refused undoes the earlier ones before failing.
    if !events::subscribe(&c) {
        return Status::Err;
    }
    // Nothing below can fail. The gate's callbacks, its configs, the AOF's mode and this node's
    // role (`node::fence`); its timers, event and filter come later, from commands and the cron.
    fence::install();
    node::fence::load(&c);
    if cluster {
        cluster::init(&c);
        migration::subscribe(&c);
    }
    Status::Ok
}
