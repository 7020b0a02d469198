//! Durable before use (docs/durability.md, "Durable before use"): what the node's own AOF
//! setting promises a hand-out, and so what the gate (`node::fence`) makes it wait for; the gap
//! the node's data carries (`SEQ.GAP`) and the one it asks for as its rate grows.
//!
//! The setting's promises, one per [`Mode`]. The gap: a restart from this node's files, or a
//! promotion of a replica, skips on each sequence the gap in force in the data at that point
//! ([`gap_in_force`]), which the node raises and lowers with its rate ([`next_record`]).

use crate::config::{seq_gap, seq_gap_max};
use crate::core::durable::{next_gap, wanted_gap, Level};
use crate::host::aof::{self, Settings};
use crate::host::Ctx;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// What the AOF setting promises, and so what the gate does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// AOF off: nothing here (`node::exposure` says what a crash without AOF takes back).
    Off,
    /// `appendfsync no`: written before every reply, fsynced by the system. Redis writes its
    /// AOF buffer before every reply and never postpones it, so a process crash takes nothing
    /// back; what a host crash keeps is the system's affair.
    Written,
    /// `appendfsync everysec`: Redis postpones its write while its background fsync runs. A
    /// record (an IDMP token, a read) answers only where the write cannot be postponed, or waits
    /// until it is written; a value (a sequence's, a lease's, a gap skip) only once fsynced, by
    /// imid's own fsync of the AOF files, within a budget of the gap in force, so it rarely
    /// waits.
    Everysec,
    /// `appendfsync always`: written and fsynced before every reply, everything at once.
    Always,
    /// `always` while a child runs with `no-appendfsync-on-rewrite yes`: written, not fsynced.
    /// Redis skips its fsyncs then, and everything waits for imid's own.
    AlwaysUnsynced,
}

impl Mode {
    fn from_u8(v: u8) -> Mode {
        match v {
            1 => Mode::Written,
            2 => Mode::Everysec,
            3 => Mode::Always,
            4 => Mode::AlwaysUnsynced,
            _ => Mode::Off,
        }
    }

    /// The INFO words: what a value and what a record survive now.
    pub(crate) fn promises(self) -> (&'static str, &'static str) {
        match self {
            Mode::Off => ("none", "none"),
            Mode::Written => ("process-crash", "process-crash"),
            Mode::Everysec => ("host-crash", "process-crash"),
            Mode::Always | Mode::AlwaysUnsynced => ("host-crash", "host-crash"),
        }
    }
}

static MODE: AtomicU8 = AtomicU8::new(0);

/// The AOF settings last read (with a client: load, the cron, a config change).
static SETTINGS: Mutex<Option<Settings>> = Mutex::new(None);

/// Whether a child process runs (its born and died events), for `AlwaysUnsynced`.
static CHILD: AtomicBool = AtomicBool::new(false);

fn settings() -> MutexGuard<'static, Option<Settings>> {
    SETTINGS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The mode in force.
#[inline]
pub(crate) fn mode() -> Mode {
    Mode::from_u8(MODE.load(Relaxed))
}

/// Whether the gate counts the AOF as an acknowledger now (it has something to wait for).
#[inline]
pub(crate) fn gated() -> bool {
    matches!(mode(), Mode::Everysec | Mode::AlwaysUnsynced)
}

/// Whether everything propagated so far will be written before this event loop iteration's
/// replies go out: Redis's AOF write cannot be postponed (no background fsync pending), or
/// there is no such write to wait for. Main thread, between commands or inside one.
#[inline]
pub(crate) fn written_now() -> bool {
    match mode() {
        Mode::Everysec => !aof::fsync_pending(),
        _ => true,
    }
}

/// What a record (an IDMP token's, a read's view) must reach before its call answers, when it
/// cannot answer now: written (everysec), fsynced (always, unsynced while a child runs).
pub(crate) fn record_level() -> Option<Level> {
    match mode() {
        Mode::Everysec => Some(Level::Written),
        Mode::AlwaysUnsynced => Some(Level::Fsynced),
        _ => None,
    }
}

/// Whether a record may answer now ([`written_now`], and in `AlwaysUnsynced` never: it waits
/// for imid's fsync).
#[inline]
pub(crate) fn record_now() -> bool {
    match mode() {
        Mode::Everysec => !aof::fsync_pending(),
        Mode::AlwaysUnsynced => false,
        _ => true,
    }
}

/// The AOF directory and manifest for imid's own fsync.
pub(crate) fn files() -> Option<(PathBuf, String)> {
    settings().as_ref().and_then(|s| s.files.clone())
}

/// Reads the AOF settings (a context with a client) and follows them. Returns whether the mode
/// changed.
pub(crate) fn refresh(ctx: &Ctx) -> bool {
    let aof_on = crate::host::aof_on();
    CHILD.store(ctx.has_active_child(), Relaxed);
    let read = if aof_on { ctx.aof_settings() } else { None };
    if let Some(s) = &read {
        *settings() = Some(s.clone());
    }
    set_mode(aof_on)
}

/// A child process was born or died: `always` with `no-appendfsync-on-rewrite yes` changes what
/// Redis fsyncs. Calls nothing in Redis.
pub(crate) fn child(alive: bool) -> bool {
    CHILD.store(alive, Relaxed);
    set_mode(mode() != Mode::Off)
}

