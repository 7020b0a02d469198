//! Module configs (`imid.<name>`), settable at load and with `CONFIG SET`.

use crate::core::openid::KeyRing;
use crate::core::uid::{parse_epoch, parse_unit, LayoutSpec, NodeSpec};
use redis_module::configuration::{
    get_enum_default_config_value, get_i64_default_config_value, get_string_default_config_value,
    register_enum_configuration, register_i64_configuration, ConfigurationContext,
    ConfigurationFlags, ConfigurationValue,
};
use redis_module::{enum_configuration, raw, Context, RedisError, RedisString, Status};
use std::ffi::{c_void, CString};
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
use std::sync::RwLock;

enum_configuration! {
    /// `imid.msgid-hash`: how MSGID.GEN/HASH hash the target. The variant names are the
    /// config words, hence lowercase.
    #[allow(non_camel_case_types)]
    #[derive(Debug, PartialEq, Eq)]
    pub enum HashMode {
        java = 0,
        slot = 1,
        auto = 2,
    }
}

/// `imid.msgid-hash`, held as its number so that MSGID.GEN/HASH read it with one load (a Mutex
/// would cost a lock and an unlock per call).
pub struct HashModeCell(AtomicU8);

pub static MSGID_HASH: HashModeCell = HashModeCell(AtomicU8::new(HashMode::auto as u8));

impl HashModeCell {
    fn mode(&self) -> HashMode {
        match self.0.load(Ordering::Relaxed) {
            0 => HashMode::java,
            1 => HashMode::slot,
            _ => HashMode::auto,
        }
    }
}

impl ConfigurationValue<HashMode> for HashModeCell {
    fn get(&self, _ctx: &ConfigurationContext) -> HashMode {
        self.mode()
    }
    fn set(&self, _ctx: &ConfigurationContext, val: HashMode) -> Result<(), RedisError> {
        self.0.store(val as u8, Ordering::Relaxed);
        Ok(())
    }
}

/// The UID configs. All four change what an ID means (or which IDs this node may issue), so
/// they are set at load only (`IMMUTABLE`: `CONFIG SET` refuses them); init checks them
/// together and refuses to load a combination that does not work (`commands::uid::configure`).
/// Each is text checked by its `check_uid_*` function, the one place its value is validated:
/// `imid.uid-epoch` and `imid.uid-time-unit` are `auto` (the named layout's own, else
/// 2026-01-01 and ms) or an explicit value that overrides the layout's.
pub static UID_LAYOUT: TextConfig = TextConfig::new(check_uid_layout);
pub static UID_NODE: TextConfig = TextConfig::new(check_uid_node);
pub static UID_EPOCH: TextConfig = TextConfig::new(check_uid_epoch);
pub static UID_TIME_UNIT: TextConfig = TextConfig::new(check_uid_time_unit);

