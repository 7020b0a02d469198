//! Module configs (`imid.<name>`), settable at load and with `CONFIG SET`: the values the
//! commands read, what each accepts, and the module arguments' rules. Registration and the raw
//! callbacks are in `entry::config`.

use crate::core::idmp::MAX_TOKENS;
use crate::core::openid::{KeyRing, Parsed};
use crate::core::uid::{parse_epoch, parse_unit, LayoutSpec, NodeSpec};
use crate::host::string::{HeldRef, HeldString};
use redis_module::configuration::{ConfigurationContext, ConfigurationValue};
use redis_module::{enum_configuration, RedisError};
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

/// `imid.fence-ack`'s words, in a module of their own: the config macro imports a trait
/// that the one above already imported here.
mod fence_ack {
    use redis_module::enum_configuration;
    enum_configuration! {
        /// `imid.fence-ack`: what a replica must hold before the fence counts a value as on
        /// it: what it `fsynced` to its AOF (where it reports that: Redis 7.2+ and Valkey with
        /// AOF on; a replica that reports nothing counts by what it applied), or what it
        /// `applied`.
        #[allow(non_camel_case_types)]
        #[derive(Debug, PartialEq, Eq)]
        pub enum FenceAck {
            fsynced = 0,
            applied = 1,
        }
    }
}
pub(crate) use fence_ack::FenceAck;

/// `imid.fence-ack`, held as its number (read once per fence round).
pub(crate) struct FenceAckCell(AtomicU8);

pub(crate) static FENCE_ACK: FenceAckCell = FenceAckCell(AtomicU8::new(FenceAck::fsynced as u8));

impl FenceAckCell {
    /// Whether a replica counts by what it fsynced (where it reports it).
    pub(crate) fn fsynced(&self) -> bool {
        self.0.load(Ordering::Relaxed) == FenceAck::fsynced as u8
    }
}

impl ConfigurationValue<FenceAck> for FenceAckCell {
    fn get(&self, _ctx: &ConfigurationContext) -> FenceAck {
        if self.fsynced() {
            FenceAck::fsynced
        } else {
            FenceAck::applied
        }
    }
    fn set(&self, _ctx: &ConfigurationContext, val: FenceAck) -> Result<(), RedisError> {
        self.0.store(val as u8, Ordering::Relaxed);
        Ok(())
    }
}

/// The UID configs. All four change what an ID means (or which IDs this node may issue), so
/// they are set at load only (`IMMUTABLE`: `CONFIG SET` refuses them); init checks them
/// together and refuses to load a combination that does not work (`node::ids::configure_uid`).
/// Each is text checked by its `check_uid_*` function, the one place its value is validated:
/// `imid.uid-epoch` and `imid.uid-time-unit` are `auto` (the named layout's own, else
/// 2026-01-01 and ms) or an explicit value that overrides the layout's.
pub(crate) static UID_LAYOUT: TextConfig<()> = uid_text(check_uid_layout);
pub(crate) static UID_NODE: TextConfig<()> = uid_text(check_uid_node);
pub(crate) static UID_EPOCH: TextConfig<()> = uid_text(check_uid_epoch);
pub(crate) static UID_TIME_UNIT: TextConfig<()> = uid_text(check_uid_time_unit);