/// The mode the AOF's settings and a child's life make, set; whether it changed.
fn set_mode(aof_on: bool) -> bool {
    let new = if !aof_on {
        Mode::Off
    } else {
        match settings().as_ref() {
            None => Mode::Off,
            Some(s) => match s.fsync.as_slice() {
                b"always" if s.no_fsync_on_rewrite && CHILD.load(Relaxed) => Mode::AlwaysUnsynced,
                b"always" => Mode::Always,
                b"everysec" => Mode::Everysec,
                b"no" => Mode::Written,
                _ => Mode::Off,
            },
        }
    };
    MODE.swap(new as u8, Relaxed) != new as u8
}

/// At load: how to ask Redis whether its AOF write may be postponed, and the settings.
pub(crate) fn load(ctx: &Ctx) {
    let (version, valkey) = crate::host::server::version().unwrap_or(((0, 0), false));
    let how = aof::resolve_probe(version, valkey);
    refresh(ctx);
    ctx.log_notice(&format!(
        "imid: durable before use ({}): an AOF write Redis may postpone is seen through {how}",
        describe(mode())
    ));
}

/// What the mode means, for the log.
pub(crate) fn describe(m: Mode) -> &'static str {
    match m {
        Mode::Off => "AOF off: a crash takes back what the last snapshot lacks",
        Mode::Written => {
            "appendfsync no: nothing a process crash takes back, but a host crash may take back what the system had not flushed"
        }
        Mode::Everysec => {
            "appendfsync everysec: values fsynced before use, IDMP and IM.SEND records written before their answer"
        }
        Mode::Always => "appendfsync always: everything fsynced before its reply",
        Mode::AlwaysUnsynced => {
            "appendfsync always while a child runs with no-appendfsync-on-rewrite yes: everything waits for imid's own fsync"
        }
    }
}

// ---- The gap in force ----

/// The last gap record in this node's data (written here as a primary, or replayed from the
/// AOF, the primary, an RDB file): what a restart or a promotion at this point skips, at least
/// `imid.seq-gap`. 0: none.
static STREAM_GAP: AtomicU64 = AtomicU64::new(0);
/// The gap this node's inherited data carries: the stream's, as last replayed (a replica, a
/// load); a primary's own records leave it (its marked keys lost what its predecessor handed
/// out, bounded by the gap in force then).
static INHERITED_GAP: AtomicU64 = AtomicU64::new(0);

/// The gap a marked sequence skips at its first NEXT on this node.
#[inline]
pub(crate) fn skip_gap() -> u64 {
    seq_gap().max(INHERITED_GAP.load(Relaxed))
}

/// The last gap record in the data here (0: none).
pub(crate) fn stream_gap() -> u64 {
    STREAM_GAP.load(Relaxed)
}

/// The gap in force in the data here: the last record's, at least `imid.seq-gap`. A restart
/// from this node's files, or a promotion of a replica, skips it on each sequence.
pub(crate) fn gap_in_force() -> u64 {
    seq_gap().max(stream_gap())
}

/// A gap record replayed (`SEQ.GAP` from the AOF or the primary, the RDB aux data).
pub(crate) fn replayed(gap: u64) {
    STREAM_GAP.store(gap, Relaxed);
    INHERITED_GAP.store(gap, Relaxed);
}

/// The rate the node hands values out at, as the cron measures it.
struct Rate {
    /// The count and when (ms) at the last measure.
    last: Option<(u64, u64)>,
    /// Values a second, smoothed.
    per_s: u64,
    /// Since when (ms) the wanted gap has stayed below a quarter of the one in force.
    calm_since: Option<u64>,
}

static RATE: Mutex<Rate> = Mutex::new(Rate {
    last: None,
    per_s: 0,
    calm_since: None,
});

/// A lowering waits until the wanted gap has stayed low this long.
const CALM_MS: u64 = 10_000;

/// The cron's measure: the node's count `advanced` at `now_ms`, and its slowest acknowledger's
/// round (`round_ms`): the gap record to write now, if any (the caller writes it and notes it
/// with its acknowledgers: [`written`]). The node raises the gap when its rate and its
/// acknowledgers' rounds need a larger budget, up to `imid.seq-gap-max`, and lowers it again
/// when they no longer do (`core::durable::wanted_gap`, `next_gap`).
pub(crate) fn next_record(advanced: u64, now_ms: u64, round_ms: u64) -> Option<u64> {
    let mut r = RATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((count, at)) = r.last {
        let ms = now_ms.saturating_sub(at);
        if let Some(now) = advanced
            .saturating_sub(count)
            .saturating_mul(1000)
            .checked_div(ms)
        {
            // Up at once, down slowly: a burst must widen the budget before it runs out.
            r.per_s = if now > r.per_s {
                now
            } else {
                (r.per_s.saturating_mul(7) + now) / 8
            };
        }
    }
    r.last = Some((advanced, now_ms));
    let floor = seq_gap();
    let current = stream_gap().max(floor);
    let wanted = wanted_gap(r.per_s, round_ms, floor, seq_gap_max());
    if wanted.saturating_mul(4) < current {
        r.calm_since.get_or_insert(now_ms);
    } else {
        r.calm_since = None;
    }
    let calm = r
        .calm_since
        .is_some_and(|s| now_ms.saturating_sub(s) >= CALM_MS);
    let next = next_gap(current, wanted, floor, calm);
    if next.is_some() {
        r.calm_since = None;
    }
    // A record at the config's gap changes nothing unless one above it is in force.
    next.filter(|&g| g > floor || stream_gap() > floor)
}

/// This primary wrote the gap record `gap` (`SEQ.GAP`).
pub(crate) fn written(gap: u64) {
    STREAM_GAP.store(gap, Relaxed);
}

/// The rate last measured (values a second), for INFO.
pub(crate) fn rate_per_s() -> u64 {
    RATE.lock().unwrap_or_else(|e| e.into_inner()).per_s
}
