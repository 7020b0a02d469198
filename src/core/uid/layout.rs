//! The UID layout: three fields, their order and widths, an epoch and a time unit; the named
//! layouts of other generators; parsing the configs' text; encoding and decoding with range
//! checks.

use super::*;
use std::fmt;

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

    pub(super) const fn sum(&self) -> u32 {
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
    pub(super) ms: u64,
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
    pub(super) fn floor_units(self, ms: u64) -> u64 {
        if self.ms == 1 {
            ms
        } else {
            ms / self.ms
        }
    }

    /// Units in `ms`, rounded up.
    #[inline]
    pub(super) fn ceil_units(self, ms: u64) -> u64 {
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

pub(super) const fn named(
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
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let spec = if parts.iter().any(|p| p.contains(':')) {
            LayoutSpec::fields_in_order(&parts)?
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

    /// `time:T,node:N,seq:S` in the order given (`parts` already split at the commas): at most
    /// three fields, each once, time first; a field left out has 0 bits.
    fn fields_in_order(parts: &[&str]) -> Result<LayoutSpec, LayoutError> {
        if parts.len() > 3 {
            return Err(LayoutError::Syntax);
        }
        let mut got: [Option<u32>; 3] = [None; 3];
        let mut order = Vec::with_capacity(3);
        for p in parts {
            let (name, w) = p.split_once(':').ok_or(LayoutError::Syntax)?;
            let (field, slot) = field_and_slot(name.trim())?;
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
        Ok(LayoutSpec {
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
        })
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

/// One width of a layout text: one or two decimal digits.
fn width(p: &str) -> Result<u32, LayoutError> {
    if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(LayoutError::Syntax);
    }
    p.parse().map_err(|_| LayoutError::Syntax)
}

/// A field's name in a layout text (any case), and its slot in `[time, node, seq]`.
fn field_and_slot(name: &str) -> Result<(Field, usize), LayoutError> {
    let field = match name.to_ascii_lowercase().as_str() {
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
    Ok((field, slot))
}

/// The widths' own rules: they sum to 63 or 64, with at least one usable time bit.
pub(super) fn check_widths(w: Widths) -> Result<(), LayoutError> {
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
pub(super) fn names() -> String {
    NAMED.iter().map(|n| n.name).collect::<Vec<_>>().join(", ")
}

/// `2^bits - 1` for `bits` in 0..=63.
pub(super) const fn max_of(bits: u32) -> u64 {
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
///
/// An ID is a positive signed 64-bit integer, most significant bits first:
/// `[0] | time (T bits) | node (N bits) | seq (S bits)`, or with seq above node
/// (`time | seq | node`, Sonyflake's order). The widths sum to 63 (bit 63 stays clear) or to 64
/// (the time field's top bit is bit 63: IDs stay positive as signed 64-bit only while it is 0,
/// so imid uses the time field's lower `T - 1` bits, Discord's and Instagram's rule). The time
/// field counts units (any whole number of ms) since the epoch (Unix ms). Snowflake is
/// `41,10,12` in ms, Baidu's UidGenerator `28,22,13` in seconds, Sonyflake
/// `time:39,seq:8,node:16` in 10 ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub(super) widths: Widths,
    pub(super) order: Order,
    pub(super) epoch_ms: u64,
    pub(super) unit: TimeUnit,
    /// The largest time field value imid issues or reads: `2^T - 1`, or `2^(T-1) - 1` when the
    /// widths sum to 64 (IDs positive as signed 64-bit).
    pub(super) time_max: u64,
    pub(super) node_max: u64,
    pub(super) seq_mask: u64,
    pub(super) time_shift: u32,
    pub(super) node_shift: u32,
    pub(super) seq_shift: u32,
    /// Unix ms of the first time unit past the field: every ID's time is below it.
    pub(super) end_ms: u64,
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
    pub fn encode(&self, time_ms: u64, node: u64, seq: u64) -> Result<u64, UidFieldError> {
        if time_ms < self.epoch_ms {
            return Err(UidFieldError::BeforeEpoch {
                epoch_ms: self.epoch_ms,
            });
        }
        if time_ms >= self.end_ms {
            return Err(UidFieldError::PastEnd {
                last_ms: self.last_ms(),
                end_ms: self.end_ms,
            });
        }
        let since = time_ms - self.epoch_ms;
        if !since.is_multiple_of(self.unit.ms()) {
            return Err(UidFieldError::NotWholeUnit { unit: self.unit });
        }
        if node > self.node_max {
            return Err(UidFieldError::Node { max: self.node_max });
        }
        if seq > self.seq_mask {
            return Err(UidFieldError::Seq { max: self.seq_mask });
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
    pub(super) fn compose(&self, t: u64, node: u64, seq: u64) -> u64 {
        (t << self.time_shift) | (node << self.node_shift) | (seq << self.seq_shift)
    }
}
