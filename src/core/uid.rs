//! 64-bit numeric IDs (UID.*), Redis-free: the layout (three fields, their order and widths, an
//! epoch and a time unit), encoding and decoding with range checks, the named layouts of other
//! generators, and the generator state machine.
//!
//! An ID is a positive signed 64-bit integer, most significant bits first:
//! `[0] | time (T bits) | node (N bits) | seq (S bits)`, or with seq above node
//! (`time | seq | node`, Sonyflake's order). The widths sum to 63 (bit 63 stays clear) or to 64
//! (the time field's top bit is bit 63: IDs stay positive as signed 64-bit only while it is 0,
//! so imid uses the time field's lower `T - 1` bits, Discord's and Instagram's rule). The time
//! field counts units (any whole number of ms) since the epoch (Unix ms). Snowflake is
//! `41,10,12` in ms, Baidu's UidGenerator `28,22,13` in seconds, Sonyflake
//! `time:39,seq:8,node:16` in 10 ms.
//!
//! Generator rules (as MSGID's):
//! - per lane (one lane per node, or per hash slot in cluster mode) every ID is strictly
//!   greater than every ID issued before it;
//! - time is `max(now, last, floor)`: a clock that runs backwards never makes IDs go back;
//! - a full seq field borrows the next time unit; nothing sleeps, spins or wraps;
//! - the generator owns no lease: it takes the shared time floor (Unix ms) and reports the ms
//!   time of the last ID it issued, which the caller keeps below the shared time lease. After
//!   a restart the floor is at or above that lease, and UID time units start at
//!   `ceil((floor - epoch) / unit)`, above every unit issued before.
//!
//! Within a lane the generator works on the linear index `L = time_unit << S | seq`: the IDs of
//! a lane are consecutive values of `L`, so a batch of `n` IDs is the run `L .. L + n - 1`, and
//! a full seq field rolls over into the next time unit by plain addition. The node field is
//! fixed per lane, so where it sits (below or above seq) only changes the shifts.

use super::slot::key_slot;
use std::fmt;

/// The widths sum to this (bit 63 clear), or to one more with the time field's top bit kept 0.
pub const WIDTH_SUM: u32 = 63;
/// Redis Cluster hash slots, and the bits a slot takes in the node field.
pub const SLOTS: usize = 16_384;
pub const SLOT_BITS: u32 = 14;
/// A layout must last at least this long past the server clock at load (365 days).
pub const MIN_LIFETIME_MS: u64 = 365 * 86_400_000;
/// The default epoch: 2026-01-01T00:00:00Z.
pub const DEFAULT_EPOCH_MS: u64 = 1_767_225_600_000;
/// The largest batch `UID.GEN ... COUNT n` takes.
pub const MAX_COUNT: u32 = 10_000;
/// The longest time unit: one day. Longer units would make an ID's time meaningless.
pub const MAX_UNIT_MS: u64 = 86_400_000;

/// Bit widths of the three fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Widths {
    pub time: u32,
    pub node: u32,
    pub seq: u32,
}

impl Widths {
    /// Twitter's Snowflake: 69 years of ms, 1024 nodes, 4096 IDs per ms.
    pub const SNOWFLAKE: Widths = Widths {
        time: 41,
        node: 10,
        seq: 12,
    };
    /// Cluster mode's `auto`: the node field holds the hash slot, 256 IDs per ms per slot.
    pub const CLUSTER: Widths = Widths {
        time: 41,
        node: 14,
        seq: 8,
    };
    /// Baidu UidGenerator's default (in seconds): 8.5 years, 4M workers, 8192 IDs per second.
    pub const UIDGENERATOR: Widths = Widths {
        time: 28,
        node: 22,
        seq: 13,
    };

    /// `imid.uid-layout auto`: Snowflake standalone, the slot layout in cluster mode.
    pub const fn auto(cluster: bool) -> Widths {
        if cluster {
            Widths::CLUSTER
        } else {
            Widths::SNOWFLAKE
        }
    }

    const fn sum(&self) -> u32 {
        self.time + self.node + self.seq
    }
}

impl fmt::Display for Widths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{}", self.time, self.node, self.seq)
    }
}

/// Where seq sits below the time field: `time | node | seq` (Snowflake) or `time | seq | node`
/// (Sonyflake).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    NodeSeq,
    SeqNode,
}

/// A field of an ID, in UID.DECODE's reply and in layout texts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Time,
    Node,
    Seq,
}

impl Field {
    pub const fn name(self) -> &'static str {
        match self {
            Field::Time => "time",
            Field::Node => "node",
            Field::Seq => "seq",
        }
    }
}

impl Order {
    /// The three fields, most significant first.
    pub const fn fields(self) -> [Field; 3] {
        match self {
            Order::NodeSeq => [Field::Time, Field::Node, Field::Seq],
            Order::SeqNode => [Field::Time, Field::Seq, Field::Node],
        }
    }
}

/// The unit of the time field: a whole number of milliseconds (1 to [`MAX_UNIT_MS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeUnit {
    ms: u64,
}

#[allow(non_upper_case_globals)]
impl TimeUnit {
    /// Milliseconds (Snowflake, Discord, Instagram, Mastodon).
    pub const Ms: TimeUnit = TimeUnit { ms: 1 };
    /// Seconds (Baidu UidGenerator).
    pub const S: TimeUnit = TimeUnit { ms: 1000 };
    /// Ten milliseconds (Sonyflake).
    pub const TEN_MS: TimeUnit = TimeUnit { ms: 10 };

    /// A unit of `ms` milliseconds, in 1..=[`MAX_UNIT_MS`].
    pub const fn of_ms(ms: u64) -> Option<TimeUnit> {
        if ms >= 1 && ms <= MAX_UNIT_MS {
            Some(TimeUnit { ms })
        } else {
            None
        }
    }

    /// `ms`, `s`, or a count of either: `10ms`, `2s` (decimal, no sign, spaces or leading
    /// zero; the words in any case, as Redis took the enum config's `ms` and `s`).
    pub fn parse(text: &str) -> Result<TimeUnit, LayoutError> {
        let lower = text.to_ascii_lowercase();
        let t = lower.as_str();
        let (count, scale) = if let Some(n) = t.strip_suffix("ms") {
            (n, 1)
        } else if let Some(n) = t.strip_suffix('s') {
            (n, 1000)
        } else {
            return Err(LayoutError::UnitSyntax);
        };
        let count: u64 = if count.is_empty() {
            1
        } else if count.len() > 9
            || count.starts_with('0')
            || !count.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(LayoutError::UnitSyntax);
        } else {
            count.parse().map_err(|_| LayoutError::UnitSyntax)?
        };
        count
            .checked_mul(scale)
            .and_then(TimeUnit::of_ms)
            .ok_or(LayoutError::UnitSyntax)
    }

    pub const fn ms(self) -> u64 {
        self.ms
    }

    /// The unit as config text: `ms`, `10ms`, `s`, `2s`.
    pub fn name(self) -> String {
        self.to_string()
    }

    /// Whole units in `ms` (rounded down). No division for the 1 ms unit.
    #[inline]
    fn floor_units(self, ms: u64) -> u64 {
        if self.ms == 1 {
            ms
        } else {
            ms / self.ms
        }
    }

    /// Units in `ms`, rounded up.
    #[inline]
    fn ceil_units(self, ms: u64) -> u64 {
        if self.ms == 1 {
            ms
        } else {
            ms.div_ceil(self.ms)
        }
    }
}

impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ms {
            1 => f.write_str("ms"),
            1000 => f.write_str("s"),
            ms if ms % 1000 == 0 => write!(f, "{}s", ms / 1000),
            ms => write!(f, "{ms}ms"),
        }
    }
}

/// A layout as `imid.uid-layout` (or UID.DECODE's `LAYOUT`) names it: widths and order, and
/// for a named layout its epoch and unit (which explicit values override).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayoutSpec {
    pub widths: Widths,
    pub order: Order,
    pub epoch_ms: Option<u64>,
    pub unit: Option<TimeUnit>,
    /// The name it was given by, if any.
    pub name: Option<&'static str>,
}

/// A well-known 64-bit ID scheme: what `imid.uid-layout <name>` sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    pub name: &'static str,
    pub widths: Widths,
    pub order: Order,
    pub epoch_ms: u64,
    pub unit: TimeUnit,
}

const fn named(
    name: &'static str,
    (time, node, seq): (u32, u32, u32),
    order: Order,
    epoch_ms: u64,
    unit: TimeUnit,
) -> Named {
    Named {
        name,
        widths: Widths { time, node, seq },
        order,
        epoch_ms,
        unit,
    }
}

/// The named layouts, bit-exact with the schemes they are named after.
pub const NAMED: [Named; 7] = [
    // Twitter Snowflake (and Meituan Leaf): 0 | 41 time | 10 machine (5 datacenter + 5 worker)
    // | 12 seq, epoch 2010-11-04T01:42:54.657Z.
    named(
        "twitter",
        (41, 10, 12),
        Order::NodeSeq,
        1_288_834_974_657,
        TimeUnit::Ms,
    ),
    // Discord: 42 time | 10 (5 worker + 5 process) | 12 increment, epoch 2015-01-01.
    named(
        "discord",
        (42, 10, 12),
        Order::NodeSeq,
        1_420_070_400_000,
        TimeUnit::Ms,
    ),
    // Instagram: 41 time | 13 shard | 10 seq, epoch 2011-08-24T21:07:01.721Z.
    named(
        "instagram",
        (41, 13, 10),
        Order::NodeSeq,
        1_314_220_021_721,
        TimeUnit::Ms,
    ),
    // Sonyflake v1: 0 | 39 time | 8 seq | 16 machine, in 10 ms, epoch 2014-09-01.
    named(
        "sonyflake",
        (39, 16, 8),
        Order::SeqNode,
        1_409_529_600_000,
        TimeUnit::TEN_MS,
    ),
    // Sonyflake v2's defaults: the same bits, epoch 2025-01-01.
    named(
        "sonyflake-v2",
        (39, 16, 8),
        Order::SeqNode,
        1_735_689_600_000,
        TimeUnit::TEN_MS,
    ),
    // Baidu UidGenerator's default: 0 | 28 seconds | 22 worker | 13 seq, epoch 2016-05-20
    // (UTC; it ran out on 2024-11-20).
    named(
        "uidgenerator",
        (28, 22, 13),
        Order::NodeSeq,
        1_463_702_400_000,
        TimeUnit::S,
    ),
    // Mastodon: 48 bits of Unix ms | 16 low bits (its hashed table sequence), no node field.
    named("mastodon", (48, 0, 16), Order::NodeSeq, 0, TimeUnit::Ms),
];

impl LayoutSpec {
    /// `imid.uid-layout auto`: Snowflake standalone, the slot layout in cluster mode.
    pub const fn auto(cluster: bool) -> LayoutSpec {
        LayoutSpec::widths(Widths::auto(cluster))
    }

    /// Explicit widths in Snowflake's order, without epoch or unit of their own.
    pub const fn widths(widths: Widths) -> LayoutSpec {
        LayoutSpec {
            widths,
            order: Order::NodeSeq,
            epoch_ms: None,
            unit: None,
            name: None,
        }
    }

