//! The raw string config callbacks (getter, setter), their registration, and the Redis strings
//! they hand out. What a config accepts and holds is safe Rust in `config` ([`StringConfig`]).

use super::{guard, Entry};
use redis_module::{raw, Context};
use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int};

/// A string config as the callbacks see it: the safe side implements it in `config`.
pub(crate) trait StringConfig: Sync + 'static {
    /// Prefix of the setter's own error texts (no value, internal error).
    fn prefix(&self) -> &'static str;
    /// The string the getter hands to Redis (borrowed: Redis copies it and does not free it).
    fn held(&self) -> Option<HeldRef>;
    /// Checks and takes a new value; a refusal changes nothing and says why.
    fn set(&self, bytes: &[u8]) -> Result<(), String>;
}

/// A Redis string this module owns, created without a context and freed on drop.
pub(crate) struct HeldString(*mut raw::RedisModuleString);

/// A borrowed [`HeldString`], for a getter to hand to Redis.
#[derive(Clone, Copy)]
pub(crate) struct HeldRef(*mut raw::RedisModuleString);

// SAFETY: the string is created, read (by Redis, through the getter) and freed only on Redis's
// main thread, inside config callbacks; the pointer is never dereferenced by this module.
unsafe impl Send for HeldString {}
// SAFETY: as above; shared references only copy the pointer.
unsafe impl Sync for HeldString {}

impl HeldString {
    pub(crate) fn new(bytes: &[u8]) -> Option<HeldString> {
        // SAFETY: CreateString is filled in at load; it copies `len` bytes from `ptr`; a null
        // context makes a string that lives until FreeString.
        let s = unsafe {
            raw::RedisModule_CreateString
                .map(|create| create(std::ptr::null_mut(), bytes.as_ptr().cast(), bytes.len()))
        }?;
        (!s.is_null()).then_some(HeldString(s))
    }

    pub(crate) fn borrow(&self) -> HeldRef {
        HeldRef(self.0)
    }

    /// Gives the string away (to Redis, which frees it), without freeing it here.
    fn into_raw(self) -> *mut raw::RedisModuleString {
        let p = self.0;
        std::mem::forget(self);
        p
    }
}

impl Drop for HeldString {
    fn drop(&mut self) {
        // SAFETY: the string was created with a null context and is freed exactly once, here.
        unsafe {
            if let Some(free) = raw::RedisModule_FreeString {
                free(std::ptr::null_mut(), self.0);
            }
        }
    }
}

/// Redis's getter for a [`StringConfig`]; `privdata` is the `&'static T` registered.
unsafe extern "C" fn get<T: StringConfig>(
    _name: *const c_char,
    privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    guard(
        std::ptr::null_mut(),
        Entry::Named("a config getter"),
        std::ptr::null_mut,
        || {
            // SAFETY: register passes a `&'static T` as privdata, only ever read shared.
            let cfg = unsafe { privdata.cast::<T>().as_ref() };
            cfg.and_then(T::held).map_or(std::ptr::null_mut(), |h| h.0)
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
        Entry::Named("a config setter"),
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

/// Registers `imid.<name>` as a string config backed by `cfg`, with its default and flags.
/// Registered directly rather than through the crate's `ConfigurationValue<RedisString>`,
/// whose getter makes a new string per call for Redis to copy and never free.
pub(crate) fn register<T: StringConfig>(
    ctx: &Context,
    name: &CStr,
    cfg: &'static T,
    default: &CStr,
    flags: u32,
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
                None,
                privdata,
            )
        })
    };
    rc == Some(raw::REDISMODULE_OK as c_int)
}

/// Applies the config values queued for the module (`imid.<name> value` lines, `MODULE LOADEX
/// ... CONFIG`); false when one was refused.
pub(crate) fn load_configs(ctx: &Context) -> bool {
    // SAFETY: ctx.ctx is the live OnLoad context; LoadConfigs exists on Redis 7.0+.
    let rc = unsafe { raw::RedisModule_LoadConfigs.map(|load| load(ctx.ctx)) };
    rc == Some(raw::REDISMODULE_OK as c_int)
}