pub(crate) fn check_uid_layout(text: &str) -> Result<(), String> {
    LayoutSpec::parse(text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

pub(crate) fn check_uid_node(text: &str) -> Result<(), String> {
    NodeSpec::parse(text).map(|_| ()).map_err(|e| e.to_string())
}

pub(crate) fn check_uid_epoch(text: &str) -> Result<(), String> {
    parse_epoch(text).map(|_| ()).map_err(|e| e.to_string())
}

pub(crate) fn check_uid_time_unit(text: &str) -> Result<(), String> {
    parse_unit(text).map(|_| ()).map_err(|e| e.to_string())
}

/// The UID configs as set (checked text): layout, epoch, time unit, node.
pub(crate) fn uid_settings() -> (String, String, String, String) {
    (
        UID_LAYOUT.text(),
        UID_EPOCH.text(),
        UID_TIME_UNIT.text(),
        UID_NODE.text(),
    )
}

/// A string config as the callbacks see it: `entry::config`'s callbacks call it.
pub(crate) trait StringConfig: Sync + 'static {
    /// Prefix of the setter's own error texts (no value, internal error).
    fn prefix(&self) -> &'static str;
    /// The string the getter hands to Redis (borrowed: Redis copies it and does not free it).
    fn held(&self) -> Option<HeldRef>;
    /// Checks and takes a new value; a refusal changes nothing and says why.
    fn set(&self, bytes: &[u8]) -> Result<(), String>;
}

/// A string config: the value the commands read (`V`) and the text `CONFIG GET` shows for it,
/// both replaced whole when a new text passes `parse` (a refused text changes nothing). Redis
/// copies the string a string-config getter returns and never frees it, so the config keeps
/// the text as one Redis string per accepted value and the getter hands out that one (a new
/// string per call leaked one per CONFIG GET and two or three per CONFIG SET).
pub(crate) struct TextConfig<V: 'static> {
    state: RwLock<TextState<V>>,
    /// Prefix of the setter's own error texts (no value, internal error, no memory).
    prefix: &'static str,
    /// What a value that is not UTF-8 is told.
    not_text: &'static str,
    /// Checks the whole text and makes the value, or says why not.
    parse: fn(&str) -> Result<V, String>,
    /// The text to show for an accepted value (given as it came).
    shown: fn(&V, &str) -> String,
}

struct TextState<V> {
    value: V,
    text: String,
    held: Option<HeldString>,
}

impl<V> TextConfig<V> {
    const fn new(
        value: V,
        prefix: &'static str,
        not_text: &'static str,
        parse: fn(&str) -> Result<V, String>,
        shown: fn(&V, &str) -> String,
    ) -> TextConfig<V> {
        TextConfig {
            state: RwLock::new(TextState {
                value,
                text: String::new(),
                held: None,
            }),
            prefix,
            not_text,
            parse,
            shown,
        }
    }

    pub(crate) fn text(&self) -> String {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .text
            .clone()
    }

    /// Runs `f` with the current value. Commands run on the main thread, so the lock is never
    /// contended; a poisoned lock still holds a complete value (it is replaced whole).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&V) -> T) -> T {
        let g = self.state.read().unwrap_or_else(|e| e.into_inner());
        f(&g.value)
    }
}

