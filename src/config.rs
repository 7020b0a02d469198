//! Module configs (`imid.<name>`), settable at load and with `CONFIG SET`.

use crate::core::openid::KeyRing;
use redis_module::configuration::{
    get_enum_default_config_value, get_i64_default_config_value, get_string_default_config_value,
    register_enum_configuration, register_i64_configuration, register_string_configuration,
    ConfigurationContext, ConfigurationFlags, ConfigurationValue,
};
use redis_module::{enum_configuration, raw, Context, RedisError, RedisString, Status};
use std::os::raw::c_int;
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
    // SAFETY: ctx.ctx is the live OnLoad context; LoadConfigs exists on Redis 7.0+.
    let rc = unsafe { raw::RedisModule_LoadConfigs.map(|load| load(ctx.ctx)) };
    if rc != Some(raw::REDISMODULE_OK as c_int) {
        ctx.log_warning("imid: a module config was refused (see the line above); not loading");
        return Status::Err;
    }
    Status::Ok
}
