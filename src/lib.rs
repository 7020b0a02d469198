//! imid: identifiers for instant-messaging backends, natively inside Redis.
//!
//! This file is the table of contents: the module, its commands, its configs, and init.
//! Redis-free logic lives in `core/`, command handlers in `commands/`.

mod command_info;
pub mod commands;
pub mod config;
pub mod core;
mod seq_type;
mod stats;
#[cfg(feature = "test-hooks")]
mod test_hooks;

/// The wall clock the generator reads: the system clock, or the tests' steerable clock in a
/// build with the `test-hooks` feature.
pub fn now_ms() -> u64 {
    #[cfg(feature = "test-hooks")]
    return test_hooks::now_ms();
    #[cfg(not(feature = "test-hooks"))]
    core::generator::Clock::now_ms(&core::generator::SystemClock)
}

use config::CLUSTER_MODE;
use redis_module::{raw, redis_module, Context, ContextFlags, RedisString, Status};
use seq_type::SEQ_TYPE;
use std::os::raw::c_int;
use std::sync::atomic::Ordering;

/// The global allocator: Redis's own inside redis-server (so `used_memory` and `MEMORY USAGE`
/// see our allocations), the system allocator in unit tests and benches, which run without a
/// server (Redis's allocator aborts there).
#[cfg(not(any(test, feature = "system-alloc")))]
mod allocator {
    pub type Alloc = redis_module::alloc::RedisAlloc;
    pub const ALLOC: Alloc = redis_module::alloc::RedisAlloc;
}
#[cfg(any(test, feature = "system-alloc"))]
mod allocator {
    pub type Alloc = std::alloc::System;
    pub const ALLOC: Alloc = std::alloc::System;
}

/// Module version as Redis shows it (`MODULE LIST`): major*10000 + minor*100 + patch.
pub const MODULE_VERSION: i32 = 100;

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    // Configs are registered here rather than in the macro's table because the macro ignores
    // a failed RedisModule_LoadConfigs: a `MODULE LOADEX ... CONFIG imid.x <bad>` would then
    // leave the module loaded with defaults (it cannot be unloaded once it has a data type),
    // e.g. encoding plain public IDs when keys were asked for. Failing OnLoad unloads it cleanly.
    if config::register(ctx, args) == Status::Err {
        return Status::Err;
    }
    CLUSTER_MODE.store(
        ctx.get_flags().contains(ContextFlags::CLUSTER),
        Ordering::Relaxed,
    );
    #[cfg(feature = "test-hooks")]
    if test_hooks::register(ctx) == Status::Err {
        return Status::Err;
    }
    // SAFETY: ctx.ctx is the live context of OnLoad; SetModuleOptions is filled in at load.
    // With this option a truncated or mistyped RDB/DUMP payload makes our loader fail (RESTORE
    // replies an error) instead of Redis aborting the server.
    unsafe {
        if let Some(set_options) = raw::RedisModule_SetModuleOptions {
            set_options(ctx.ctx, raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int);
        }
    }
    command_info::register(ctx)
}

redis_module! {
    name: "imid",
    version: MODULE_VERSION,
    allocator: (allocator::Alloc, allocator::ALLOC),
    data_types: [SEQ_TYPE],
    init: init,
    commands: [
        // name (lowercase, as Redis lists its own), handler, flags, first key, last key, key
        // step, ACL categories (none: Redis 7.0 has no module ACL categories)
        ["msgid.gen", guarded!(commands::msgid::gen), "write fast", 2, 2, 1, ""],
        ["msgid.encode", guarded!(commands::msgid::encode), "readonly fast", 0, 0, 0, ""],
        ["msgid.decode", guarded!(commands::msgid::decode), "readonly fast", 0, 0, 0, ""],
        ["msgid.hash", guarded!(commands::msgid::hash), "readonly fast", 0, 0, 0, ""],
        ["msgid.floor", guarded!(commands::msgid::floor), "write fast", 0, 0, 0, ""],
        ["openid.enc", guarded!(commands::openid::enc), "readonly fast", 0, 0, 0, ""],
        ["openid.dec", guarded!(commands::openid::dec), "readonly fast", 0, 0, 0, ""],
        ["seq.next", guarded!(commands::seq::next), "write deny-oom fast", 1, 1, 1, ""],
        ["seq.get", guarded!(commands::seq::get), "readonly fast", 1, 1, 1, ""],
        ["seq.mget", guarded!(commands::seq::mget), "readonly fast", 1, -1, 1, ""],
        ["seq.set", guarded!(commands::seq::set), "write deny-oom fast", 1, 1, 1, ""],
        ["seq.advance", guarded!(commands::seq::advance), "write deny-oom fast", 1, 1, 1, ""],
    ],
}
