//! The configs' registration (from OnLoad, starting from the module arguments) and the raw
//! string config callbacks (getter, setter). What a config accepts and holds is safe Rust in
//! `config` (the values, [`StringConfig`], the module arguments' rules).

use super::{guard, EntryPoint};
use crate::config::{
    parse_args, FenceAck, IntConfig, StringConfig, TextConfig, FENCE_ACK, FENCE_REPLICAS,
    FENCE_TIMEOUT, MSGID_HASH, OPENID_KEYS, SEQ_GAP, SEQ_GAP_MAX, SEQ_IDMP_MAX, SEQ_IDMP_TTL,
    UID_EPOCH, UID_LAYOUT, UID_NODE, UID_TIME_UNIT,
};
use crate::host::string::HeldString;
use redis_module::configuration::{
    register_enum_configuration, register_i64_configuration, ConfigurationFlags,
};
use redis_module::{raw, Context, RedisString, Status};
use std::ffi::{c_void, CStr, CString};
use std::os::raw::{c_char, c_int};

/// Redis's getter for a [`StringConfig`]; `privdata` is the `&'static T` registered.
unsafe extern "C" fn get<T: StringConfig>(
    _name: *const c_char,
    privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    guard(
        std::ptr::null_mut(),
        EntryPoint::Named("a config getter"),
        std::ptr::null_mut,
        || {
            // SAFETY: register passes a `&'static T` as privdata, only ever read shared.
            let cfg = unsafe { privdata.cast::<T>().as_ref() };
            cfg.and_then(T::held)
                .map_or(std::ptr::null_mut(), |h| h.as_raw())
        },
    )
}