    /// Parses `auto` (None), a name of [`NAMED`] (any case), three widths `time,node,seq`, or
    /// named fields in order, most significant first: `time:39,seq:8,node:16` (time first; a
    /// field left out has 0 bits). The widths sum to 63, or to 64 (see the module doc).
    /// Spaces around the words are ignored.
    pub fn parse(text: &str) -> Result<Option<LayoutSpec>, LayoutError> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("auto") {
            return Ok(None);
        }
        if let Some(n) = NAMED.iter().find(|n| n.name.eq_ignore_ascii_case(text)) {
            return Ok(Some(LayoutSpec {
                widths: n.widths,
                order: n.order,
                epoch_ms: Some(n.epoch_ms),
                unit: Some(n.unit),
                name: Some(n.name),
            }));
        }
        let width = |p: &str| -> Result<u32, LayoutError> {
            if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(LayoutError::Syntax);
            }
            p.parse().map_err(|_| LayoutError::Syntax)
        };
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let spec = if parts.iter().any(|p| p.contains(':')) {
            // time:T,node:N,seq:S in the order given
            if parts.len() > 3 {
                return Err(LayoutError::Syntax);
            }
            let mut got: [Option<u32>; 3] = [None; 3];
            let mut order = Vec::with_capacity(3);
            for p in &parts {
                let (name, w) = p.split_once(':').ok_or(LayoutError::Syntax)?;
                let field = match name.trim().to_ascii_lowercase().as_str() {
                    "time" => Field::Time,
                    "node" => Field::Node,
                    "seq" => Field::Seq,
                    _ => return Err(LayoutError::Syntax),
                };
                let slot = match field {
                    Field::Time => 0,
                    Field::Node => 1,
                    Field::Seq => 2,
                };
                match got.get_mut(slot) {
                    Some(s @ None) => *s = Some(width(w.trim())?),
                    _ => return Err(LayoutError::FieldTwice(field.name())),
                }
                order.push(field);
            }
            if order.first() != Some(&Field::Time) {
                return Err(LayoutError::TimeNotFirst);
            }
            let [time, node, seq] = got;
            let seq_above_node = matches!(order.as_slice(), [_, Field::Seq, Field::Node]);
            LayoutSpec {
                widths: Widths {
                    time: time.unwrap_or(0),
                    node: node.unwrap_or(0),
                    seq: seq.unwrap_or(0),
                },
                order: if seq_above_node {
                    Order::SeqNode
                } else {
                    Order::NodeSeq
                },
                epoch_ms: None,
                unit: None,
                name: None,
            }
        } else {
            let [t, n, s] = parts.as_slice() else {
                return Err(LayoutError::Syntax);
            };
            LayoutSpec::widths(Widths {
                time: width(t)?,
                node: width(n)?,
                seq: width(s)?,
            })
        };
        check_widths(spec.widths)?;
        Ok(Some(spec))
    }

    /// The layout with an explicit epoch and unit where given, else this spec's own (a named
    /// layout's), else the defaults (2026-01-01, ms).
    pub fn resolve(
        &self,
        epoch_ms: Option<u64>,
        unit: Option<TimeUnit>,
    ) -> Result<Layout, LayoutError> {
        Layout::with_order(
            self.widths,
            self.order,
            epoch_ms.or(self.epoch_ms).unwrap_or(DEFAULT_EPOCH_MS),
            unit.or(self.unit).unwrap_or(TimeUnit::Ms),
        )
    }
}

/// The widths' own rules: they sum to 63 or 64, with at least one usable time bit.
fn check_widths(w: Widths) -> Result<(), LayoutError> {
    let sum = w.sum();
    if sum != WIDTH_SUM && sum != WIDTH_SUM + 1 {
        return Err(LayoutError::Sum(sum));
    }
    // The time bits below bit 63: all of them for a sum of 63, all but the top one for 64.
    if w.node + w.seq >= WIDTH_SUM {
        return Err(LayoutError::NoTime);
    }
    Ok(())
}

/// `imid.uid-epoch`: `auto` (the layout's own, else 2026-01-01) or Unix ms (a decimal integer
/// in 0..2^63-1 without sign, spaces or leading zeros, as Redis reads a numeric config).
pub fn parse_epoch(text: &str) -> Result<Option<u64>, LayoutError> {
    let t = text;
    if t.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    if t.is_empty()
        || t.len() > 19
        || (t.len() > 1 && t.starts_with('0'))
        || !t.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(LayoutError::EpochSyntax);
    }
    t.parse::<i64>()
        .map(|v| Some(v.unsigned_abs()))
        .map_err(|_| LayoutError::EpochSyntax)
}

/// `imid.uid-time-unit`: `auto` (the layout's own, else ms) or a [`TimeUnit`].
pub fn parse_unit(text: &str) -> Result<Option<TimeUnit>, LayoutError> {
    if text.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    TimeUnit::parse(text).map(Some)
}

/// `imid.uid-node`: `auto` or a fixed worker number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeSpec {
    Auto,
    Fixed(u64),
}

impl NodeSpec {
    /// `auto` (any case) or a decimal number (up to 2^62; the layout checks that it fits),
    /// written as UID.DECODE writes it: no spaces, sign or leading zeros.
    pub fn parse(text: &str) -> Result<NodeSpec, LayoutError> {
        if text.eq_ignore_ascii_case("auto") {
            return Ok(NodeSpec::Auto);
        }
        if text.is_empty()
            || text.len() > 19
            || !text.bytes().all(|b| b.is_ascii_digit())
            || (text.len() > 1 && text.starts_with('0'))
        {
            return Err(LayoutError::NodeSyntax);
        }
        text.parse()
            .map(NodeSpec::Fixed)
            .map_err(|_| LayoutError::NodeSyntax)
    }
}

/// Where the node field comes from once the configs are resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeMode {
    /// Every ID carries this worker number; one lane.
    Fixed(u64),
    /// Every ID carries its target's hash slot; one lane per slot (cluster mode).
    Slot,
}

/// The names of [`NAMED`], for messages.
fn names() -> String {
    NAMED.iter().map(|n| n.name).collect::<Vec<_>>().join(", ")
}

/// A layout refused, with what was wrong; the message names the config and, where it matters,
/// the date the layout runs out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    Syntax,
    Sum(u32),
    NoTime,
    TimeNotFirst,
    FieldTwice(&'static str),
    UnitSyntax,
    EpochSyntax,
    NodeSyntax,
    /// The last time unit lies past 2^63-1 Unix ms.
    TooWide {
        widths: Widths,
        unit: TimeUnit,
    },
    EpochAhead {
        epoch_ms: u64,
        now_ms: u64,
    },
    RanOut {
        end_ms: u64,
    },
    RunsOutSoon {
        end_ms: u64,
    },
    NodeTooBig {
        node: u64,
        bits: u32,
    },
    SlotNeedsBits {
        bits: u32,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Syntax => write!(
                f,
                "imid.uid-layout must be auto, a named layout ({}), three bit widths time,node,seq (e.g. 41,10,12) or named fields in order (e.g. time:39,seq:8,node:16), summing to 63 or 64",
                names()
            ),
            LayoutError::Sum(s) => write!(
                f,
                "imid.uid-layout widths must sum to 63 (or 64, the time field's top bit kept 0), not {s}"
            ),
            LayoutError::NoTime => f.write_str(
                "imid.uid-layout time width must be at least 1 (at least 2 when the widths sum to 64)",
            ),
            LayoutError::TimeNotFirst => f.write_str(
                "imid.uid-layout must name time first: UIDs are ordered by their time field",
            ),
            LayoutError::FieldTwice(name) => {
                write!(f, "imid.uid-layout names the {name} field twice")
            }
            LayoutError::UnitSyntax => f.write_str(
                "imid.uid-time-unit must be auto, ms, s, or a whole number of them (e.g. 10ms, 2s), at most 1 day",
            ),
            LayoutError::EpochSyntax => f.write_str(
                "imid.uid-epoch must be auto or Unix ms, an integer in 0..9223372036854775807",
            ),
            LayoutError::NodeSyntax => {
                f.write_str(
                    "imid.uid-node must be auto or a non-negative integer (no spaces or leading zeros)",
                )
            }
            LayoutError::TooWide { widths, unit } => write!(
                f,
                "imid.uid-layout {widths} in {unit} reaches past the largest Unix time (2^63-1 ms)"
            ),
            LayoutError::EpochAhead { epoch_ms, now_ms } => write!(
                f,
                "imid.uid-epoch {epoch_ms} ({}) is after the server clock ({})",
                utc_text(*epoch_ms),
                utc_text(*now_ms)
            ),
            LayoutError::RanOut { end_ms } => write!(
                f,
                "imid.uid-layout has run out: its time field ended on {} (give the time field more bits, or move imid.uid-epoch later)",
                utc_text(*end_ms)
            ),
            LayoutError::RunsOutSoon { end_ms } => write!(
                f,
                "imid.uid-layout runs out on {}, within a year (give the time field more bits, or move imid.uid-epoch later)",
                utc_text(*end_ms)
            ),
            LayoutError::NodeTooBig { node, bits } => write!(
                f,
                "imid.uid-node {node} does not fit the layout's {bits} node bits (0..{})",
                max_of(*bits)
            ),
            LayoutError::SlotNeedsBits { bits } => write!(
                f,
                "imid.uid-node auto puts the hash slot in the node field in cluster mode, which needs at least 14 node bits; the layout has {bits}: set imid.uid-node to this node's worker number (0..{}), or use a layout with 14 or more node bits",
                max_of(*bits)
            ),
        }
    }
}

/// A field of UID.ENCODE out of range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldError {
    BeforeEpoch { epoch_ms: u64 },
    PastEnd { last_ms: u64, end_ms: u64 },
    NotWholeUnit { unit: TimeUnit },
    Node { max: u64 },
    Seq { max: u64 },
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldError::BeforeEpoch { epoch_ms } => {
                write!(f, "time_ms must be at or after imid.uid-epoch ({epoch_ms})")
            }
            FieldError::PastEnd { last_ms, end_ms } => write!(
                f,
                "time_ms must be at most {last_ms}: the layout's time field ends on {}",
                utc_text(*end_ms)
            ),
            FieldError::NotWholeUnit { unit } => match unit.ms() {
                1000 => f.write_str(
                    "time_ms must be imid.uid-epoch plus a whole number of seconds (imid.uid-time-unit)",
                ),
                ms => write!(
                    f,
                    "time_ms must be imid.uid-epoch plus a whole number of {ms} ms units (imid.uid-time-unit {unit})"
                ),
            },
            FieldError::Node { max } => write!(f, "node must be an integer in 0..{max}"),
            FieldError::Seq { max } => write!(f, "seq must be an integer in 0..{max}"),
        }
    }
}

/// The time field is used up: the layout ran out (or a floor pushed the time past its end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exhausted {
    pub end_ms: u64,
}

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "uid time field exhausted: the layout ends on {} (imid.uid-layout)",
            utc_text(self.end_ms)
        )
    }
}

/// How far past `max(clock, floor)` a UID.GEN run may reach by borrowing time units.
///
/// Ten seconds: twice the time lease (`core::lease::LEASE_MS`), so a burst may run a little
/// ahead of the clock as the lease does, while the UIDs' time stays close to real time (an
/// hour-long drift would show in UID.DECODE and, persisted with the lease, survive restarts).
/// It admits any burst a sane layout needs: a COUNT 10000 fits every layout in ms, and every
/// layout in seconds with at least 10 seq bits. Layouts that borrow on every ID (0 seq bits)
/// are not refused: they issue one ID per unit per node, and this bound tells the client when
/// to retry instead of moving the time.
pub const UID_MAX_LEAD_MS: u64 = 10_000;

/// A UID.GEN run refused by [`UID_MAX_LEAD_MS`]: the layout's rate is exceeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooFast {
    pub widths: Widths,
    pub unit: TimeUnit,
    /// How far past `max(clock, floor)` the run's last ID would have been.
    pub ahead_ms: u64,
    /// How long until the clock lets it through (if nothing else is issued meanwhile).
    pub wait_ms: u64,
    pub count: u32,
    /// IDs per time unit per lane (2^seq bits).
    pub per_unit: u64,
    /// The largest run that ever fits on an idle lane.
    pub per_run: u64,
}

impl fmt::Display for TooFast {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UID rate exceeded: imid.uid-layout {} in {} holds {} UIDs per {} per lane, and UID.GEN may borrow at most {UID_MAX_LEAD_MS} ms ahead of the clock; this run would end {} ms ahead, so nothing was issued: ",
            self.widths,
            self.unit.name(),
            self.per_unit,
            self.unit.name(),
            self.ahead_ms
        )?;
        if u64::from(self.count) > self.per_run {
            write!(
                f,
                "COUNT {} never fits (at most {} per call)",
                self.count, self.per_run
            )
        } else {
            write!(f, "retry in {} ms", self.wait_ms)
        }
    }
}

