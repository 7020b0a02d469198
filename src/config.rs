//! Module configs (`imid.<name>`), settable at load and with `CONFIG SET`. The raw callbacks
//! of the string configs are in `glue::config`.

use crate::core::openid::KeyRing;
use crate::core::uid::{NodeSpec, TimeUnit, Widths, DEFAULT_EPOCH_MS};
use crate::glue::config::{self as raw_config, HeldRef, HeldString, StringConfig};
use redis_module::configuration::{
    get_enum_default_config_value, get_i64_default_config_value, get_string_default_config_value,
    register_enum_configuration, register_i64_configuration, ConfigurationContext,
    ConfigurationFlags, ConfigurationValue,
};
use redis_module::{enum_configuration, Context, RedisError, RedisString, Status};
use std::ffi::CString;
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
pub(crate) struct HashModeCell(AtomicU8);

pub(crate) static MSGID_HASH: HashModeCell = HashModeCell(AtomicU8::new(HashMode::auto as u8));

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
pub(crate) use time_unit::UidTimeUnit;

/// The UID configs. All four change what an ID means (or which IDs this node may issue), so
/// they are set at load only (`IMMUTABLE`: `CONFIG SET` refuses them); init checks them
/// together and refuses to load a combination that does not work (`commands::uid::configure`).
pub(crate) static UID_LAYOUT: TextConfig = TextConfig::new(check_uid_layout);
pub(crate) static UID_NODE: TextConfig = TextConfig::new(check_uid_node);
pub(crate) static UID_EPOCH: AtomicI64 = AtomicI64::new(DEFAULT_EPOCH_MS as i64);
pub(crate) static UID_TIME_UNIT: Mutex<UidTimeUnit> = Mutex::new(UidTimeUnit::ms);

fn check_uid_layout(text: &str) -> Result<(), String> {
    Widths::parse(text).map(|_| ()).map_err(|e| e.to_string())
}

fn check_uid_node(text: &str) -> Result<(), String> {
    NodeSpec::parse(text).map(|_| ()).map_err(|e| e.to_string())
}

/// The UID configs as set: layout text, epoch (Unix ms), unit, node text.
pub(crate) fn uid_settings() -> (String, u64, TimeUnit, String) {
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

/// A string config kept as text, checked by `check` before it replaces the old value, and
/// registered with the same leak-free getter as `imid.openid-keys`: Redis copies the string the
/// getter hands it and never frees it, so the config keeps one string per accepted value.
pub(crate) struct TextConfig {
    state: RwLock<TextState>,
    check: fn(&str) -> Result<(), String>,
}

struct TextState {
    text: String,
    held: Option<HeldString>,
}

impl TextConfig {
    pub(crate) const fn new(check: fn(&str) -> Result<(), String>) -> TextConfig {
        TextConfig {
            state: RwLock::new(TextState {
                text: String::new(),
                held: None,
            }),
            check,
        }
    }

    pub(crate) fn text(&self) -> String {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .text
            .clone()
    }
}

impl StringConfig for TextConfig {
    const PREFIX: &'static str = "";

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

    fn held(&self) -> Option<HeldRef> {
        let mut g = self.state.write().unwrap_or_else(|e| e.into_inner());
        // Redis sets the default before any read, so the string exists; made here if not.
        if g.held.is_none() {
            g.held = HeldString::new(g.text.as_bytes());
        }
        g.held.as_ref().map(HeldString::borrow)
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
    if raw_config::register(ctx, name, cfg, &default, flags.bits()) {
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
pub(crate) static SEQ_GAP: AtomicI64 = AtomicI64::new(1000);

/// Whether the server runs in cluster mode; fixed at startup, read once in init.
pub(crate) static CLUSTER_MODE: AtomicBool = AtomicBool::new(false);

/// The effective target-hash mode: `auto` resolved against cluster mode.
pub(crate) fn effective_hash_mode() -> HashMode {
    match MSGID_HASH.mode() {
        HashMode::auto if CLUSTER_MODE.load(Ordering::Relaxed) => HashMode::slot,
        HashMode::auto => HashMode::java,
        m => m,
    }
}

pub(crate) fn seq_gap() -> u64 {
    u64::try_from(SEQ_GAP.load(Ordering::Relaxed)).unwrap_or(0)
}

/// `imid.openid-keys`: the parsed key list, expanded into AES key schedules once when the
/// config is set, so OPENID.* never parses or expands a key per call. The text is kept only
/// for `CONFIG GET` / `CONFIG REWRITE`, which must be able to write the keys back.
pub(crate) struct OpenIdKeys(RwLock<OpenIdKeysState>);

struct OpenIdKeysState {
    ring: KeyRing,
    /// The normalised text as a Redis string, made once per accepted value. Redis's string
    /// config getter copies the string it is handed and never frees it: the module keeps
    /// ownership. So the getter hands out this one string instead of a new one per call
    /// (which leaked one string per CONFIG GET and two or three per CONFIG SET).
    text: Option<HeldString>,
}

pub(crate) static OPENID_KEYS: OpenIdKeys = OpenIdKeys(RwLock::new(OpenIdKeysState {
    ring: KeyRing::plain(),
    text: None,
}));

impl OpenIdKeys {
    /// Runs `f` with the current key ring. Commands run on the main thread, so the lock is
    /// never contended; a poisoned lock still holds a complete ring (it is replaced whole).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&KeyRing) -> T) -> T {
        let g = self.0.read().unwrap_or_else(|e| e.into_inner());
        f(&g.ring)
    }
}

impl StringConfig for OpenIdKeys {
    const PREFIX: &'static str = "imid.openid-keys: ";

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

    fn held(&self) -> Option<HeldRef> {
        let mut g = self.0.write().unwrap_or_else(|e| e.into_inner());
        // Redis sets the default before any read, so the text exists; made here if not.
        if g.text.is_none() {
            g.text = HeldString::new(b"");
        }
        g.text.as_ref().map(HeldString::borrow)
    }
}

/// Registers the module configs (defaults may come from module arguments, `--loadmodule
/// libimid.so seq-gap 0`) and applies the values queued for them (`imid.<name> value` config
/// lines, `MODULE LOADEX ... CONFIG`). A refused value fails the load.
pub(crate) fn register(ctx: &Context, args: &[RedisString]) -> Status {
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
    if !raw_config::register(ctx, c"openid-keys", &OPENID_KEYS, &keys, flags.bits()) {
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
    if !raw_config::load_configs(ctx) {
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