impl<V: Send + Sync> StringConfig for TextConfig<V> {
    fn prefix(&self) -> &'static str {
        self.prefix
    }

    /// Checks the whole value before replacing anything: a refused value changes nothing.
    fn set(&self, bytes: &[u8]) -> Result<(), String> {
        let given = std::str::from_utf8(bytes).map_err(|_| self.not_text)?;
        let value = (self.parse)(given)?;
        let text = (self.shown)(&value, given);
        let held = HeldString::new(text.as_bytes())
            .ok_or_else(|| format!("{}could not allocate the config text", self.prefix))?;
        let mut g = self.state.write().unwrap_or_else(|e| e.into_inner());
        // The previous string is freed here; Redis copied it when it last asked for it.
        *g = TextState {
            value,
            text,
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

/// A UID config: checked text, shown as given.
const fn uid_text(check: fn(&str) -> Result<(), String>) -> TextConfig<()> {
    TextConfig::new((), "", "value must be ASCII text", check, |(), given| {
        given.to_owned()
    })
}

/// A numeric config: its name, its value, and its default and range, which Redis checks
/// (CONFIG SET, `--imid.*`) and the module arguments alike ([`parse_args`]).
pub(crate) struct IntConfig {
    pub(crate) name: &'static str,
    pub(crate) value: AtomicI64,
    pub(crate) default: i64,
    pub(crate) range: (i64, i64),
}

impl IntConfig {
    const fn new(name: &'static str, default: i64, range: (i64, i64)) -> IntConfig {
        IntConfig {
            name,
            value: AtomicI64::new(default),
            default,
            range,
        }
    }

    fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// `imid.seq-gap`: values skipped by the first SEQ.NEXT on a key this process did not write.
pub(crate) static SEQ_GAP: IntConfig = IntConfig::new("seq-gap", 1000, (0, 1_000_000_000));

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
    u64::try_from(SEQ_GAP.get()).unwrap_or(0)
}

/// `imid.seq-gap-max`: the largest gap the node grows to with its rate (`node::durable`), so
/// the largest hole a restart or a promotion leaves in a sequence; below `imid.seq-gap` it
/// changes nothing (the gap never shrinks below that).
pub(crate) static SEQ_GAP_MAX: IntConfig =
    IntConfig::new("seq-gap-max", 1_000_000, (0, 1_000_000_000));

pub(crate) fn seq_gap_max() -> u64 {
    u64::try_from(SEQ_GAP_MAX.get()).unwrap_or(0)
}

/// `imid.seq-idmp-ttl`: seconds an IDMP token counts after its first call
/// (docs/configuration.md says why 300), a second to a week.
pub(crate) static SEQ_IDMP_TTL: IntConfig = IntConfig::new("seq-idmp-ttl", 300, (1, 604_800));
/// `imid.seq-idmp-max`: most IDMP tokens one key remembers; the oldest go first. At most what a
/// loaded key may hold (`core::idmp::MAX_TOKENS`).
pub(crate) static SEQ_IDMP_MAX: IntConfig =
    IntConfig::new("seq-idmp-max", 1000, (1, MAX_TOKENS as i64));

/// `imid.seq-idmp-ttl` in milliseconds.
pub(crate) fn seq_idmp_ttl_ms() -> u64 {
    u64::try_from(SEQ_IDMP_TTL.get())
        .unwrap_or(0)
        .saturating_mul(1000)
}

pub(crate) fn seq_idmp_max() -> usize {
    usize::try_from(SEQ_IDMP_MAX.get()).unwrap_or(1)
}

/// `imid.openid-keys`: the parsed key list, expanded into AES key schedules once when the
/// config is set, so OPENID.* never parses or expands a key per call. The normalised text is
/// kept for `CONFIG GET` / `CONFIG REWRITE`, which must be able to write the keys back. A
/// refused list leaves the old keys in force; the error names the entry by position, never
/// its text.
pub(crate) static OPENID_KEYS: TextConfig<Parsed> = TextConfig::new(
    Parsed {
        ring: KeyRing::plain(),
        text: String::new(),
    },
    "imid.openid-keys: ",
    "imid.openid-keys must be ASCII",
    |list| KeyRing::parse(list).map_err(|e| e.to_string()),
    |keys, _| keys.text.clone(),
);

/// `imid.fence-replicas`: how many replicas must acknowledge what a primary hands out before it
/// replies (`node::fence`, docs/durability.md). `auto`: the server's `min-replicas-to-write`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FenceReplicas {
    Auto,
    Count(u64),
}

/// `imid.fence-replicas`'s largest number (far above any replica count a server has).
pub(crate) const FENCE_REPLICAS_MAX: u64 = 1000;

pub(crate) fn parse_fence_replicas(text: &str) -> Result<FenceReplicas, String> {
    if text.eq_ignore_ascii_case("auto") {
        return Ok(FenceReplicas::Auto);
    }
    parse_int(text)
        .and_then(|n| u64::try_from(n).ok())
        .filter(|&n| n <= FENCE_REPLICAS_MAX)
        .map(FenceReplicas::Count)
        .ok_or_else(|| {
            format!("imid.fence-replicas must be auto or an integer in 0..{FENCE_REPLICAS_MAX}")
        })
}

fn check_fence_replicas(text: &str) -> Result<(), String> {
    parse_fence_replicas(text).map(|_| ())
}

pub(crate) static FENCE_REPLICAS: TextConfig<FenceReplicas> = TextConfig::new(
    FenceReplicas::Auto,
    "imid.fence-replicas: ",
    "imid.fence-replicas must be auto or an integer",
    parse_fence_replicas,
    |v, _| match v {
        FenceReplicas::Auto => "auto".to_owned(),
        FenceReplicas::Count(n) => n.to_string(),
    },
);

/// `imid.fence-timeout`: how long (ms) a call waits for the replicas' acknowledgement before it
/// is answered with the fence's error: a millisecond to a day.
pub(crate) static FENCE_TIMEOUT: IntConfig = IntConfig::new("fence-timeout", 1000, (1, 86_400_000));

pub(crate) fn fence_timeout_ms() -> u64 {
    u64::try_from(FENCE_TIMEOUT.get()).unwrap_or(1)
}

/// The module configs, by the name a module argument may give (with or without `imid.`).
pub(crate) const NAMES: [&str; 13] = [
    "seq-gap",
    "seq-gap-max",
    "seq-idmp-ttl",
    "seq-idmp-max",
    "openid-keys",
    "msgid-hash",
    "uid-layout",
    "uid-epoch",
    "uid-time-unit",
    "uid-node",
    "fence-replicas",
    "fence-timeout",
    "fence-ack",
];

/// The configs' starting values: the module arguments (`--loadmodule libimid.so uid-node 7`,
/// `MODULE LOADEX ... ARGS uid-node 7`), each checked by the rule `CONFIG SET` and `--imid.*`
/// apply, else the built-in defaults. A config given as `imid.<name> value` (a config line,
/// `--imid.*`, `MODULE LOADEX ... CONFIG`) is applied over them by Redis.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StartValues {
    pub(crate) seq_gap: i64,
    pub(crate) seq_gap_max: i64,
    pub(crate) seq_idmp_ttl: i64,
    pub(crate) seq_idmp_max: i64,
    pub(crate) openid_keys: String,
    pub(crate) msgid_hash: HashMode,
    pub(crate) uid_layout: String,
    pub(crate) uid_epoch: String,
    pub(crate) uid_time_unit: String,
    pub(crate) uid_node: String,
    pub(crate) fence_replicas: String,
    pub(crate) fence_timeout: i64,
    pub(crate) fence_ack: FenceAck,
}