pub fn check_uid_layout(text: &str) -> Result<(), String> {
    LayoutSpec::parse(text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

pub fn check_uid_node(text: &str) -> Result<(), String> {
    NodeSpec::parse(text).map(|_| ()).map_err(|e| e.to_string())
}

pub fn check_uid_epoch(text: &str) -> Result<(), String> {
    parse_epoch(text).map(|_| ()).map_err(|e| e.to_string())
}

pub fn check_uid_time_unit(text: &str) -> Result<(), String> {
    parse_unit(text).map(|_| ()).map_err(|e| e.to_string())
}

/// The UID configs as set (checked text): layout, epoch, time unit, node.
pub fn uid_settings() -> (String, String, String, String) {
    (
        UID_LAYOUT.text(),
        UID_EPOCH.text(),
        UID_TIME_UNIT.text(),
        UID_NODE.text(),
    )
}

/// A string config kept as text, checked by `check` before it replaces the old value, and
/// registered with the same leak-free getter as `imid.openid-keys`: Redis copies the string the
/// getter hands it and never frees it, so the config keeps one string per accepted value.
pub struct TextConfig {
    state: RwLock<TextState>,
    check: fn(&str) -> Result<(), String>,
}

struct TextState {
    text: String,
    held: Option<HeldString>,
}

impl TextConfig {
    pub const fn new(check: fn(&str) -> Result<(), String>) -> TextConfig {
        TextConfig {
            state: RwLock::new(TextState {
                text: String::new(),
                held: None,
            }),
            check,
        }
    }

    pub fn text(&self) -> String {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .text
            .clone()
    }

    /// Checks the whole value before replacing anything: a refused value changes nothing.
    fn set(&self, bytes: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "value must be ASCII text")?;
        (self.check)(text)?;
        let held = HeldString::new(bytes).ok_or("could not allocate the config text")?;
        let mut g = self.state.write().unwrap_or_else(|e| e.into_inner());
        // The previous string is freed here; Redis copied it when it last asked for it.
        *g = TextState {
            text: text.to_owned(),
            held: Some(held),
        };
        Ok(())
    }

    /// The string the getter hands to Redis (borrowed: Redis copies it and does not free it).
    fn text_ptr(&self) -> *mut raw::RedisModuleString {
        let mut g = self.state.write().unwrap_or_else(|e| e.into_inner());
        // Redis sets the default before any read, so the string exists; made here if not.
        if g.held.is_none() {
            g.held = HeldString::new(g.text.as_bytes());
        }
        g.held.as_ref().map_or(std::ptr::null_mut(), |t| t.0)
    }
}

/// Redis's getter for a [`TextConfig`]; `privdata` is the `&'static TextConfig` registered.
unsafe extern "C" fn text_config_get(
    _name: *const c_char,
    privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    // A panic must not unwind into Redis; an empty answer is the safe fallback.
    std::panic::catch_unwind(|| {
        // SAFETY: register_text_config passes a `&'static TextConfig` as privdata.
        let cfg = unsafe { privdata.cast::<TextConfig>().as_ref() };
        cfg.map_or(std::ptr::null_mut(), TextConfig::text_ptr)
    })
    .unwrap_or(std::ptr::null_mut())
}

/// Redis's setter for a [`TextConfig`]. `val` belongs to Redis (it frees it after the call); an
/// error string handed back through `err` is freed by Redis too.
unsafe extern "C" fn text_config_set(
    _name: *const c_char,
    val: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let result = std::panic::catch_unwind(|| {
        // SAFETY: register_text_config passes a `&'static TextConfig` as privdata.
        let cfg = unsafe { privdata.cast::<TextConfig>().as_ref() };
        match cfg {
            Some(cfg) if !val.is_null() => cfg.set(RedisString::string_as_slice(val)),
            _ => Err("no value".to_owned()),
        }
    })
    .unwrap_or_else(|_| Err("internal error".to_owned()));
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

/// Registers `imid.<name>` as a [`TextConfig`] with its default and flags.
fn register_text_config(
    ctx: &Context,
    name: &std::ffi::CStr,
    cfg: &'static TextConfig,
    default: &str,
    flags: ConfigurationFlags,
) -> Status {
    let Ok(default) = CString::new(default) else {
        ctx.log_warning("imid: a module argument must not contain NUL");
        return Status::Err;
    };
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
                flags.bits(),
                Some(text_config_get),
                Some(text_config_set),
                None,
                privdata,
            )
        })
    };
    if rc == Some(raw::REDISMODULE_OK as c_int) {
        Status::Ok
    } else {
        ctx.log_warning(&format!(
            "imid: could not register config {}",
            name.to_string_lossy()
        ));
        Status::Err
    }
}

/// `imid.seq-gap`: values skipped by the first SEQ.NEXT on a key this process did not write.
pub static SEQ_GAP: AtomicI64 = AtomicI64::new(1000);

/// Whether the server runs in cluster mode; fixed at startup, read once in init.
pub static CLUSTER_MODE: AtomicBool = AtomicBool::new(false);

/// The effective target-hash mode: `auto` resolved against cluster mode.
pub fn effective_hash_mode() -> HashMode {
    match MSGID_HASH.mode() {
        HashMode::auto if CLUSTER_MODE.load(Ordering::Relaxed) => HashMode::slot,
        HashMode::auto => HashMode::java,
        m => m,
    }
}

pub fn seq_gap() -> u64 {
    u64::try_from(SEQ_GAP.load(Ordering::Relaxed)).unwrap_or(0)
}

/// `imid.openid-keys`: the parsed key list, expanded into AES key schedules once when the
/// config is set, so OPENID.* never parses or expands a key per call. The text is kept only
/// for `CONFIG GET` / `CONFIG REWRITE`, which must be able to write the keys back.
pub struct OpenIdKeys(RwLock<OpenIdKeysState>);

struct OpenIdKeysState {
    ring: KeyRing,
    /// The normalised text as a Redis string, made once per accepted value. Redis's string
    /// config getter copies the string it is handed and never frees it: the module keeps
    /// ownership. So the getter hands out this one string instead of a new one per call
    /// (which leaked one string per CONFIG GET and two or three per CONFIG SET).
    text: Option<HeldString>,
}

