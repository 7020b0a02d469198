//! Module configs (`imid.<name>`), settable at load and with `CONFIG SET`.

use crate::core::openid::KeyRing;
use crate::core::uid::{NodeSpec, TimeUnit, Widths, DEFAULT_EPOCH_MS};
use redis_module::configuration::{
    get_enum_default_config_value, get_i64_default_config_value, get_string_default_config_value,
    register_enum_configuration, register_i64_configuration, register_string_configuration,
    ConfigurationContext, ConfigurationFlags, ConfigurationValue,
};
use redis_module::{enum_configuration, raw, Context, RedisError, RedisString, Status};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
use std::sync::{Mutex, RwLock};

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

/// In a module of its own: each `enum_configuration!` imports the same trait name.
mod time_unit {
    use redis_module::enum_configuration;
    enum_configuration! {
        /// `imid.uid-time-unit`: the unit of the UID time field. Config words, hence lowercase.
        #[allow(non_camel_case_types)]
        #[derive(Debug, PartialEq, Eq)]
        pub enum UidTimeUnit {
            ms = 0,
            s = 1,
        }
    }
}
pub use time_unit::UidTimeUnit;

/// The UID configs. All four change what an ID means (or which IDs this node may issue), so
/// they are set at load only (`IMMUTABLE`: `CONFIG SET` refuses them); init checks them
/// together and refuses to load a combination that does not work (`commands::uid::configure`).
pub static UID_LAYOUT: TextConfig = TextConfig::new(check_uid_layout);
pub static UID_NODE: TextConfig = TextConfig::new(check_uid_node);
pub static UID_EPOCH: AtomicI64 = AtomicI64::new(DEFAULT_EPOCH_MS as i64);
pub static UID_TIME_UNIT: Mutex<UidTimeUnit> = Mutex::new(UidTimeUnit::ms);

fn check_uid_layout(text: &str) -> Result<(), String> {
    Widths::parse(text).map(|_| ()).map_err(|e| e.to_string())
}

fn check_uid_node(text: &str) -> Result<(), String> {
    NodeSpec::parse(text).map(|_| ()).map_err(|e| e.to_string())
}

/// The UID configs as set: layout text, epoch (Unix ms), unit, node text.
pub fn uid_settings() -> (String, u64, TimeUnit, String) {
    let unit = match *UID_TIME_UNIT.lock().unwrap_or_else(|e| e.into_inner()) {
        UidTimeUnit::s => TimeUnit::S,
        UidTimeUnit::ms => TimeUnit::Ms,
    };
    (
        UID_LAYOUT.text(),
        u64::try_from(UID_EPOCH.load(Ordering::Relaxed)).unwrap_or(0),
        unit,
        UID_NODE.text(),
    )
}

/// A string config kept as text and checked by `check` before it replaces the old value.
///
/// `get` and `set` are the only places that touch Redis strings: the crate's string-config
/// getter leaks the string it returns (redis-module 2.0), which the hardening work replaces
/// with a getter that keeps the string; switch these two functions to it then.
pub struct TextConfig {
    text: RwLock<String>,
    check: fn(&str) -> Result<(), String>,
}

impl TextConfig {
    pub const fn new(check: fn(&str) -> Result<(), String>) -> TextConfig {
        TextConfig {
            text: RwLock::new(String::new()),
            check,
        }
    }

    pub fn text(&self) -> String {
        self.text.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ConfigurationValue<RedisString> for TextConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        let g = self.text.read().unwrap_or_else(|e| e.into_inner());
        RedisString::create(None, g.as_str())
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let text = std::str::from_utf8(val.as_slice())
            .map_err(|_| RedisError::Str("value must be ASCII text"))?;
        (self.check)(text).map_err(RedisError::String)?;
        *self.text.write().unwrap_or_else(|e| e.into_inner()) = text.to_owned();
        Ok(())
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
    text: String,
    ring: KeyRing,
}

pub static OPENID_KEYS: OpenIdKeys = OpenIdKeys(RwLock::new(OpenIdKeysState {
    text: String::new(),
    ring: KeyRing::plain(),
}));

impl OpenIdKeys {
    /// Runs `f` with the current key ring. Commands run on the main thread, so the lock is
    /// never contended; a poisoned lock still holds a complete ring (it is replaced whole).
    pub fn with<T>(&self, f: impl FnOnce(&KeyRing) -> T) -> T {
        let g = self.0.read().unwrap_or_else(|e| e.into_inner());
        f(&g.ring)
    }
}

impl ConfigurationValue<RedisString> for OpenIdKeys {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        let g = self.0.read().unwrap_or_else(|e| e.into_inner());
        RedisString::create(None, g.text.as_str())
    }

    /// Parses the whole list before replacing anything: a refused value leaves the old keys
    /// in force. The error names the entry by position, never its text.
    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let list = std::str::from_utf8(val.as_slice())
            .map_err(|_| RedisError::Str("imid.openid-keys must be ASCII"))?;
        let parsed = KeyRing::parse(list).map_err(|e| RedisError::String(e.to_string()))?;
        let mut g = self.0.write().unwrap_or_else(|e| e.into_inner());
        *g = OpenIdKeysState {
            text: parsed.text,
            ring: parsed.ring,
        };
        Ok(())
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
    register_string_configuration(
        ctx,
        "openid-keys",
        &OPENID_KEYS,
        keys,
        ConfigurationFlags::SENSITIVE | ConfigurationFlags::HIDDEN,
        None,
    );
    register_enum_configuration(
        ctx,
        "msgid-hash",
        &MSGID_HASH,
        hash,
        ConfigurationFlags::DEFAULT,
        None,
    );
    register_string_configuration(
        ctx,
        "uid-layout",
        &UID_LAYOUT,
        uid.layout,
        ConfigurationFlags::IMMUTABLE,
        None,
    );
    register_i64_configuration(
        ctx,
        "uid-epoch",
        &UID_EPOCH,
        uid.epoch,
        0,
        i64::MAX,
        ConfigurationFlags::IMMUTABLE,
        None,
    );
    register_enum_configuration(
        ctx,
        "uid-time-unit",
        &UID_TIME_UNIT,
        uid.unit,
        ConfigurationFlags::IMMUTABLE,
        None,
    );
    register_string_configuration(
        ctx,
        "uid-node",
        &UID_NODE,
        uid.node,
        ConfigurationFlags::IMMUTABLE,
        None,
    );
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
    epoch: i64,
    unit: UidTimeUnit,
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
    let Ok(epoch) = get_i64_default_config_value(args, "uid-epoch", DEFAULT_EPOCH_MS as i64) else {
        return refuse("uid-epoch must be an integer (Unix ms)");
    };
    let Ok(unit) = get_enum_default_config_value(args, "uid-time-unit", UidTimeUnit::ms) else {
        return refuse("uid-time-unit must be ms or s");
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
