//! What the UID core refuses, each with the message the config or the command replies: a
//! layout ([`LayoutError`]), a field of UID.ENCODE ([`UidFieldError`]), a time field that has
//! run out ([`UidExhausted`]), a run that would borrow too far ahead of the clock ([`TooFast`]).

use super::*;
use std::fmt;

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
            // A config text that does not parse.
            _ => self.fmt_text_error(f),
        }
    }
}

impl LayoutError {
    /// The message for a config text that does not parse (`Display` writes the layouts that
    /// parse but do not fit the clock or the node).
    fn fmt_text_error(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
            // Display's own arms: not sent here.
            _ => write!(f, "{self:?}"),
        }
    }
}

/// A field of UID.ENCODE out of range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UidFieldError {
    BeforeEpoch { epoch_ms: u64 },
    PastEnd { last_ms: u64, end_ms: u64 },
    NotWholeUnit { unit: TimeUnit },
    Node { max: u64 },
    Seq { max: u64 },
}

impl fmt::Display for UidFieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UidFieldError::BeforeEpoch { epoch_ms } => {
                write!(f, "time_ms must be at or after imid.uid-epoch ({epoch_ms})")
            }
            UidFieldError::PastEnd { last_ms, end_ms } => write!(
                f,
                "time_ms must be at most {last_ms}: the layout's time field ends on {}",
                utc_text(*end_ms)
            ),
            UidFieldError::NotWholeUnit { unit } => match unit.ms() {
                1000 => f.write_str(
                    "time_ms must be imid.uid-epoch plus a whole number of seconds (imid.uid-time-unit)",
                ),
                ms => write!(
                    f,
                    "time_ms must be imid.uid-epoch plus a whole number of {ms} ms units (imid.uid-time-unit {unit})"
                ),
            },
            UidFieldError::Node { max } => write!(f, "node must be an integer in 0..{max}"),
            UidFieldError::Seq { max } => write!(f, "seq must be an integer in 0..{max}"),
        }
    }
}

/// The time field is used up: the layout ran out (or a floor pushed the time past its end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UidExhausted {
    pub end_ms: u64,
}

impl fmt::Display for UidExhausted {
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
    Exhausted(UidExhausted),
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