pub static OPENID_KEYS: OpenIdKeys = OpenIdKeys(RwLock::new(OpenIdKeysState {
    ring: KeyRing::plain(),
    text: None,
}));

impl OpenIdKeys {
    /// Runs `f` with the current key ring. Commands run on the main thread, so the lock is
    /// never contended; a poisoned lock still holds a complete ring (it is replaced whole).
    pub fn with<T>(&self, f: impl FnOnce(&KeyRing) -> T) -> T {
        let g = self.0.read().unwrap_or_else(|e| e.into_inner());
        f(&g.ring)
    }

    /// Parses the whole list before replacing anything: a refused value leaves the old keys
    /// in force. The error names the entry by position, never its text.
    fn set(&self, list: &[u8]) -> Result<(), String> {
        let list = std::str::from_utf8(list).map_err(|_| "imid.openid-keys must be ASCII")?;
        let parsed = KeyRing::parse(list).map_err(|e| e.to_string())?;
        let text = HeldString::new(parsed.text.as_bytes())
            .ok_or("imid.openid-keys: could not allocate the config text")?;
        let mut g = self.0.write().unwrap_or_else(|e| e.into_inner());
        // The previous text is freed here; Redis copied it when it last asked for it.
        *g = OpenIdKeysState {
            ring: parsed.ring,
            text: Some(text),
        };
        Ok(())
    }

    /// The string the getter hands to Redis (borrowed: Redis copies it and does not free it).
    fn text_ptr(&self) -> *mut raw::RedisModuleString {
        let mut g = self.0.write().unwrap_or_else(|e| e.into_inner());
        // Redis sets the default before any read, so the text exists; made here if not.
        if g.text.is_none() {
            g.text = HeldString::new(b"");
        }
        g.text.as_ref().map_or(std::ptr::null_mut(), |t| t.0)
    }
}

/// A Redis string this module owns, created without a context and freed on drop.
struct HeldString(*mut raw::RedisModuleString);

// SAFETY: the string is created, read (by Redis, through the getter) and freed only on Redis's
// main thread, inside config callbacks; the pointer is never dereferenced by this module.
unsafe impl Send for HeldString {}
// SAFETY: as above; shared references only copy the pointer.
unsafe impl Sync for HeldString {}