/// Reads the module arguments: `name value` pairs, `name` one of [`NAMES`] with or without the
/// `imid.` prefix (any case, as Redis takes config names). An unknown name, a name without a
/// value, a name given twice (`seq-gap` and `imid.seq-gap` are one name) or a value its config
/// refuses stops the load; the error names the argument by its position and, for a known name,
/// by the config's own name. It never quotes an argument: a key of `openid-keys` can land
/// anywhere (`openid-keys <K1>, <K2>` makes `<K2>` a name, a key given first is a name too), so
/// no word the user gave reaches the log.
pub(crate) fn parse_args(args: &[&[u8]]) -> Result<StartValues, String> {
    let (given, at_of) = given_values(args)?;
    let [gap, gap_max, idmp_ttl, idmp_max, keys, hash, layout, epoch, unit, node, replicas, timeout, ack] =
        given;
    let a = ArgPlaces {
        at_of,
        total: args.len(),
    };
    Ok(StartValues {
        seq_gap: a.number(&SEQ_GAP, gap)?,
        seq_gap_max: a.number(&SEQ_GAP_MAX, gap_max)?,
        seq_idmp_ttl: a.number(&SEQ_IDMP_TTL, idmp_ttl)?,
        seq_idmp_max: a.number(&SEQ_IDMP_MAX, idmp_max)?,
        openid_keys: a.text("openid-keys", keys, "", check_openid_keys)?,
        msgid_hash: a.msgid_hash(hash)?,
        uid_layout: a.text("uid-layout", layout, "auto", check_uid_layout)?,
        uid_epoch: a.text("uid-epoch", epoch, "auto", check_uid_epoch)?,
        uid_time_unit: a.text("uid-time-unit", unit, "auto", check_uid_time_unit)?,
        uid_node: a.text("uid-node", node, "auto", check_uid_node)?,
        fence_replicas: a.text("fence-replicas", replicas, "auto", check_fence_replicas)?,
        fence_timeout: a.number(&FENCE_TIMEOUT, timeout)?,
        fence_ack: a.fence_ack(ack)?,
    })
}

/// Where each given module argument stood (by config, [`NAMES`]' order) among `total`: what
/// [`parse_args`]' errors about a value name it by.
struct ArgPlaces {
    at_of: [usize; NAMES.len()],
    total: usize,
}

impl ArgPlaces {
    /// The error for config `name`'s value, refused for `why`.
    fn refuse(&self, name: &str, why: String) -> String {
        let pos = NAMES
            .iter()
            .position(|k| *k == name)
            .and_then(|i| self.at_of.get(i))
            .copied()
            .unwrap_or(0);
        let total = self.total;
        format!("module argument {pos} of {total} (the value of imid.{name}) refused: {why}")
    }