/// Why a bounded run was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IssueError {
    Exhausted(Exhausted),
    TooFast(TooFast),
}

impl fmt::Display for IssueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IssueError::Exhausted(e) => e.fmt(f),
            IssueError::TooFast(e) => e.fmt(f),
        }
    }
}

/// A run worked out but not issued yet.
#[derive(Clone, Copy, Debug)]
struct Plan {
    node: u64,
    lane: usize,
    /// The linear index of the clock's (or the floor's) unit, seq 0.
    clock_l: u64,
    first: u64,
    final_l: u64,
}

/// `2^bits - 1` for `bits` in 0..=63.
const fn max_of(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The decoded fields of an ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UidFields {
    /// Unix ms: epoch + time field × unit.
    pub time_ms: u64,
    pub node: u64,
    pub seq: u64,
}

/// A validated layout: widths, order, epoch and unit, with everything derived from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    widths: Widths,
    order: Order,
    epoch_ms: u64,
    unit: TimeUnit,
    /// The largest time field value imid issues or reads: `2^T - 1`, or `2^(T-1) - 1` when the
    /// widths sum to 64 (IDs positive as signed 64-bit).
    time_max: u64,
    node_max: u64,
    seq_mask: u64,
    time_shift: u32,
    node_shift: u32,
    seq_shift: u32,
    /// Unix ms of the first time unit past the field: every ID's time is below it.
    end_ms: u64,
}

impl Layout {
    /// [`with_order`](Self::with_order) in Snowflake's order (`time | node | seq`).
    pub fn new(widths: Widths, epoch_ms: u64, unit: TimeUnit) -> Result<Layout, LayoutError> {
        Layout::with_order(widths, Order::NodeSeq, epoch_ms, unit)
    }

    /// Checks the widths (sum 63 or 64, a time field) and that the last time unit is a Unix
    /// time in ms below 2^63 (so every decoded time fits a signed 64-bit reply).
    pub fn with_order(
        widths: Widths,
        order: Order,
        epoch_ms: u64,
        unit: TimeUnit,
    ) -> Result<Layout, LayoutError> {
        check_widths(widths)?;
        let time_bits = WIDTH_SUM - widths.node - widths.seq;
        let units = 1u128 << time_bits;
        let end = u128::from(epoch_ms) + units * u128::from(unit.ms());
        if end > i64::MAX as u128 {
            return Err(LayoutError::TooWide { widths, unit });
        }
        let (node_shift, seq_shift) = match order {
            Order::NodeSeq => (widths.seq, 0),
            Order::SeqNode => (0, widths.node),
        };
        Ok(Layout {
            widths,
            order,
            epoch_ms,
            unit,
            time_max: max_of(time_bits),
            node_max: max_of(widths.node),
            seq_mask: max_of(widths.seq),
            time_shift: widths.node + widths.seq,
            node_shift,
            seq_shift,
            end_ms: end as u64,
        })
    }

    /// The load-time checks against the server clock: the epoch is not in the future, and the
    /// layout lasts at least a year from `now_ms`.
    pub fn check_lifetime(&self, now_ms: u64) -> Result<(), LayoutError> {
        if self.epoch_ms > now_ms {
            return Err(LayoutError::EpochAhead {
                epoch_ms: self.epoch_ms,
                now_ms,
            });
        }
        if self.end_ms <= now_ms {
            return Err(LayoutError::RanOut {
                end_ms: self.end_ms,
            });
        }
        if self.end_ms - now_ms < MIN_LIFETIME_MS {
            return Err(LayoutError::RunsOutSoon {
                end_ms: self.end_ms,
            });
        }
        Ok(())
    }

    /// Resolves `imid.uid-node` against this layout and the server mode.
    pub fn node_mode(&self, spec: NodeSpec, cluster: bool) -> Result<NodeMode, LayoutError> {
        match spec {
            NodeSpec::Auto if cluster => {
                if self.widths.node < SLOT_BITS {
                    Err(LayoutError::SlotNeedsBits {
                        bits: self.widths.node,
                    })
                } else {
                    Ok(NodeMode::Slot)
                }
            }
            NodeSpec::Auto => Ok(NodeMode::Fixed(0)),
            NodeSpec::Fixed(n) if n > self.node_max => Err(LayoutError::NodeTooBig {
                node: n,
                bits: self.widths.node,
            }),
            NodeSpec::Fixed(n) => Ok(NodeMode::Fixed(n)),
        }
    }

    pub fn widths(&self) -> Widths {
        self.widths
    }
    pub fn order(&self) -> Order {
        self.order
    }
    pub fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }
    pub fn unit(&self) -> TimeUnit {
        self.unit
    }
    pub fn node_max(&self) -> u64 {
        self.node_max
    }
    pub fn seq_max(&self) -> u64 {
        self.seq_mask
    }
    pub fn time_max(&self) -> u64 {
        self.time_max
    }
    /// Unix ms of the first time unit past the field (INFO `imid_uid_time_ends_ms`).
    pub fn end_ms(&self) -> u64 {
        self.end_ms
    }
    /// Unix ms of the last time unit the field holds.
    pub fn last_ms(&self) -> u64 {
        self.end_ms - self.unit.ms()
    }

    /// The layout as `imid.uid-layout` could give it: `41,10,12`, or named fields when seq
    /// lies above node (`time:39,seq:8,node:16`).
    pub fn spec_text(&self) -> String {
        match self.order {
            Order::NodeSeq => self.widths.to_string(),
            Order::SeqNode => format!(
                "time:{},seq:{},node:{}",
                self.widths.time, self.widths.seq, self.widths.node
            ),
        }
    }

    /// Builds an ID; every field range-checked, never wrapped.
    pub fn encode(&self, time_ms: u64, node: u64, seq: u64) -> Result<u64, FieldError> {
        if time_ms < self.epoch_ms {
            return Err(FieldError::BeforeEpoch {
                epoch_ms: self.epoch_ms,
            });
        }
        if time_ms >= self.end_ms {
            return Err(FieldError::PastEnd {
                last_ms: self.last_ms(),
                end_ms: self.end_ms,
            });
        }
        let since = time_ms - self.epoch_ms;
        if since % self.unit.ms() != 0 {
            return Err(FieldError::NotWholeUnit { unit: self.unit });
        }
        if node > self.node_max {
            return Err(FieldError::Node { max: self.node_max });
        }
        if seq > self.seq_mask {
            return Err(FieldError::Seq { max: self.seq_mask });
        }
        let t = since / self.unit.ms();
        Ok(self.compose(t, node, seq))
    }

    /// Splits an ID (any value in 0..2^63-1; the top bit of a u64 is ignored) into its fields.
    pub fn decode(&self, uid: u64) -> UidFields {
        let uid = uid & (u64::MAX >> 1);
        let t = uid >> self.time_shift;
        let node = (uid >> self.node_shift) & self.node_max;
        let seq = (uid >> self.seq_shift) & self.seq_mask;
        UidFields {
            // t <= time_max, and new() checked that the last unit's ms is below 2^63.
            time_ms: self.epoch_ms + t * self.unit.ms(),
            node,
            seq,
        }
    }

    #[inline]
    fn compose(&self, t: u64, node: u64, seq: u64) -> u64 {
        (t << self.time_shift) | (node << self.node_shift) | (seq << self.seq_shift)
    }
}

/// Counters for `INFO imid`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UidStats {
    pub generated: u64,
    pub borrowed_units: u64,
}

/// A run of consecutive IDs of one lane, in increasing order, already committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    first: u64,
    last: u64,
    /// The node field in place.
    node_bits: u64,
    seq_bits: u32,
    seq_mask: u64,
    seq_shift: u32,
    shift_time: u32,
    /// Unix ms of the last ID's time unit: the caller keeps it below the shared time lease.
    pub time_ms: u64,
}

impl Run {
    #[inline]
    fn uid_at(&self, l: u64) -> u64 {
        ((l >> self.seq_bits) << self.shift_time)
            | self.node_bits
            | ((l & self.seq_mask) << self.seq_shift)
    }
    /// The first (smallest) ID of the run.
    pub fn first(&self) -> u64 {
        self.uid_at(self.first)
    }
    /// How many IDs the run holds (at least 1).
    pub fn count(&self) -> u64 {
        self.last - self.first + 1
    }
    /// Every ID of the run, increasing.
    pub fn uids(&self) -> impl Iterator<Item = u64> + '_ {
        (self.first..=self.last).map(|l| self.uid_at(l))
    }
}

/// No lane issued anything yet.
const NONE: u64 = u64::MAX;

/// The UID generator: a layout, the node mode, and per lane the linear index of its last ID.
#[derive(Debug)]
pub struct UidGenerator {
    layout: Layout,
    mode: NodeMode,
    /// Last issued `L = time << seq_bits | seq` per lane (`NONE`: nothing yet). One lane for a
    /// fixed node, one per hash slot in slot mode (128 KiB).
    lanes: Vec<u64>,
    stats: UidStats,
    /// The latest clock reading seen by [`issue_bounded`](Self::issue_bounded).
    latest_now_ms: u64,
    /// What [`issue_one`](Self::issue_one) needs to issue the next ID of the same time unit
    /// without planning it again; `None` until a bounded issue of a fixed node has run.
    repeat: Option<Repeat>,
}

/// The inputs of the last bounded issue (fixed node only) and the UID it ended with. A call
/// with the same clock reading and floor plans exactly as that one did: its run starts at the
/// lane's next index, in the same time unit while the seq field has room, so its UID is the
/// last one plus one step of the seq field, and every check the plan made (exhaustion, the
/// borrowing bound, the lease) still holds for that unit.
#[derive(Clone, Copy, Debug)]
struct Repeat {
    now_ms: u64,
    floor_ms: u64,
    uid: u64,
}