impl HeldString {
    fn new(bytes: &[u8]) -> Option<HeldString> {
        // SAFETY: CreateString is filled in at load; it copies `len` bytes from `ptr`; a null
        // context makes a string that lives until FreeString.
        let s = unsafe {
            raw::RedisModule_CreateString
                .map(|create| create(std::ptr::null_mut(), bytes.as_ptr().cast(), bytes.len()))
        }?;
        (!s.is_null()).then_some(HeldString(s))
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

/// Redis's getter for `imid.openid-keys`. Registered directly rather than through the crate's
/// `ConfigurationValue<RedisString>`, whose getter makes a new string per call for Redis to
/// copy and never free.
unsafe extern "C" fn openid_keys_get(
    _name: *const c_char,
    _privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    // A panic must not unwind into Redis; an empty answer is the safe fallback.
    std::panic::catch_unwind(|| OPENID_KEYS.text_ptr()).unwrap_or(std::ptr::null_mut())
}

/// Redis's setter for `imid.openid-keys`. `val` belongs to Redis (it frees it after the call);
/// an error string handed back through `err` is freed by Redis too.
unsafe extern "C" fn openid_keys_set(
    _name: *const c_char,
    val: *mut raw::RedisModuleString,
    _privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let result = std::panic::catch_unwind(|| {
        if val.is_null() {
            return Err("imid.openid-keys: no value".to_owned());
        }
        OPENID_KEYS.set(RedisString::string_as_slice(val))
    })
    .unwrap_or_else(|_| Err("imid.openid-keys: internal error".to_owned()));
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

/// Registers the module configs (defaults may come from module arguments, `--loadmodule
/// libimid.so seq-gap 0`) and applies the values queued for them (`imid.<name> value` config
/// lines, `MODULE LOADEX ... CONFIG`). A refused value fails the load.
pub fn register(ctx: &Context, args: &[RedisString]) -> Status {
    let gap = match get_i64_default_config_value(args, "seq-gap", 1000) {
        Ok(v) => v,
        Err(_) => {
            ctx.log_warning("imid: module argument seq-gap must be an integer in 0..1000000000");
            return Status::Err;
        }
    };
    let keys = match get_string_default_config_value(args, "openid-keys", "") {
        Ok(v) => v,
        Err(_) => {
            ctx.log_warning("imid: module argument openid-keys must be text");
            return Status::Err;
        }
    };
    let hash = match get_enum_default_config_value(args, "msgid-hash", HashMode::auto) {
        Ok(v) => v,
        Err(_) => {
            ctx.log_warning("imid: module argument msgid-hash must be java, slot or auto");
            return Status::Err;
        }
    };
    let Some(uid) = uid_defaults(ctx, args) else {
        return Status::Err;
    };
    register_i64_configuration(
        ctx,
        "seq-gap",
        &SEQ_GAP,
        gap,
        0,
        1_000_000_000,
        ConfigurationFlags::DEFAULT,
        None,
    );
    // SENSITIVE asks Redis to redact CONFIG SET's value (Redis 7.0.15 still shows it in SLOWLOG
    // and MONITOR; the README says so). HIDDEN leaves it out of pattern queries (`CONFIG GET *`),
    // so config dumps do not carry keys; `CONFIG GET imid.openid-keys` by exact name and CONFIG
    // REWRITE still see them.
    let Ok(keys) = CString::new(keys) else {
        ctx.log_warning("imid: module argument openid-keys must not contain NUL");
        return Status::Err;
    };
    let flags = ConfigurationFlags::SENSITIVE | ConfigurationFlags::HIDDEN;
    // SAFETY: ctx.ctx is the live OnLoad context; name and default are NUL-terminated and
    // copied by Redis; the callbacks match the C signatures and live as long as the module.
    let rc = unsafe {
        raw::RedisModule_RegisterStringConfig.map(|register| {
            register(
                ctx.ctx,
                c"openid-keys".as_ptr(),
                keys.as_ptr(),
                flags.bits(),
                Some(openid_keys_get),
                Some(openid_keys_set),
                None,
                std::ptr::null_mut(),
            )
        })
    };
    if rc != Some(raw::REDISMODULE_OK as c_int) {
        ctx.log_warning("imid: could not register config openid-keys");
        return Status::Err;
    }
    register_enum_configuration(
        ctx,
        "msgid-hash",
        &MSGID_HASH,
        hash,
        ConfigurationFlags::DEFAULT,
        None,
    );
    if register_text_config(
        ctx,
        c"uid-layout",
        &UID_LAYOUT,
        uid.layout,
        ConfigurationFlags::IMMUTABLE,
    ) == Status::Err
    {
        return Status::Err;
    }
    if register_text_config(
        ctx,
        c"uid-epoch",
        &UID_EPOCH,
        uid.epoch,
        ConfigurationFlags::IMMUTABLE,
    ) == Status::Err
    {
        return Status::Err;
    }
    if register_text_config(
        ctx,
        c"uid-time-unit",
        &UID_TIME_UNIT,
        uid.unit,
        ConfigurationFlags::IMMUTABLE,
    ) == Status::Err
    {
        return Status::Err;
    }
    if register_text_config(
        ctx,
        c"uid-node",
        &UID_NODE,
        uid.node,
        ConfigurationFlags::IMMUTABLE,
    ) == Status::Err
    {
        return Status::Err;
    }
    // SAFETY: ctx.ctx is the live OnLoad context; LoadConfigs exists on Redis 7.0+.
    let rc = unsafe { raw::RedisModule_LoadConfigs.map(|load| load(ctx.ctx)) };
    if rc != Some(raw::REDISMODULE_OK as c_int) {
        ctx.log_warning("imid: a module config was refused (see the line above); not loading");
        return Status::Err;
    }
    Status::Ok
}

/// Defaults of the UID configs from module arguments (`--loadmodule libimid.so uid-node 7`).
struct UidDefaults<'a> {
    layout: &'a str,
    epoch: &'a str,
    unit: &'a str,
    node: &'a str,
}

fn uid_defaults<'a>(ctx: &Context, args: &'a [RedisString]) -> Option<UidDefaults<'a>> {
    let refuse = |msg: &str| {
        ctx.log_warning(&format!("imid: module argument {msg}"));
        None
    };
    let Ok(layout) = get_string_default_config_value(args, "uid-layout", "auto") else {
        return refuse("uid-layout must be text");
    };
    let Ok(epoch) = get_string_default_config_value(args, "uid-epoch", "auto") else {
        return refuse("uid-epoch must be text");
    };
    let Ok(unit) = get_string_default_config_value(args, "uid-time-unit", "auto") else {
        return refuse("uid-time-unit must be text");
    };
    let Ok(node) = get_string_default_config_value(args, "uid-node", "auto") else {
        return refuse("uid-node must be text");
    };
    Some(UidDefaults {
        layout,
        epoch,
        unit,
        node,
    })
}