    /// An integer config's value: `v` in its range, else its default.
    fn number(&self, c: &IntConfig, v: Option<&str>) -> Result<i64, String> {
        let (name, (min, max)) = (c.name, c.range);
        match v {
            None => Ok(c.default),
            Some(t) => parse_int(t)
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| {
                    self.refuse(
                        name,
                        format!("imid.{name} must be an integer in {min}..{max}"),
                    )
                }),
        }
    }

    /// A text config's value: `v` (else `default`) as `check` takes it.
    fn text(
        &self,
        name: &str,
        v: Option<&str>,
        default: &str,
        check: fn(&str) -> Result<(), String>,
    ) -> Result<String, String> {
        let t = v.unwrap_or(default);
        check(t)
            .map(|()| t.to_owned())
            .map_err(|e| self.refuse(name, e))
    }

    /// `imid.msgid-hash`: java, slot or auto (any case).
    fn msgid_hash(&self, v: Option<&str>) -> Result<HashMode, String> {
        match v.map(str::to_ascii_lowercase).as_deref() {
            None | Some("auto") => Ok(HashMode::auto),
            Some("java") => Ok(HashMode::java),
            Some("slot") => Ok(HashMode::slot),
            Some(_) => Err(self.refuse(
                "msgid-hash",
                "imid.msgid-hash must be java, slot or auto".to_owned(),
            )),
        }
    }

    /// `imid.fence-ack`: fsynced or applied (any case).
    fn fence_ack(&self, v: Option<&str>) -> Result<FenceAck, String> {
        match v.map(str::to_ascii_lowercase).as_deref() {
            None | Some("fsynced") => Ok(FenceAck::fsynced),
            Some("applied") => Ok(FenceAck::applied),
            Some(_) => Err(self.refuse(
                "fence-ack",
                "imid.fence-ack must be fsynced or applied".to_owned(),
            )),
        }
    }
}