impl UidGenerator {
    /// `mode` must come from [`Layout::node_mode`] (a fixed node that fits, or slots with at
    /// least 14 node bits); anything else is corrected to fit rather than trusted.
    pub fn new(layout: Layout, mode: NodeMode) -> UidGenerator {
        let mode = match mode {
            NodeMode::Fixed(n) => NodeMode::Fixed(n & layout.node_max),
            NodeMode::Slot if layout.widths.node < SLOT_BITS => NodeMode::Fixed(0),
            NodeMode::Slot => NodeMode::Slot,
        };
        let lanes = match mode {
            NodeMode::Fixed(_) => 1,
            NodeMode::Slot => SLOTS,
        };
        UidGenerator {
            layout,
            mode,
            lanes: vec![NONE; lanes],
            stats: UidStats::default(),
            latest_now_ms: 0,
            repeat: None,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn mode(&self) -> NodeMode {
        self.mode
    }

    pub fn stats(&self) -> UidStats {
        self.stats
    }

    /// The node field and lane of an ID whose target lies in hash `slot`: the slot itself in
    /// slot mode (masked to 14 bits, so the lane always exists), else the fixed node.
    #[inline]
    fn lane_of(&self, slot: u16) -> (u64, usize) {
        match self.mode {
            NodeMode::Fixed(n) => (n, 0),
            NodeMode::Slot => {
                let slot = slot & (SLOTS as u16 - 1);
                (u64::from(slot), usize::from(slot))
            }
        }
    }

    /// Issues `count` (at least 1) consecutive IDs for a target in hash `slot` (read only in
    /// slot mode) given the clock reading and the shared time floor (both Unix ms). All or
    /// nothing: when the time field cannot hold the whole run, nothing is issued and the state
    /// is unchanged. No bound on borrowing: the node issues with
    /// [`issue_bounded`](Self::issue_bounded).
    #[inline(always)]
    pub fn issue(
        &mut self,
        slot: u16,
        now_ms: u64,
        floor_ms: u64,
        count: u32,
    ) -> Result<Run, Exhausted> {
        let plan = self.plan(slot, now_ms, floor_ms, count)?;
        // Unbounded runs do not record what issue_one relies on.
        self.repeat = None;
        Ok(self.commit(plan))
    }

    /// [`issue`](Self::issue), but a run whose last ID's time would lie more than
    /// [`UID_MAX_LEAD_MS`] past `max(latest clock reading, floor_ms)` is refused (all or
    /// nothing: nothing is issued, the state is unchanged). Borrowed units run ahead of the
    /// clock; without a bound a layout with few seq bits (every ID borrows a whole unit with 0
    /// seq bits) would drag the UIDs' time, and the lease persisted with them, hours into the
    /// future. The latest reading rather than `now_ms`: after the clock steps back, IDs go on
    /// at the last time (as message IDs do) instead of stalling until it catches up.
    #[inline(always)]
    pub fn issue_bounded(
        &mut self,
        slot: u16,
        now_ms: u64,
        floor_ms: u64,
        count: u32,
    ) -> Result<Run, IssueError> {
        let plan = self
            .plan(slot, now_ms, floor_ms, count)
            .map_err(IssueError::Exhausted)?;
        let end_ms = self.time_ms_of(plan.final_l);
        self.latest_now_ms = self.latest_now_ms.max(now_ms);
        let base = self.latest_now_ms.max(floor_ms);
        if end_ms > base.saturating_add(UID_MAX_LEAD_MS) {
            let l = &self.layout;
            // Units from the clock's through UID_MAX_LEAD_MS later, whatever the alignment.
            let units = UID_MAX_LEAD_MS / l.unit.ms() + 1;
            let per_unit = l.seq_mask.saturating_add(1);
            let per_run = units.saturating_mul(per_unit);
            return Err(IssueError::TooFast(TooFast {
                widths: l.widths,
                unit: l.unit,
                ahead_ms: end_ms - base,
                wait_ms: end_ms
                    .saturating_sub(UID_MAX_LEAD_MS)
                    .saturating_sub(now_ms)
                    .max(1),
                count,
                per_unit,
                per_run,
            }));
        }
        let run = self.commit(plan);
        self.repeat = match self.mode {
            NodeMode::Fixed(_) => Some(Repeat {
                now_ms,
                floor_ms,
                uid: run.uid_at(run.last),
            }),
            NodeMode::Slot => None,
        };
        Ok(run)
    }

    /// One ID, exactly as `issue_bounded(_, now_ms, floor_ms, 1)` would issue it, when that is
    /// the next ID of the previous bounded issue's time unit: a fixed node, the same clock
    /// reading and floor as that issue, and room left in the seq field. `None` otherwise
    /// (nothing changed): the caller plans with [`issue_bounded`](Self::issue_bounded). The
    /// common case of a busy node (many IDs per clock tick) without the plan's arithmetic.
    #[inline(always)]
    pub fn issue_one(&mut self, now_ms: u64, floor_ms: u64) -> Option<u64> {
        let r = self.repeat.as_mut()?;
        if r.now_ms != now_ms || r.floor_ms != floor_ms {
            return None;
        }
        // A fixed node has one lane (set by the issue `repeat` records).
        let last = self.lanes.first_mut()?;
        if *last & self.layout.seq_mask == self.layout.seq_mask {
            // The unit is full: the next ID borrows the next unit, which the plan checks.
            return None;
        }
        // The seq field has room: the index and the field go up by one, without a carry.
        *last += 1;
        r.uid += 1 << self.layout.seq_shift;
        self.stats.generated = self.stats.generated.wrapping_add(1);
        Some(r.uid)
    }

    /// Unix ms of the time unit of linear index `l` (a lane's `time << seq_bits | seq`).
    #[inline(always)]
    fn time_ms_of(&self, l: u64) -> u64 {
        // l >> seq_bits <= time_max: the unit's ms is below 2^63 (Layout::new).
        self.layout.epoch_ms + (l >> self.layout.widths.seq) * self.layout.unit.ms()
    }

    /// Where a run of `count` would go, without issuing it.
    #[inline(always)]
    fn plan(&self, slot: u16, now_ms: u64, floor_ms: u64, count: u32) -> Result<Plan, Exhausted> {
        let (node, lane) = self.lane_of(slot);
        let layout = &self.layout;
        let exhausted = Exhausted {
            end_ms: layout.end_ms,
        };
        let unit = layout.unit;
        let now_t = unit.floor_units(now_ms.saturating_sub(layout.epoch_ms));
        let floor_t = unit.ceil_units(floor_ms.saturating_sub(layout.epoch_ms));
        let start_t = now_t.max(floor_t);
        if start_t > layout.time_max {
            return Err(exhausted);
        }
        let seq_bits = layout.widths.seq;
        // start_t <= time_max, so the shift stays below 2^63.
        let clock_l = start_t << seq_bits;
        let last = self.lanes.get(lane).copied().unwrap_or(NONE);
        // last < 2^63 when set, so last + 1 cannot overflow.
        let first = if last == NONE || last < clock_l {
            clock_l
        } else {
            last + 1
        };
        // first < 2^63 and count <= 2^32: no overflow.
        let final_l = first + u64::from(count.max(1)) - 1;
        if final_l >> seq_bits > layout.time_max {
            return Err(exhausted);
        }
        Ok(Plan {
            node,
            lane,
            clock_l,
            first,
            final_l,
        })
    }

    /// Issues a planned run: the lane moves to its end, the counters count it.
    #[inline(always)]
    fn commit(&mut self, p: Plan) -> Run {
        let layout = &self.layout;
        let seq_bits = layout.widths.seq;
        // Units entered because a seq field filled rather than because the clock got there:
        // every unit after the first in the run, and the first one itself when the run starts
        // at its seq 0 only because the previous ID filled the unit before it.
        // That is every unit of the run after the later of the clock's unit and the unit of
        // the lane's previous ID (`first - 1`; `first` is `clock_l` when the clock moved on).
        let final_t = p.final_l >> seq_bits;
        let entered_t = (p.clock_l >> seq_bits).max(p.first.saturating_sub(1) >> seq_bits);
        let borrowed = final_t - entered_t;
        let run = Run {
            first: p.first,
            last: p.final_l,
            node_bits: p.node << layout.node_shift,
            seq_bits,
            seq_mask: layout.seq_mask,
            seq_shift: layout.seq_shift,
            shift_time: layout.time_shift,
            time_ms: self.time_ms_of(p.final_l),
        };
        if let Some(slot) = self.lanes.get_mut(p.lane) {
            *slot = p.final_l;
        }
        // Counters of issued IDs: 2^64 of them cannot be issued, so they never wrap.
        self.stats.generated = self.stats.generated.wrapping_add(p.final_l - p.first + 1);
        self.stats.borrowed_units = self.stats.borrowed_units.wrapping_add(borrowed);
        run
    }

    /// [`issue`](Self::issue) for `target`, hashing it to its slot only in slot mode.
    pub fn issue_for(
        &mut self,
        target: &[u8],
        now_ms: u64,
        floor_ms: u64,
        count: u32,
    ) -> Result<Run, Exhausted> {
        let slot = match self.mode {
            NodeMode::Slot => key_slot(target),
            NodeMode::Fixed(_) => 0,
        };
        self.issue(slot, now_ms, floor_ms, count)
    }

    /// One ID for `target` and the ms time it used.
    #[inline]
    pub fn next(
        &mut self,
        target: &[u8],
        now_ms: u64,
        floor_ms: u64,
    ) -> Result<(u64, u64), Exhausted> {
        self.issue_for(target, now_ms, floor_ms, 1)
            .map(|run| (run.first(), run.time_ms))
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time in ms (proleptic Gregorian, UTC), for messages.
pub fn utc_text(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`, for
/// non-negative day counts.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: u64 = DEFAULT_EPOCH_MS;
    /// 2026-11-22, when these tests were written: the "server clock" of the lifetime checks.
    const NOW: u64 = 1_795_317_698_506;
    /// Baidu UidGenerator's default epoch, 2016-05-20T00:00:00Z.
    const UIDGEN_EPOCH: u64 = 1_463_702_400_000;

    fn layout(w: Widths, epoch: u64, unit: TimeUnit) -> Layout {
        Layout::new(w, epoch, unit).unwrap()
    }

    fn snowflake() -> Layout {
        layout(Widths::SNOWFLAKE, EPOCH, TimeUnit::Ms)
    }

    fn w(time: u32, node: u32, seq: u32) -> Widths {
        Widths { time, node, seq }
    }

    #[test]
    fn utc_text_is_iso_8601() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_text(EPOCH), "2026-01-01T00:00:00Z");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc_text(4_102_444_799_999), "2099-12-31T23:59:59Z");
        assert_eq!(
            utc_text(UIDGEN_EPOCH + (1 << 28) * 1000),
            "2024-11-20T21:24:16Z"
        );
        // the largest Unix ms never panics
        assert!(utc_text(i64::MAX as u64).starts_with("292278994-"));
        let _ = utc_text(u64::MAX);
    }

    #[test]
    fn layout_parse_table() {
        let ok: &[(&str, Option<Widths>)] = &[
            ("auto", None),
            ("AUTO", None),
            (" Auto ", None),
            ("41,10,12", Some(Widths::SNOWFLAKE)),
            (" 41 , 10 , 12 ", Some(Widths::SNOWFLAKE)),
            ("28,22,13", Some(Widths::UIDGENERATOR)),
            ("41,14,8", Some(Widths::CLUSTER)),
            ("63,0,0", Some(w(63, 0, 0))),
            ("1,31,31", Some(w(1, 31, 31))),
            ("01,31,31", Some(w(1, 31, 31))),
        ];
        for (text, want) in ok {
            assert_eq!(
                LayoutSpec::parse(text).map(|s| s.map(|s| s.widths)),
                Ok(*want),
                "{text:?}"
            );
        }
        let bad: &[(&str, LayoutError)] = &[
            ("", LayoutError::Syntax),
            ("41,10", LayoutError::Syntax),
            ("41,10,12,0", LayoutError::Syntax),
            ("41,10,12,", LayoutError::Syntax),
            (",41,10,12", LayoutError::Syntax),
            ("41,,22", LayoutError::Syntax),
            ("+41,10,12", LayoutError::Syntax),
            ("-1,32,32", LayoutError::Syntax),
            ("041,10,12", LayoutError::Syntax),
            ("41;10;12", LayoutError::Syntax),
            ("41 10 12", LayoutError::Syntax),
            ("a,b,c", LayoutError::Syntax),
            ("41,10,1٢", LayoutError::Syntax),
            ("snowflake", LayoutError::Syntax),
            ("twitter2", LayoutError::Syntax),
            ("time:41,node:10,seq:12,x:0", LayoutError::Syntax),
            ("time:41,node:10,seq:", LayoutError::Syntax),
            ("time:41,node:10,sequence:12", LayoutError::Syntax),
            ("time:41,node:10,12", LayoutError::Syntax),
            ("node:10,time:41,seq:12", LayoutError::TimeNotFirst),
            ("seq:12,node:10,time:41", LayoutError::TimeNotFirst),
            ("time:41,node:10,node:12", LayoutError::FieldTwice("node")),
            ("time:41,time:10,seq:12", LayoutError::FieldTwice("time")),
            ("time:40,node:12", LayoutError::Sum(52)),
            ("1,31,32", LayoutError::NoTime),
            ("41,10,14", LayoutError::Sum(65)),
            ("41,10,11", LayoutError::Sum(62)),
            ("99,99,99", LayoutError::Sum(297)),
            ("0,31,32", LayoutError::NoTime),
        ];
        for (text, want) in bad {
            assert_eq!(LayoutSpec::parse(text).as_ref(), Err(want), "{text:?}");
        }
    }

    #[test]
    fn layouts_past_the_largest_unix_ms_are_refused() {
        // 2^63 ms past any epoch overflows; 2^62 ms fits.
        assert!(matches!(
            Layout::new(w(63, 0, 0), 0, TimeUnit::Ms),
            Err(LayoutError::TooWide { .. })
        ));
        assert!(Layout::new(w(62, 0, 1), EPOCH, TimeUnit::Ms).is_ok());
        // In seconds: 2^53 s fits from the default epoch, 2^54 s does not.
        assert!(Layout::new(w(53, 5, 5), EPOCH, TimeUnit::S).is_ok());
        assert!(matches!(
            Layout::new(w(54, 5, 4), EPOCH, TimeUnit::S),
            Err(LayoutError::TooWide { .. })
        ));
        // An epoch so late that even a small field passes 2^63-1 ms.
        assert!(Layout::new(w(41, 10, 12), i64::MAX as u64, TimeUnit::Ms).is_err());
        assert!(Layout::new(w(41, 10, 12), u64::MAX, TimeUnit::Ms).is_err());
        assert_eq!(
            Layout::new(w(41, 10, 11), EPOCH, TimeUnit::Ms),
            Err(LayoutError::Sum(62))
        );
        assert_eq!(
            Layout::new(w(0, 31, 32), EPOCH, TimeUnit::Ms),
            Err(LayoutError::NoTime)
        );
    }

    #[test]
    fn lifetime_table() {
        // Snowflake from 2026: 69 years.
        let l = snowflake();
        assert_eq!(l.end_ms(), EPOCH + (1 << 41));
        assert_eq!(utc_text(l.end_ms()), "2095-09-07T15:47:35Z");
        assert_eq!(l.check_lifetime(NOW), Ok(()));
        // UidGenerator's default layout and epoch ran out on 2024-11-20.
        let old = layout(Widths::UIDGENERATOR, UIDGEN_EPOCH, TimeUnit::S);
        let e = old.check_lifetime(NOW).unwrap_err();
        assert_eq!(
            e,
            LayoutError::RanOut {
                end_ms: UIDGEN_EPOCH + (1 << 28) * 1000
            }
        );
        assert!(e.to_string().contains("2024-11-20"), "{e}");
        // The same widths from 2026-01-01 last until 2034-07-04.
        let l = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S);
        assert_eq!(l.check_lifetime(NOW), Ok(()));
        assert_eq!(utc_text(l.end_ms()), "2034-07-04T21:24:16Z");
        // 35 bits of ms: 397 days. From 2026-01-01 that ends in 2027-02, within a year of NOW.
        let l = layout(w(35, 14, 14), EPOCH, TimeUnit::Ms);
        let e = l.check_lifetime(NOW).unwrap_err();
        assert!(matches!(e, LayoutError::RunsOutSoon { .. }));
        assert!(e.to_string().contains("2027-02-02"), "{e}");
        // ... and fine from an epoch of today.
        assert_eq!(
            layout(w(35, 14, 14), NOW, TimeUnit::Ms).check_lifetime(NOW),
            Ok(())
        );
        // Exactly a year left is enough; a millisecond less is not.
        let l = layout(w(35, 14, 14), NOW, TimeUnit::Ms);
        assert_eq!(l.check_lifetime(l.end_ms() - MIN_LIFETIME_MS), Ok(()));
        assert!(l.check_lifetime(l.end_ms() - MIN_LIFETIME_MS + 1).is_err());
        assert!(matches!(
            l.check_lifetime(l.end_ms()),
            Err(LayoutError::RanOut { .. })
        ));
        // An epoch after the clock is refused.
        assert!(matches!(
            snowflake().check_lifetime(EPOCH - 1),
            Err(LayoutError::EpochAhead { .. })
        ));
    }

    #[test]
    fn node_modes() {
        let sf = snowflake();
        let cl = layout(Widths::CLUSTER, EPOCH, TimeUnit::Ms);
        let ug = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S);
        assert_eq!(sf.node_mode(NodeSpec::Auto, false), Ok(NodeMode::Fixed(0)));
        assert_eq!(
            sf.node_mode(NodeSpec::Auto, true),
            Err(LayoutError::SlotNeedsBits { bits: 10 })
        );
        assert_eq!(cl.node_mode(NodeSpec::Auto, true), Ok(NodeMode::Slot));
        assert_eq!(ug.node_mode(NodeSpec::Auto, true), Ok(NodeMode::Slot));
        assert_eq!(
            sf.node_mode(NodeSpec::Fixed(1023), true),
            Ok(NodeMode::Fixed(1023))
        );
        assert_eq!(
            sf.node_mode(NodeSpec::Fixed(1024), false),
            Err(LayoutError::NodeTooBig {
                node: 1024,
                bits: 10
            })
        );
        let none = layout(w(50, 0, 13), EPOCH, TimeUnit::Ms);
        assert_eq!(
            none.node_mode(NodeSpec::Fixed(0), false),
            Ok(NodeMode::Fixed(0))
        );
        assert!(none.node_mode(NodeSpec::Fixed(1), false).is_err());
        assert!(none.node_mode(NodeSpec::Auto, true).is_err());

        assert_eq!(NodeSpec::parse("auto"), Ok(NodeSpec::Auto));
        assert_eq!(NodeSpec::parse("AUTO"), Ok(NodeSpec::Auto));
        assert_eq!(NodeSpec::parse("0"), Ok(NodeSpec::Fixed(0)));
        assert_eq!(NodeSpec::parse("4194303"), Ok(NodeSpec::Fixed(4_194_303)));
        // Written as UID.DECODE writes a node: no spaces or leading zeros.
        for bad in [
            "",
            "-1",
            "+1",
            "1.0",
            "0x10",
            "one",
            "99999999999999999999",
            "01",
            "00",
            " 5 ",
            "5 ",
            " auto",
        ] {
            assert_eq!(NodeSpec::parse(bad), Err(LayoutError::NodeSyntax), "{bad}");
        }
    }

    /// (time_ms, node, seq) <-> uid for one layout, both ways.
    fn roundtrips(l: &Layout, cases: &[(u64, u64, u64, u64)]) {
        for &(t, n, s, uid) in cases {
            assert_eq!(l.encode(t, n, s), Ok(uid), "encode {t} {n} {s}");
            assert_eq!(
                l.decode(uid),
                UidFields {
                    time_ms: t,
                    node: n,
                    seq: s
                },
                "decode {uid}"
            );
        }
    }

    #[test]
    fn snowflake_encode_decode_table() {
        let l = snowflake();
        let last = EPOCH + (1 << 41) - 1;
        roundtrips(
            &l,
            &[
                (EPOCH, 0, 0, 0),
                (EPOCH, 0, 1, 1),
                (EPOCH, 1, 0, 1 << 12),
                (EPOCH + 1, 0, 0, 1 << 22),
                (EPOCH + 1, 1, 1, (1 << 22) | (1 << 12) | 1),
                (EPOCH, 1023, 4095, (1 << 22) - 1),
                (last, 0, 0, ((1 << 41) - 1) << 22),
                (last, 1023, 4095, i64::MAX as u64),
            ],
        );
        assert_eq!(l.last_ms(), last);
        assert_eq!(
            l.encode(EPOCH - 1, 0, 0),
            Err(FieldError::BeforeEpoch { epoch_ms: EPOCH })
        );
        assert!(matches!(
            l.encode(last + 1, 0, 0),
            Err(FieldError::PastEnd { last_ms, .. }) if last_ms == last
        ));
        assert!(l.encode(u64::MAX, 0, 0).is_err());
        assert_eq!(
            l.encode(EPOCH, 1024, 0),
            Err(FieldError::Node { max: 1023 })
        );
        assert_eq!(l.encode(EPOCH, 0, 4096), Err(FieldError::Seq { max: 4095 }));
        assert_eq!(
            l.encode(EPOCH, u64::MAX, u64::MAX),
            Err(FieldError::Node { max: 1023 })
        );
    }

    #[test]
    fn discord_snowflake_vector() {
        // Discord's documented example: 175928847299117063 is 2016-04-30T11:18:25.796Z
        // (epoch 2015-01-01), worker 1 and process 0 (node 32), increment 7.
        let l = layout(Widths::SNOWFLAKE, 1_420_070_400_000, TimeUnit::Ms);
        roundtrips(&l, &[(1_462_015_105_796, 32, 7, 175_928_847_299_117_063)]);
    }

    #[test]
    fn uidgenerator_encode_decode_table() {
        let l = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S);
        let last = EPOCH + ((1 << 28) - 1) * 1000;
        roundtrips(
            &l,
            &[
                (EPOCH, 0, 0, 0),
                (EPOCH + 1000, 0, 0, 1 << 35),
                (EPOCH + 1000, 5, 17, (1 << 35) | (5 << 13) | 17),
                (EPOCH, (1 << 22) - 1, 8191, (1 << 35) - 1),
                (last, (1 << 22) - 1, 8191, i64::MAX as u64),
            ],
        );
        assert_eq!(
            l.encode(EPOCH + 1500, 0, 0),
            Err(FieldError::NotWholeUnit { unit: TimeUnit::S })
        );
        assert_eq!(
            l.encode(EPOCH + 1, 0, 0),
            Err(FieldError::NotWholeUnit { unit: TimeUnit::S })
        );
        assert!(matches!(
            l.encode(last + 1000, 0, 0),
            Err(FieldError::PastEnd { .. })
        ));
        // inside the last second, but not at its start
        assert_eq!(
            l.encode(last + 1, 0, 0),
            Err(FieldError::NotWholeUnit { unit: TimeUnit::S })
        );
        assert_eq!(
            l.encode(EPOCH, 1 << 22, 0),
            Err(FieldError::Node { max: (1 << 22) - 1 })
        );
        assert_eq!(l.encode(EPOCH, 0, 8192), Err(FieldError::Seq { max: 8191 }));
    }

    #[test]
    fn cluster_encode_decode_table() {
        let l = layout(Widths::CLUSTER, EPOCH, TimeUnit::Ms);
        roundtrips(
            &l,
            &[
                (EPOCH, 16_383, 255, (1 << 22) - 1),
                (EPOCH + 7, 12_182, 3, (7 << 22) | (12_182 << 8) | 3),
                (EPOCH + (1 << 41) - 1, 16_383, 255, i64::MAX as u64),
            ],
        );
        assert_eq!(
            l.encode(EPOCH, 16_384, 0),
            Err(FieldError::Node { max: 16_383 })
        );
        assert_eq!(l.encode(EPOCH, 0, 256), Err(FieldError::Seq { max: 255 }));
    }

    #[test]
    fn edge_layouts_encode_decode() {
        // No node bits, no seq bits, one time bit.
        let l = layout(w(63 - 13, 0, 13), EPOCH, TimeUnit::Ms);
        roundtrips(&l, &[(EPOCH + 3, 0, 5, (3 << 13) | 5)]);
        assert_eq!(l.encode(EPOCH, 1, 0), Err(FieldError::Node { max: 0 }));
        let l = layout(w(53, 10, 0), EPOCH, TimeUnit::Ms);
        roundtrips(&l, &[(EPOCH + 3, 9, 0, (3 << 10) | 9)]);
        assert_eq!(l.encode(EPOCH, 0, 1), Err(FieldError::Seq { max: 0 }));
        let l = layout(w(1, 31, 31), EPOCH, TimeUnit::S);
        roundtrips(
            &l,
            &[
                (EPOCH, 0, 0, 0),
                (EPOCH + 1000, (1 << 31) - 1, (1 << 31) - 1, i64::MAX as u64),
            ],
        );
        assert_eq!(l.end_ms(), EPOCH + 2000);
        // decode ignores bit 63 rather than reading a time past the end
        assert_eq!(l.decode(u64::MAX), l.decode(i64::MAX as u64));
    }

    fn gen_fixed(l: Layout, node: u64) -> UidGenerator {
        UidGenerator::new(l, NodeMode::Fixed(node))
    }

    #[test]
    fn frozen_clock_counts_seq_then_borrows() {
        let mut g = gen_fixed(snowflake(), 5);
        let now = EPOCH + 1_000;
        let mut ids = Vec::new();
        for _ in 0..10_000 {
            ids.push(g.next(b"t", now, 0).unwrap());
        }
        assert!(ids.windows(2).all(|p| p[0].0 < p[1].0));
        let l = snowflake();
        assert_eq!(
            l.decode(ids[0].0),
            UidFields {
                time_ms: now,
                node: 5,
                seq: 0
            }
        );
        assert_eq!(
            l.decode(ids[4095].0),
            UidFields {
                time_ms: now,
                node: 5,
                seq: 4095
            }
        );
        assert_eq!(
            l.decode(ids[4096].0),
            UidFields {
                time_ms: now + 1,
                node: 5,
                seq: 0
            }
        );
        assert_eq!(ids[9_999].1, now + 2, "reported time is the ID's time");
        assert_eq!(
            g.stats(),
            UidStats {
                generated: 10_000,
                borrowed_units: 2
            }
        );
    }

    #[test]
    fn seconds_layout_borrows_the_next_second() {
        let l = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S);
        let mut g = gen_fixed(l, 3);
        let now = EPOCH + 10_500; // 10.5 s after the epoch: unit 10
        let first = g.next(b"t", now, 0).unwrap();
        assert_eq!(
            l.decode(first.0),
            UidFields {
                time_ms: EPOCH + 10_000,
                node: 3,
                seq: 0
            }
        );
        assert_eq!(first.1, EPOCH + 10_000);
        let run = g.issue_for(b"t", now, 0, 8191).unwrap();
        assert_eq!(run.count(), 8191);
        assert_eq!(l.decode(run.uids().last().unwrap()).seq, 8191);
        assert_eq!(g.stats().borrowed_units, 0);
        let next = g.next(b"t", now + 400, 0).unwrap();
        assert_eq!(
            l.decode(next.0),
            UidFields {
                time_ms: EPOCH + 11_000,
                node: 3,
                seq: 0
            }
        );
        assert_eq!(g.stats().borrowed_units, 1);
        // the clock reaching the borrowed second is not a borrow
        let mut g = gen_fixed(l, 3);
        g.issue_for(b"t", now, 0, 8192).unwrap();
        let n = g.next(b"t", EPOCH + 11_000, 0).unwrap();
        assert_eq!(l.decode(n.0).time_ms, EPOCH + 11_000);
        assert_eq!(g.stats().borrowed_units, 0);
    }

    #[test]
    fn clock_thirty_seconds_back_holds_the_last_time() {
        let l = snowflake();
        let mut g = gen_fixed(l, 0);
        let now = EPOCH + 100_000;
        let a = g.next(b"t", now, 0).unwrap();
        let b = g.next(b"t", now - 30_000, 0).unwrap();
        assert!(b.0 > a.0);
        assert_eq!(l.decode(b.0).time_ms, now);
        assert_eq!(l.decode(b.0).seq, 1);
        // 10,000 more while the clock stays behind: increasing, borrowing forward
        let run = g.issue_for(b"t", now - 30_000, 0, 10_000).unwrap();
        assert!(run.first() > b.0);
        let v: Vec<u64> = run.uids().collect();
        assert!(v.windows(2).all(|p| p[0] < p[1]));
        assert_eq!(g.stats().borrowed_units, 2);
        // the clock before the epoch: the epoch acts as a floor
        let mut g = gen_fixed(l, 0);
        let x = g.next(b"t", 0, 0).unwrap();
        assert_eq!(l.decode(x.0).time_ms, EPOCH);
    }

    #[test]
    fn floor_after_restart_starts_above_every_earlier_id() {
        for unit in [TimeUnit::Ms, TimeUnit::S] {
            let l = layout(Widths::SNOWFLAKE, EPOCH, unit);
            let mut old = gen_fixed(l, 1);
            let now = EPOCH + 1_000_000_123;
            let mut last = 0;
            let mut max_time = 0;
            for i in 0..5_000 {
                let (uid, t) = old.next(b"t", now + i / 3, 0).unwrap();
                last = uid;
                max_time = max_time.max(t);
            }
            // The lease is above every reported time; the restarted node's clock is a minute
            // behind. Its first ID lies above the old ones, for any lease above max_time.
            for lease in [
                max_time + 1,
                max_time + 999,
                max_time + 1000,
                max_time + 5000,
            ] {
                let mut new = gen_fixed(l, 1);
                let (uid, t) = new.next(b"t", now - 60_000, lease).unwrap();
                assert!(uid > last, "{unit:?} lease {lease}");
                assert!(t >= lease, "time at or above the floor");
            }
        }
    }

    #[test]
    fn batch_equals_single_calls() {
        for (w, unit) in [
            (Widths::SNOWFLAKE, TimeUnit::Ms),
            (Widths::CLUSTER, TimeUnit::Ms),
            (Widths::UIDGENERATOR, TimeUnit::S),
            (w(55, 8, 0), TimeUnit::Ms),
        ] {
            let l = layout(w, EPOCH, unit);
            let mut a = gen_fixed(l, 7);
            let mut b = gen_fixed(l, 7);
            for (now, n) in [(EPOCH + 5, 10_000u32), (EPOCH + 3, 1), (EPOCH + 9_000, 300)] {
                let run = a.issue_for(b"t", now, 0, n).unwrap();
                let singles: Vec<u64> = (0..n).map(|_| b.next(b"t", now, 0).unwrap().0).collect();
                assert_eq!(run.uids().collect::<Vec<_>>(), singles, "{w} {n}");
                assert_eq!(run.time_ms, l.decode(*singles.last().unwrap()).time_ms);
            }
            assert_eq!(a.stats(), b.stats());
        }
    }

    #[test]
    fn slot_mode_gives_each_slot_its_own_lane() {
        let l = layout(Widths::CLUSTER, EPOCH, TimeUnit::Ms);
        let mut g = UidGenerator::new(l, NodeMode::Slot);
        let now = EPOCH + 42;
        let a = l.decode(g.next(b"{conv:1}", now, 0).unwrap().0);
        let b = l.decode(g.next(b"{conv:2}", now, 0).unwrap().0);
        let a2 = l.decode(g.next(b"{conv:1}x", now, 0).unwrap().0);
        assert_eq!((a.node, a.seq), (u64::from(key_slot(b"conv:1")), 0));
        assert_eq!((b.node, b.seq), (u64::from(key_slot(b"conv:2")), 0));
        assert_eq!((a2.node, a2.seq), (a.node, 1), "same slot, same lane");
        // 256 per ms per slot
        let run = g.issue_for(b"conv:1", now, 0, 300).unwrap();
        assert_eq!(run.time_ms, now + 1);
        // a slot mode with too few node bits is not trusted: it falls back to one lane
        let g = UidGenerator::new(snowflake(), NodeMode::Slot);
        assert_eq!(g.mode(), NodeMode::Fixed(0));
        let g = UidGenerator::new(snowflake(), NodeMode::Fixed(5000));
        assert_eq!(g.mode(), NodeMode::Fixed(5000 & 1023));
    }

    #[test]
    fn exhaustion_is_an_error_and_changes_nothing() {
        let l = layout(w(2, 55, 6), EPOCH, TimeUnit::S); // 4 seconds of 64 IDs
        let mut g = gen_fixed(l, 0);
        let end = l.end_ms();
        assert_eq!(end, EPOCH + 4_000);
        // 4 * 64 IDs fit in all; one more does not
        let run = g.issue_for(b"t", EPOCH, 0, 200).unwrap();
        assert_eq!(run.count(), 200);
        assert_eq!(
            g.issue_for(b"t", EPOCH, 0, 57),
            Err(Exhausted { end_ms: end })
        );
        assert_eq!(
            g.stats().generated,
            200,
            "nothing issued by the refused batch"
        );
        let rest = g.issue_for(b"t", EPOCH, 0, 56).unwrap();
        assert_eq!(rest.uids().last(), Some((3 << 61) | 63));
        assert!(g.next(b"t", EPOCH, 0).is_err());
        // a clock or floor past the end
        let mut g = gen_fixed(l, 0);
        assert!(g.next(b"t", end, 0).is_err());
        assert!(g.next(b"t", EPOCH, end).is_err());
        assert!(g.next(b"t", u64::MAX, u64::MAX).is_err());
        assert!(g.next(b"t", end - 1, 0).is_ok());
        let e = Exhausted { end_ms: end }.to_string();
        assert!(e.contains("2026-01-01T00:00:04Z"), "{e}");
    }

    fn named_layout(name: &str) -> Layout {
        LayoutSpec::parse(name)
            .unwrap()
            .unwrap()
            .resolve(None, None)
            .unwrap()
    }

    /// Every named layout: its first ID, its last positive one, the end date, and the lifetime
    /// check against the day these tests were written.
    #[test]
    fn named_layouts_edge_table() {
        let max = i64::MAX as u64;
        // name, epoch, unit ms, usable time bits, node max, seq max, end (UTC), lifetime ok
        type Row = (&'static str, u64, u64, u32, u64, u64, &'static str, bool);
        let table: &[Row] = &[
            (
                "twitter",
                1_288_834_974_657,
                1,
                41,
                1023,
                4095,
                "2080-07-10T17:30:30Z",
                true,
            ),
            (
                "discord",
                1_420_070_400_000,
                1,
                41,
                1023,
                4095,
                "2084-09-06T15:47:35Z",
                true,
            ),
            (
                "instagram",
                1_314_220_021_721,
                1,
                40,
                8191,
                1023,
                "2046-06-27T17:00:49Z",
                true,
            ),
            (
                "sonyflake",
                1_409_529_600_000,
                10,
                39,
                65_535,
                255,
                "2188-11-16T03:28:58Z",
                true,
            ),
            (
                "sonyflake-v2",
                1_735_689_600_000,
                10,
                39,
                65_535,
                255,
                "2199-03-19T03:28:58Z",
                true,
            ),
            (
                "uidgenerator",
                UIDGEN_EPOCH,
                1000,
                28,
                (1 << 22) - 1,
                8191,
                "2024-11-20T21:24:16Z",
                false,
            ),
            (
                "mastodon",
                0,
                1,
                47,
                0,
                65_535,
                "6429-10-17T02:45:55Z",
                true,
            ),
        ];
        for &(name, epoch, unit, bits, node_max, seq_max, end, alive) in table {
            let l = named_layout(name);
            assert_eq!(
                LayoutSpec::parse(&name.to_uppercase())
                    .unwrap()
                    .unwrap()
                    .name,
                Some(name)
            );
            assert_eq!((l.epoch_ms(), l.unit().ms()), (epoch, unit), "{name}");
            assert_eq!((l.node_max(), l.seq_max()), (node_max, seq_max), "{name}");
            assert_eq!(l.time_max(), (1 << bits) - 1, "{name}");
            assert_eq!(l.end_ms(), epoch + (1u64 << bits) * unit, "{name}");
            assert_eq!(utc_text(l.end_ms()), end, "{name}");
            let last = l.last_ms();
            assert_eq!(last, epoch + ((1u64 << bits) - 1) * unit, "{name}");
            // the epoch's first ID is 0, the last unit's last ID is 2^63-1
            assert_eq!(l.encode(epoch, 0, 0), Ok(0), "{name}");
            assert_eq!(l.encode(last, node_max, seq_max), Ok(max), "{name}");
            assert_eq!(
                l.decode(0),
                UidFields {
                    time_ms: epoch,
                    node: 0,
                    seq: 0
                }
            );
            assert_eq!(
                l.decode(max),
                UidFields {
                    time_ms: last,
                    node: node_max,
                    seq: seq_max
                }
            );
            // one unit more would set bit 63 (the sign bit: Discord's, Instagram's and
            // Mastodon's top time bit), and is refused
            assert!(
                matches!(l.encode(last + unit, 0, 0), Err(FieldError::PastEnd { .. })),
                "{name}"
            );
            assert_eq!(
                l.encode(epoch - epoch.min(1), 0, 0).is_err(),
                epoch > 0,
                "{name}"
            );
            if unit > 1 {
                assert_eq!(
                    l.encode(epoch + 1, 0, 0),
                    Err(FieldError::NotWholeUnit { unit: l.unit() })
                );
            }
            assert_eq!(
                l.encode(epoch, node_max + 1, 0),
                Err(FieldError::Node { max: node_max })
            );
            assert_eq!(
                l.encode(epoch, 0, seq_max + 1),
                Err(FieldError::Seq { max: seq_max })
            );
            assert_eq!(l.check_lifetime(NOW).is_ok(), alive, "{name}");
        }
        // UidGenerator's default ran out, and the error says when
        let e = named_layout("uidgenerator")
            .check_lifetime(NOW)
            .unwrap_err();
        assert!(e.to_string().contains("ended on 2024-11-20"), "{e}");
    }

    #[test]
    fn named_layouts_put_each_field_in_its_place() {
        // one unit, node 1, seq 1 in each layout: where the bits land
        let cases: &[(&str, u64)] = &[
            ("twitter", (1 << 22) | (1 << 12) | 1),
            ("discord", (1 << 22) | (1 << 12) | 1),
            ("instagram", (1 << 23) | (1 << 10) | 1),
            // Sonyflake: time | seq (8) | machine (16)
            ("sonyflake", (1 << 24) | (1 << 16) | 1),
            ("sonyflake-v2", (1 << 24) | (1 << 16) | 1),
            ("uidgenerator", (1 << 35) | (1 << 13) | 1),
        ];
        for &(name, uid) in cases {
            let l = named_layout(name);
            let t = l.epoch_ms() + l.unit().ms();
            assert_eq!(l.encode(t, 1, 1), Ok(uid), "{name}");
            assert_eq!(
                l.decode(uid),
                UidFields {
                    time_ms: t,
                    node: 1,
                    seq: 1
                },
                "{name}"
            );
        }
        let m = named_layout("mastodon");
        assert_eq!(m.encode(1, 0, 1), Ok((1 << 16) | 1));
        assert_eq!(m.encode(0, 1, 0), Err(FieldError::Node { max: 0 }));
        // Discord's documented example, now under its own name
        assert_eq!(
            named_layout("discord").decode(175_928_847_299_117_063),
            UidFields {
                time_ms: 1_462_015_105_796,
                node: 32,
                seq: 7
            }
        );
        assert_eq!(
            named_layout("sonyflake").order().fields(),
            [Field::Time, Field::Seq, Field::Node]
        );
        assert_eq!(
            named_layout("sonyflake").spec_text(),
            "time:39,seq:8,node:16"
        );
        assert_eq!(named_layout("twitter").spec_text(), "41,10,12");
    }

    #[test]
    fn explicit_epoch_and_unit_override_a_name() {
        let spec = LayoutSpec::parse("uidgenerator").unwrap().unwrap();
        let l = spec.resolve(Some(EPOCH), None).unwrap();
        assert_eq!((l.epoch_ms(), l.unit()), (EPOCH, TimeUnit::S));
        assert_eq!(l.check_lifetime(NOW), Ok(()));
        let l = spec.resolve(None, Some(TimeUnit::Ms)).unwrap();
        assert_eq!((l.epoch_ms(), l.unit()), (UIDGEN_EPOCH, TimeUnit::Ms));
        // widths without a name: 2026-01-01 and ms unless given
        let spec = LayoutSpec::parse("time:39,seq:8,node:16").unwrap().unwrap();
        assert_eq!((spec.order, spec.name), (Order::SeqNode, None));
        let l = spec.resolve(None, None).unwrap();
        assert_eq!((l.epoch_ms(), l.unit()), (EPOCH, TimeUnit::Ms));
        assert_eq!(
            spec.resolve(Some(1_409_529_600_000), Some(TimeUnit::TEN_MS))
                .unwrap(),
            named_layout("sonyflake")
        );
        // named fields in Snowflake's order equal the three-number form; a missing field has 0 bits
        assert_eq!(
            LayoutSpec::parse("time:41, node:10, seq:12").unwrap(),
            LayoutSpec::parse("41,10,12").unwrap()
        );
        assert_eq!(
            LayoutSpec::parse("TIME:48,SEQ:16")
                .unwrap()
                .map(|s| (s.widths, s.order)),
            Some((w(48, 0, 16), Order::NodeSeq))
        );
        // 64-bit explicit widths: the time field's top bit stays 0
        let l = LayoutSpec::parse("42,10,12")
            .unwrap()
            .unwrap()
            .resolve(None, None)
            .unwrap();
        assert_eq!(l.time_max(), (1 << 41) - 1);
    }

    #[test]
    fn time_unit_parse_table() {
        for (text, ms) in [
            ("ms", 1),
            ("1ms", 1),
            ("10ms", 10),
            ("s", 1000),
            ("1s", 1000),
            ("2s", 2000),
            ("1000ms", 1000),
            ("86400s", 86_400_000),
            ("86400000ms", 86_400_000),
            ("MS", 1),
            ("10Ms", 10),
            ("S", 1000),
        ] {
            assert_eq!(TimeUnit::parse(text).map(TimeUnit::ms), Ok(ms), "{text:?}");
        }
        for bad in [
            "",
            "0ms",
            "0s",
            "010ms",
            "-1ms",
            "+1s",
            "1.5s",
            "us",
            "m",
            "10 ms",
            " 10ms",
            "s ",
            "86401s",
            "99999999999s",
            "auto",
        ] {
            assert_eq!(
                TimeUnit::parse(bad),
                Err(LayoutError::UnitSyntax),
                "{bad:?}"
            );
        }
        assert_eq!(parse_unit("AUTO"), Ok(None));
        assert_eq!(parse_unit("10ms"), Ok(Some(TimeUnit::TEN_MS)));
        for (ms, text) in [
            (1, "ms"),
            (10, "10ms"),
            (1000, "s"),
            (2000, "2s"),
            (1500, "1500ms"),
        ] {
            assert_eq!(TimeUnit::of_ms(ms).unwrap().to_string(), text);
        }
        assert_eq!(parse_epoch("auto"), Ok(None));
        assert_eq!(parse_epoch("0"), Ok(Some(0)));
        assert_eq!(parse_epoch("1420070400000"), Ok(Some(1_420_070_400_000)));
        assert_eq!(
            parse_epoch("9223372036854775807"),
            Ok(Some(i64::MAX as u64))
        );
        for bad in [
            "",
            "-1",
            "+1",
            "01",
            "1e3",
            "9223372036854775808",
            "now",
            " 5",
            "5 ",
        ] {
            assert_eq!(parse_epoch(bad), Err(LayoutError::EpochSyntax), "{bad:?}");
        }
    }

    #[test]
    fn sonyflake_borrows_the_next_ten_ms_after_256_ids() {
        let l = named_layout("sonyflake");
        let mut g = gen_fixed(l, 0xBEEF);
        let now = l.epoch_ms() + 12_345_678_905; // 5 ms into a unit
        let unit0 = now - 5;
        let run = g.issue_for(b"t", now, 0, 1000).unwrap();
        let ids: Vec<u64> = run.uids().collect();
        assert!(ids.windows(2).all(|p| p[0] < p[1]));
        for (i, &uid) in ids.iter().enumerate() {
            let i = i as u64;
            assert_eq!(
                l.decode(uid),
                UidFields {
                    time_ms: unit0 + i / 256 * 10,
                    node: 0xBEEF,
                    seq: i % 256
                },
                "{i}"
            );
        }
        assert_eq!(run.time_ms, unit0 + 30, "four units: 1000 = 3 x 256 + 232");
        assert_eq!(g.stats().borrowed_units, 3);
        // singles equal the batch, and the clock 30 s behind holds the time
        let mut a = gen_fixed(l, 7);
        let mut b = gen_fixed(l, 7);
        let batch: Vec<u64> = a.issue_for(b"t", now, 0, 600).unwrap().uids().collect();
        let singles: Vec<u64> = (0..600).map(|_| b.next(b"t", now, 0).unwrap().0).collect();
        assert_eq!(batch, singles);
        let back = b.next(b"t", now - 30_000, 0).unwrap();
        assert!(back.0 > *singles.last().unwrap());
        assert_eq!(
            l.decode(back.0),
            UidFields {
                time_ms: unit0 + 20,
                node: 7,
                seq: 600 - 512
            }
        );
        // a restart with a floor above every reported time starts above every earlier ID
        for lease in [back.1 + 1, back.1 + 9, back.1 + 10, back.1 + 5_000] {
            let mut new = gen_fixed(l, 7);
            let (uid, t) = new.next(b"t", now - 60_000, lease).unwrap();
            assert!(uid > back.0, "lease {lease}");
            assert!(t >= lease);
        }
    }

    #[test]
    fn sonyflake_in_slot_mode_puts_the_slot_in_the_machine_field() {
        let l = named_layout("sonyflake");
        assert_eq!(l.node_mode(NodeSpec::Auto, true), Ok(NodeMode::Slot));
        assert_eq!(
            named_layout("twitter").node_mode(NodeSpec::Auto, true),
            Err(LayoutError::SlotNeedsBits { bits: 10 })
        );
        let e = LayoutError::SlotNeedsBits { bits: 13 }.to_string();
        assert!(
            e.contains("set imid.uid-node to this node's worker number (0..8191)"),
            "{e}"
        );
        let mut g = UidGenerator::new(l, NodeMode::Slot);
        let now = l.epoch_ms() + 1_000_000;
        let a = l.decode(g.next(b"{conv:1}", now, 0).unwrap().0);
        let b = l.decode(g.next(b"{conv:1}x", now, 0).unwrap().0);
        assert_eq!((a.node, a.seq), (u64::from(key_slot(b"conv:1")), 0));
        assert_eq!((b.node, b.seq), (a.node, 1));
    }

    #[test]
    fn borrowing_past_the_lead_is_refused_and_issues_nothing() {
        // One ID per second (0 seq bits): every ID borrows a whole second.
        let l = layout(w(53, 10, 0), EPOCH, TimeUnit::S);
        let mut g = gen_fixed(l, 3);
        let now = EPOCH + 1_000_500;
        // from the clock's second through 10 s later: 11 IDs
        let run = g.issue_bounded(0, now, 0, 11).unwrap();
        assert_eq!(run.time_ms, EPOCH + 1_010_000);
        let e = g.issue_bounded(0, now, 0, 1).unwrap_err();
        let IssueError::TooFast(t) = e else {
            panic!("{e:?}")
        };
        assert_eq!(
            (t.ahead_ms, t.wait_ms, t.per_unit, t.per_run),
            (10_500, 500, 1, 11)
        );
        assert_eq!(
            e.to_string(),
            "UID rate exceeded: imid.uid-layout 53,10,0 in s holds 1 UIDs per s per lane, and UID.GEN may borrow at most 10000 ms ahead of the clock; this run would end 10500 ms ahead, so nothing was issued: retry in 500 ms"
        );
        assert_eq!(g.stats().generated, 11, "nothing issued");
        // after the wait it goes through, continuing the lane
        let next = g.issue_bounded(0, now + 500, 0, 1).unwrap();
        assert_eq!(next.time_ms, EPOCH + 1_011_000);
        assert_eq!(next.first(), l.encode(EPOCH + 1_011_000, 3, 0).unwrap());
        // a COUNT that can never fit says so
        let e = g.issue_bounded(0, now + 60_000, 0, 10_000).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("COUNT 10000 never fits (at most 11 per call)"),
            "{e}"
        );
        assert_eq!(g.stats().generated, 12);
        // the bound counts from the floor when it is ahead of the clock
        let mut g = gen_fixed(l, 3);
        let floor = EPOCH + 1_030_000;
        let run = g.issue_bounded(0, now, floor, 11).unwrap();
        assert_eq!(run.time_ms, EPOCH + 1_040_000);
        assert!(matches!(
            g.issue_bounded(0, now, floor, 1),
            Err(IssueError::TooFast(_))
        ));
        // exhaustion is still reported as such
        let mut g = gen_fixed(l, 3);
        assert_eq!(
            g.issue_bounded(0, l.end_ms(), 0, 1),
            Err(IssueError::Exhausted(Exhausted { end_ms: l.end_ms() }))
        );
    }

    #[test]
    fn a_clock_stepping_back_does_not_stall_the_bound() {
        let l = layout(Widths::UIDGENERATOR, EPOCH, TimeUnit::S); // 8192 per second
        let mut g = gen_fixed(l, 0);
        let now = EPOCH + 100_000;
        let before = g.issue_bounded(0, now, 0, 3000).unwrap();
        // the clock jumps 30 s back: IDs hold at the last second and count up, as before
        let after = g.issue_bounded(0, now - 30_000, 0, 10_000).unwrap();
        assert!(after.first() > before.first());
        assert_eq!(
            after.time_ms,
            EPOCH + 101_000,
            "borrowed one second past the last"
        );
        // and still no further than the bound past the latest reading
        for _ in 0..9 {
            g.issue_bounded(0, now - 30_000, 0, 8192).unwrap();
        }
        assert!(matches!(
            g.issue_bounded(0, now - 30_000, 0, 8192),
            Err(IssueError::TooFast(_))
        ));
    }

    #[test]
    fn issue_one_takes_the_next_id_of_the_same_unit_only() {
        let l = snowflake();
        let mut g = gen_fixed(l, 5);
        let now = EPOCH + 1_000;
        // Nothing to repeat before a planned issue.
        assert_eq!(g.issue_one(now, 0), None);
        let first = g.issue_bounded(0, now, 0, 1).unwrap().first();
        // Same clock reading and floor: the next seq, without planning.
        assert_eq!(g.issue_one(now, 0), Some(first + 1));
        assert_eq!(l.decode(first + 1).seq, 1);
        // Another clock reading, or another floor: the caller must plan.
        assert_eq!(g.issue_one(now + 1, 0), None);
        assert_eq!(g.issue_one(now, 1), None);
        // A full unit: the next ID borrows, which only the plan may decide.
        let rest = g.issue_bounded(0, now, 0, 4094).unwrap();
        assert_eq!(l.decode(rest.uids().last().unwrap()).seq, 4095);
        assert_eq!(g.issue_one(now, 0), None);
        // An unbounded issue records nothing to repeat.
        g.issue(0, now, 0, 1).unwrap();
        assert_eq!(g.issue_one(now, 0), None);
        // Slot mode has a lane per slot: never repeated.
        let c = Layout::new(Widths::CLUSTER, EPOCH, TimeUnit::Ms).unwrap();
        let mut s = UidGenerator::new(c, NodeMode::Slot);
        s.issue_bounded(7, now, 0, 1).unwrap();
        assert_eq!(s.issue_one(now, 0), None);
    }

    #[test]
    fn usual_layouts_take_a_full_count_within_the_lead() {
        for (wd, unit) in [
            (Widths::SNOWFLAKE, TimeUnit::Ms),
            (Widths::CLUSTER, TimeUnit::Ms),
            (Widths::UIDGENERATOR, TimeUnit::S),
            (w(43, 10, 10), TimeUnit::S),
            (w(53, 10, 0), TimeUnit::Ms),
        ] {
            let l = layout(wd, EPOCH, unit);
            let mut g = gen_fixed(l, 0);
            let now = EPOCH + 777;
            let run = g.issue_bounded(0, now, 0, MAX_COUNT).unwrap();
            assert!(run.time_ms <= now + UID_MAX_LEAD_MS, "{wd} {unit:?}");
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn any_layout() -> impl Strategy<Value = Layout> {
            (
                1u32..=64,
                0u32..=62,
                0u64..=2_000_000_000_000,
                prop_oneof![Just(1u64), Just(10), Just(1000), 1u64..=MAX_UNIT_MS],
                prop::bool::ANY,
                prop::bool::ANY,
            )
                .prop_filter_map(
                    "a valid layout",
                    |(time, node, epoch, unit, wide, seq_first)| {
                        let sum = if wide { 64 } else { 63 };
                        let time = time.min(sum);
                        let node = node.min(sum - time);
                        let widths = Widths {
                            time,
                            node,
                            seq: sum - time - node,
                        };
                        let order = if seq_first {
                            Order::SeqNode
                        } else {
                            Order::NodeSeq
                        };
                        Layout::with_order(widths, order, epoch, TimeUnit::of_ms(unit)?).ok()
                    },
                )
        }

        /// A clock step: how far the clock moves (it may go back), a floor raise, a count.
        fn steps() -> impl Strategy<Value = Vec<(i64, u64, u32)>> {
            proptest::collection::vec(
                (
                    -40_000i64..40_000,
                    prop_oneof![9 => Just(0u64), 1 => 0u64..100_000],
                    1u32..600,
                ),
                1..60,
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2_000))]

            #[test]
            fn encode_decode_round_trip(l in any_layout(), t in any::<u64>(), n in any::<u64>(), s in any::<u64>()) {
                let units = (l.end_ms() - l.epoch_ms()) / l.unit().ms();
                let time_ms = l.epoch_ms() + (t % units) * l.unit().ms();
                let node = n & l.node_max();
                let seq = s & l.seq_max();
                let uid = l.encode(time_ms, node, seq).unwrap();
                prop_assert!(uid <= i64::MAX as u64);
                prop_assert_eq!(l.decode(uid), UidFields { time_ms, node, seq });
                // every uid decodes, and re-encodes to itself
                let f = l.decode(s >> 1);
                prop_assert_eq!(l.encode(f.time_ms, f.node, f.seq), Ok(s >> 1));
            }

            #[test]
            fn strictly_increasing_under_any_clock(l in any_layout(), start in 0u64..4_000_000_000_000, steps in steps(), node in any::<u64>()) {
                let mut g = UidGenerator::new(l, NodeMode::Fixed(node & l.node_max()));
                let mut now = start;
                let mut floor = 0u64;
                let mut prev: Option<u64> = None;
                let mut max_time = 0;
                for (dt, raise, count) in steps {
                    now = now.saturating_add_signed(dt);
                    floor = floor.max(now.saturating_add(raise).saturating_sub(50_000));
                    match g.issue_for(b"t", now, floor, count) {
                        Ok(run) => {
                            prop_assert_eq!(run.count(), u64::from(count));
                            for uid in run.uids() {
                                prop_assert!(uid <= i64::MAX as u64);
                                if let Some(p) = prev { prop_assert!(uid > p, "{} after {}", uid, p); }
                                let f = l.decode(uid);
                                prop_assert!(f.time_ms <= run.time_ms);
                                // time at or above the floor (the epoch counts as one)
                                let floor_units = floor.saturating_sub(l.epoch_ms()).div_ceil(l.unit().ms());
                                prop_assert!((f.time_ms - l.epoch_ms()) / l.unit().ms() >= floor_units.min(l.time_max()));
                                prev = Some(uid);
                            }
                            max_time = max_time.max(run.time_ms);
                        }
                        Err(Exhausted { end_ms }) => prop_assert_eq!(end_ms, l.end_ms()),
                    }
                }
                // A restart whose floor is any lease above the reported times, with any clock,
                // starts above everything issued.
                if let Some(p) = prev {
                    let mut new = UidGenerator::new(l, g.mode());
                    if let Ok((uid, _)) = new.next(b"t", start / 2, max_time + 1) {
                        prop_assert!(uid > p);
                    }
                }
            }

            /// `issue_one`, where it answers, issues exactly what `issue_bounded(.., 1)` would:
            /// one generator takes every single ID through it (falling back as the node does),
            /// a twin plans every ID; their IDs, errors and counters agree, under clocks that
            /// mostly stand still (so the shortcut is taken), step, jump back, and floor raises.
            #[test]
            fn issue_one_is_issue_bounded_of_one(
                l in any_layout(),
                start in 0u64..4_000_000_000_000,
                node in any::<u64>(),
                steps in proptest::collection::vec(
                    (
                        prop_oneof![6 => Just(0i64), 3 => 1i64..3, 1 => -40_000i64..40_000],
                        prop_oneof![19 => Just(0u64), 1 => 0u64..100_000],
                        prop_oneof![9 => Just(1u32), 1 => 1u32..600],
                    ),
                    1..300,
                ),
            ) {
                let mode = NodeMode::Fixed(node & l.node_max());
                let (mut fast, mut twin) = (UidGenerator::new(l, mode), UidGenerator::new(l, mode));
                let mut now = start;
                let mut floor = 0u64;
                for (dt, raise, count) in steps {
                    now = now.saturating_add_signed(dt);
                    floor = floor.max(now.saturating_add(raise).saturating_sub(50_000));
                    let want = twin.issue_bounded(0, now, floor, count).map(|r| r.first());
                    let shortcut = if count == 1 { fast.issue_one(now, floor) } else { None };
                    let got = match shortcut {
                        Some(uid) => Ok(uid),
                        None => fast.issue_bounded(0, now, floor, count).map(|r| r.first()),
                    };
                    prop_assert_eq!(got, want);
                    prop_assert_eq!(fast.stats(), twin.stats());
                }
            }

            #[test]
            fn slot_lanes_increase_and_never_collide(steps in steps(), targets in proptest::collection::vec("[a-z{}]{0,6}", 1..8)) {
                let l = Layout::new(Widths::CLUSTER, EPOCH, TimeUnit::Ms).unwrap();
                let mut g = UidGenerator::new(l, NodeMode::Slot);
                let mut now = EPOCH + 1_000_000;
                let mut seen = std::collections::HashSet::new();
                let mut last_per_slot = std::collections::HashMap::new();
                for (i, (dt, _, count)) in steps.into_iter().enumerate() {
                    now = now.saturating_add_signed(dt);
                    let t = targets[i % targets.len()].as_bytes();
                    let run = g.issue_for(t, now, 0, count).unwrap();
                    for uid in run.uids() {
                        prop_assert!(seen.insert(uid));
                        let f = l.decode(uid);
                        prop_assert_eq!(f.node, u64::from(key_slot(t)));
                        if let Some(p) = last_per_slot.insert(f.node, uid) { prop_assert!(uid > p); }
                    }
                }
            }

            #[test]
            fn never_panics(time in 0u32..80, node in 0u32..80, seq in 0u32..80, epoch in any::<u64>(),
                            secs in prop::bool::ANY, nodeval in any::<u64>(), slot_mode in prop::bool::ANY,
                            calls in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u32>(), any::<Vec<u8>>()), 1..20),
                            text in ".{0,20}") {
                let _ = LayoutSpec::parse(&text);
                let _ = TimeUnit::parse(&text);
                let _ = parse_epoch(&text);
                let _ = NodeSpec::parse(&text);
                let unit = if secs { TimeUnit::S } else { TimeUnit::Ms };
                let w = Widths { time, node, seq };
                if let Ok(l) = Layout::new(w, epoch, unit) {
                    let _ = l.check_lifetime(nodeval);
                    let _ = l.node_mode(NodeSpec::Fixed(nodeval), slot_mode);
                    let _ = l.encode(nodeval, nodeval, nodeval);
                    let _ = l.decode(nodeval);
                    let mode = if slot_mode { NodeMode::Slot } else { NodeMode::Fixed(nodeval) };
                    let mut g = UidGenerator::new(l, mode);
                    for (now, floor, count, target) in calls {
                        if let Ok(run) = g.issue_for(&target, now, floor, count % (MAX_COUNT + 1)) {
                            let _ = run.uids().take(3).count();
                        }
                    }
                }
            }
        }
    }
}