/// Redis's setter for a [`StringConfig`]. `val` belongs to Redis (it frees it after the call);
/// an error string handed back through `err` is freed by Redis too.
unsafe extern "C" fn set<T: StringConfig>(
    _name: *const c_char,
    val: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: register passes a `&'static T` as privdata, only ever read shared.
    let cfg = unsafe { privdata.cast::<T>().as_ref() };
    let prefix = move || cfg.map_or("", T::prefix);
    let result = guard(
        std::ptr::null_mut(),
        EntryPoint::Named("a config setter"),
        || Err(format!("{}internal error", prefix())),
        || match cfg {
            Some(cfg) if !val.is_null() => cfg.set(redis_module::RedisString::string_as_slice(val)),
            _ => Err(format!("{}no value", prefix())),
        },
    );
    match result {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(msg) => {
            if !err.is_null() {
                if let Some(s) = HeldString::new(msg.as_bytes()) {
                    // SAFETY: err is Redis's out-pointer for this call; Redis frees the string.
                    unsafe { *err = s.into_raw() };
                }
            }
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// `imid.fence-replicas` was set (CONFIG SET): the fence follows at once, not at the next cron
/// tick, so that calls right after the CONFIG SET see the new count. Redis gives this callback
/// a context without a client (`REDISMODULE_CTX_NONE`), on which `RedisModule_Call` and
/// anything else that needs one crashes the server: no `Ctx` is made from it, and nothing
/// below calls into Redis.
unsafe extern "C" fn fence_replicas_applied(
    ctx: *mut raw::RedisModuleCtx,
    _privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    guard(
        ctx,
        EntryPoint::Named("a config apply"),
        || (),
        crate::node::fence::config_applied,
    );
    raw::REDISMODULE_OK as c_int
}

/// Registers `imid.<name>` as a string config backed by `cfg`, with its default and flags.
/// Registered directly rather than through the crate's `ConfigurationValue<RedisString>`,
/// whose getter makes a new string per call for Redis to copy and never free.
fn register_string<T: StringConfig>(
    ctx: &Context,
    name: &CStr,
    cfg: &'static T,
    default: &CStr,
    flags: u32,
    apply: raw::RedisModuleConfigApplyFunc,
) -> bool {
    let privdata = std::ptr::from_ref(cfg).cast_mut().cast::<c_void>();
    // SAFETY: ctx.ctx is the live OnLoad context; name and default are NUL-terminated and
    // copied by Redis; the callbacks match the C signatures and, like `cfg` (privdata, only
    // ever read through a shared reference), live as long as the module.
    let rc = unsafe {
        raw::RedisModule_RegisterStringConfig.map(|register| {
            register(
                ctx.ctx,
                name.as_ptr(),
                default.as_ptr(),
                flags,
                Some(get::<T>),
                Some(set::<T>),
                apply,
                privdata,
            )
        })
    };
    rc == Some(raw::REDISMODULE_OK as c_int)
}

/// Applies the config values queued for the module (`imid.<name> value` lines, `MODULE LOADEX
/// ... CONFIG`); false when one was refused.
fn load_configs(ctx: &Context) -> bool {
    // SAFETY: ctx.ctx is the live OnLoad context; LoadConfigs exists on Redis 7.0+.
    let rc = unsafe { raw::RedisModule_LoadConfigs.map(|load| load(ctx.ctx)) };
    rc == Some(raw::REDISMODULE_OK as c_int)
}

/// Registers `imid.<name>` as a [`TextConfig`] with its default and flags.
fn register_text_config(
    ctx: &Context,
    name: &std::ffi::CStr,
    cfg: &'static TextConfig<()>,
    default: &str,
    flags: ConfigurationFlags,
) -> Status {
    let Ok(default) = CString::new(default) else {
        ctx.log_warning("imid: a module argument must not contain NUL");
        return Status::Err;
    };
    if register_string(ctx, name, cfg, &default, flags.bits(), None) {
        Status::Ok
    } else {
        ctx.log_warning(&format!(
            "imid: could not register config {}",
            name.to_string_lossy()
        ));
        Status::Err
    }
}

/// Registers `imid.<name>` as a numeric config starting at `start`.
fn register_int(ctx: &Context, cfg: &'static IntConfig, start: i64) {
    let (min, max) = cfg.range;
    register_i64_configuration(
        ctx,
        cfg.name,
        &cfg.value,
        start,
        min,
        max,
        ConfigurationFlags::DEFAULT,
        None,
    );
}

/// Registers `imid.openid-keys` starting at `keys`.
fn register_openid_keys(ctx: &Context, keys: String) -> Status {
    // SENSITIVE asks Redis to redact CONFIG SET's value (Redis 7.0.15 still shows it in SLOWLOG and
    // MONITOR; docs/commands.md says so). HIDDEN leaves it out of pattern queries (`CONFIG GET *`),
    // so config dumps do not carry keys; `CONFIG GET imid.openid-keys` by exact name and CONFIG
    // REWRITE still see them.
    let Ok(keys) = CString::new(keys) else {
        ctx.log_warning("imid: module argument openid-keys must not contain NUL");
        return Status::Err;
    };
    let flags = ConfigurationFlags::SENSITIVE | ConfigurationFlags::HIDDEN;
    if !register_string(ctx, c"openid-keys", &OPENID_KEYS, &keys, flags.bits(), None) {
        ctx.log_warning("imid: could not register config openid-keys");
        return Status::Err;
    }
    Status::Ok
}

/// Registers the UID configs, set at load only (`IMMUTABLE`), starting at the layout, epoch,
/// time unit and node given.
fn register_uid_configs(ctx: &Context, [layout, epoch, unit, node]: [&str; 4]) -> Status {
    let uid_configs = [
        (c"uid-layout", &UID_LAYOUT, layout),
        (c"uid-epoch", &UID_EPOCH, epoch),
        (c"uid-time-unit", &UID_TIME_UNIT, unit),
        (c"uid-node", &UID_NODE, node),
    ];
    for (name, cfg, default) in uid_configs {
        if register_text_config(ctx, name, cfg, default, ConfigurationFlags::IMMUTABLE)
            == Status::Err
        {
            return Status::Err;
        }
    }
    Status::Ok
}

/// Registers the fence's configs (`node::fence`): `imid.fence-replicas` (a count or `auto`),
/// its bound `imid.fence-timeout` and `imid.fence-ack`.
fn register_fence_configs(ctx: &Context, replicas: String, timeout: i64, ack: FenceAck) -> Status {
    let Ok(replicas) = CString::new(replicas) else {
        return Status::Err;
    };
    if !register_string(
        ctx,
        c"fence-replicas",
        &FENCE_REPLICAS,
        &replicas,
        ConfigurationFlags::DEFAULT.bits(),
        Some(fence_replicas_applied),
    ) {
        ctx.log_warning("imid: could not register config fence-replicas");
        return Status::Err;
    }
    register_int(ctx, &FENCE_TIMEOUT, timeout);
    register_enum_configuration(
        ctx,
        "fence-ack",
        &FENCE_ACK,
        ack,
        ConfigurationFlags::DEFAULT,
        None,
    );
    Status::Ok
}

/// Registers the module configs, starting from the module arguments ([`parse_args`]), and
/// applies the values queued for them (`imid.<name> value` config lines, `--imid.*`,
/// `MODULE LOADEX ... CONFIG`). A refused argument or value fails the load.
pub(crate) fn register(ctx: &Context, args: &[RedisString]) -> Status {
    let raw: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    let start = match parse_args(&raw) {
        Ok(s) => s,
        Err(e) => {
            ctx.log_warning(&format!("imid: {e}; not loading"));
            return Status::Err;
        }
    };
    register_int(ctx, &SEQ_GAP, start.seq_gap);
    register_int(ctx, &SEQ_GAP_MAX, start.seq_gap_max);
    register_int(ctx, &SEQ_IDMP_TTL, start.seq_idmp_ttl);
    register_int(ctx, &SEQ_IDMP_MAX, start.seq_idmp_max);
    if register_openid_keys(ctx, start.openid_keys) == Status::Err {
        return Status::Err;
    }
    register_enum_configuration(
        ctx,
        "msgid-hash",
        &MSGID_HASH,
        start.msgid_hash,
        ConfigurationFlags::DEFAULT,
        None,
    );
    let uid_starts: [&str; 4] = [
        &start.uid_layout,
        &start.uid_epoch,
        &start.uid_time_unit,
        &start.uid_node,
    ];
    if register_uid_configs(ctx, uid_starts) == Status::Err {
        return Status::Err;
    }
    if register_fence_configs(
        ctx,
        start.fence_replicas,
        start.fence_timeout,
        start.fence_ack,
    ) == Status::Err
    {
        return Status::Err;
    }
    if !load_configs(ctx) {
        ctx.log_warning("imid: a module config was refused (see the line above); not loading");
        return Status::Err;
    }
    Status::Ok
}