/// The module arguments' values by config ([`NAMES`]' order), and the position of each given
/// value; the errors of [`parse_args`] about names.
fn given_values<'a>(
    args: &[&'a [u8]],
) -> Result<([Option<&'a str>; NAMES.len()], [usize; NAMES.len()]), String> {
    let total = args.len();
    let mut given: [Option<&str>; NAMES.len()] = [None; NAMES.len()];
    let mut at_of: [usize; NAMES.len()] = [0; NAMES.len()];
    let mut rest = args;
    let mut n = 1usize;
    while let Some((name, tail)) = rest.split_first() {
        let bare = name
            .get(..5)
            .filter(|p| p.eq_ignore_ascii_case(b"imid."))
            .and_then(|_| name.get(5..))
            .unwrap_or(name);
        let Some((at, known)) = NAMES
            .iter()
            .enumerate()
            .find(|(_, k)| k.as_bytes().eq_ignore_ascii_case(bare))
        else {
            return Err(format!(
                "module argument {n} of {total} is not a config of imid (known: {}); arguments are never quoted, as one may hold a key",
                NAMES.join(", ")
            ));
        };
        let Some((value, tail)) = tail.split_first() else {
            return Err(format!(
                "module argument {n} of {total} (imid.{known}) has no value"
            ));
        };
        let value = std::str::from_utf8(value)
            .ok()
            .filter(|v| !v.contains('\0'))
            .ok_or_else(|| {
                format!(
                    "module argument {} of {total} (the value of imid.{known}) must be text without NUL",
                    n + 1
                )
            })?;
        match (given.get_mut(at), at_of.get_mut(at)) {
            (Some(slot @ None), Some(pos)) => {
                *slot = Some(value);
                *pos = n + 1;
            }
            _ => {
                return Err(format!(
                    "module argument {n} of {total}: imid.{known} is given twice"
                ))
            }
        }
        rest = tail;
        n += 2;
    }
    Ok((given, at_of))
}

/// An integer as Redis reads a numeric config (`string2ll`): optional `-`, decimal digits, no
/// leading zeros, spaces or `+`, within i64.
fn parse_int(t: &str) -> Option<i64> {
    let digits = t.strip_prefix('-').unwrap_or(t);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && t != "-0";
    canonical.then(|| t.parse().ok()).flatten()
}

fn check_openid_keys(text: &str) -> Result<(), String> {
    KeyRing::parse(text).map(|_| ()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<StartValues, String> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_args(&raw)
    }

    #[test]
    fn no_arguments_give_the_defaults() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.seq_gap, 1000);
        assert_eq!((s.seq_idmp_ttl, s.seq_idmp_max), (300, 1000));
        assert_eq!(s.openid_keys, "");
        assert_eq!(s.msgid_hash, HashMode::auto);
        assert_eq!(s.uid_layout, "auto");
        assert_eq!(s.uid_epoch, "auto");
        assert_eq!(s.uid_time_unit, "auto");
        assert_eq!(s.uid_node, "auto");
        assert_eq!((s.fence_replicas.as_str(), s.fence_timeout), ("auto", 1000));
        assert_eq!((s.seq_gap_max, s.fence_ack), (1_000_000, FenceAck::fsynced));
    }

    #[test]
    fn fence_replicas_is_auto_or_a_count() {
        assert_eq!(parse_fence_replicas("auto"), Ok(FenceReplicas::Auto));
        assert_eq!(parse_fence_replicas("AUTO"), Ok(FenceReplicas::Auto));
        assert_eq!(parse_fence_replicas("0"), Ok(FenceReplicas::Count(0)));
        assert_eq!(parse_fence_replicas("2"), Ok(FenceReplicas::Count(2)));
        assert_eq!(parse_fence_replicas("1000"), Ok(FenceReplicas::Count(1000)));
        for bad in ["", "-1", "1001", "01", "one", " 1"] {
            assert_eq!(
                parse_fence_replicas(bad),
                Err("imid.fence-replicas must be auto or an integer in 0..1000".to_owned()),
                "{bad:?}"
            );
        }
        let s = parse(&["fence-replicas", "2", "imid.fence-timeout", "250"]).unwrap();
        assert_eq!((s.fence_replicas.as_str(), s.fence_timeout), ("2", 250));
        assert_eq!(
            parse(&["fence-replicas", "x"]).unwrap_err(),
            "module argument 2 of 2 (the value of imid.fence-replicas) refused: imid.fence-replicas must be auto or an integer in 0..1000"
        );
        assert_eq!(
            parse(&["fence-timeout", "0"]).unwrap_err(),
            "module argument 2 of 2 (the value of imid.fence-timeout) refused: imid.fence-timeout must be an integer in 1..86400000"
        );
    }

    #[test]
    fn both_names_and_every_config() {
        let s = parse(&[
            "seq-gap",
            "0",
            "imid.seq-idmp-ttl",
            "60",
            "SEQ-IDMP-MAX",
            "5",
            "imid.msgid-hash",
            "JAVA",
            "IMID.uid-layout",
            "28,22,13",
            "uid-epoch",
            "0",
            "imid.uid-time-unit",
            "s",
            "UID-NODE",
            "7",
            "imid.openid-keys",
            "000102030405060708090a0b0c0d0e0f",
        ])
        .unwrap();
        assert_eq!(s.seq_gap, 0);
        assert_eq!((s.seq_idmp_ttl, s.seq_idmp_max), (60, 5));
        assert_eq!(s.msgid_hash, HashMode::java);
        assert_eq!(s.uid_layout, "28,22,13");
        assert_eq!(s.uid_epoch, "0");
        assert_eq!(s.uid_time_unit, "s");
        assert_eq!(s.uid_node, "7");
        assert_eq!(s.openid_keys, "000102030405060708090a0b0c0d0e0f");
    }

    #[test]
    fn unknown_missing_and_repeated_names_are_refused() {
        for (args, want) in [
            (
                vec!["uid-nod", "7"],
                "module argument 1 of 2 is not a config of imid",
            ),
            (
                vec!["imid.bogus", "1"],
                "module argument 1 of 2 is not a config of imid",
            ),
            (
                vec!["imid.", "1"],
                "argument 1 of 2 is not a config of imid",
            ),
            (vec!["7"], "argument 1 of 1 is not a config of imid"),
            (
                vec!["uid-node"],
                "argument 1 of 1 (imid.uid-node) has no value",
            ),
            (
                vec!["seq-gap", "5", "uid-node"],
                "argument 3 of 3 (imid.uid-node) has no value",
            ),
            (
                vec!["seq-gap", "5", "seq-gap", "6"],
                "argument 3 of 4: imid.seq-gap is given twice",
            ),
            (
                vec!["seq-gap", "5", "imid.SEQ-GAP", "5"],
                "argument 3 of 4: imid.seq-gap is given twice",
            ),
        ] {
            let e = parse(&args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    /// No word of the arguments reaches an error (the log): a key of `openid-keys` can land
    /// in any position, as a name (`openid-keys K1, K2`, two keys as two words, a key first)
    /// or as another config's value.
    #[test]
    fn no_argument_word_is_ever_quoted() {
        const K1: &str = "5eb63bbbe01eeed093cb22bb8f5acd2f";
        const K2: &str = "000102030405060708090a0b0c0d0e0f";
        let k1c = format!("{K1},");
        let list = format!("{K1}, {K2}");
        let cases: Vec<Vec<&str>> = vec![
            vec!["openid-keys", &k1c, K2],
            vec!["openid-keys", K1, K2],
            vec![K1, "openid-keys", K2],
            vec![K1],
            vec!["openid-keys", "plain", K1],
            vec!["seq-gap", K1],
            vec!["uid-node", K1],
            vec!["uid-epoch", K1],
            vec!["uid-layout", K1],
            vec!["uid-time-unit", K1],
            vec!["msgid-hash", K1],
            vec!["seq-idmp-ttl", K1],
            vec!["seq-idmp-max", K1],
            vec!["openid-keys", &list, "openid-keys", K2],
            vec!["openid-keys", "zz", "seq-gap", K1],
            vec!["seq-gap", "1", K1, "2"],
            vec!["openid-keys", K1, "uid-node"],
        ];
        for args in cases {
            let e = parse(&args).unwrap_err();
            for secret in [K1, K2, &K1[..8], &K2[..8]] {
                assert!(!e.contains(secret), "{args:?}: {e}");
            }
            assert!(!e.contains('\''), "nothing quoted: {e}");
        }
    }

    #[test]
    fn values_get_the_config_checks() {
        // (config, values it refuses, what the error says)
        let gap = "imid.seq-gap must be an integer in";
        let node = "imid.uid-node must be auto or";
        let cases: &[(&str, &[&str], &str)] = &[
            (
                "seq-gap",
                &["-7"],
                "imid.seq-gap must be an integer in 0..1000000000",
            ),
            ("seq-gap", &["1000000001", "01", " 5", "+5"], gap),
            (
                "seq-idmp-ttl",
                &["0"],
                "module argument 2 of 2 (the value of imid.seq-idmp-ttl) refused: imid.seq-idmp-ttl must be an integer in 1..604800",
            ),
            (
                "seq-idmp-max",
                &["1000001"],
                "imid.seq-idmp-max must be an integer in 1..1000000",
            ),
            (
                "uid-epoch",
                &["-5"],
                "(the value of imid.uid-epoch) refused: imid.uid-epoch must be auto or Unix ms, an integer in 0..",
            ),
            (
                "uid-epoch",
                &["1e3"],
                "imid.uid-epoch must be auto or Unix ms",
            ),
            (
                "uid-node",
                &["01"],
                "(the value of imid.uid-node) refused: imid.uid-node must be auto or",
            ),
            ("uid-node", &[" 5 ", "-1"], node),
            (
                "uid-layout",
                &["41,10,14"],
                "imid.uid-layout widths must sum to 63",
            ),
            (
                "uid-time-unit",
                &["us"],
                "imid.uid-time-unit must be auto, ms, s, or a whole number of them",
            ),
            (
                "msgid-hash",
                &["crc"],
                "imid.msgid-hash must be java, slot or auto",
            ),
            (
                "openid-keys",
                &["zz"],
                "module argument 2 of 2 (the value of imid.openid-keys) refused: ",
            ),
        ];
        for &(name, values, want) in cases {
            for &value in values {
                let e = parse(&[name, value]).unwrap_err();
                assert!(e.contains(want), "{name} {value:?}: {e}");
            }
        }
        // A refused key list is never echoed: the value may hold keys.
        let e = parse(&["openid-keys", "00010203040506070809SECRET"]).unwrap_err();
        assert!(!e.contains("SECRET"), "{e}");
    }

    #[test]
    fn integers_as_redis_reads_them() {
        assert_eq!(parse_int("0"), Some(0));
        assert_eq!(parse_int("-5"), Some(-5));
        assert_eq!(parse_int("9223372036854775807"), Some(i64::MAX));
        for bad in [
            "",
            "-",
            "-0",
            "00",
            "01",
            "+1",
            " 1",
            "1 ",
            "1.0",
            "9223372036854775808",
        ] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
    }
}
