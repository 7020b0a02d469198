//! Durable before use, Redis-free (docs/durability.md, "Durable before use"): a value goes out
//! only once the node's own AOF holds it as far as the AOF's setting promises: written out of
//! Redis's AOF buffer (a process crash keeps it), or fsynced (a host crash keeps it too).
//!
//! The node (`node::durable`) takes samples, each with a point: every write propagated before
//! a sample belongs to its point. It takes one only where Redis is sure to write the AOF buffer
//! before the replies of the event loop iteration go out (no background fsync is pending, so
//! the write cannot be postponed), which makes the point written at once. Then it fsyncs the
//! AOF files itself, off the main thread, and a completed fsync makes its point fsynced. The
//! budget's samples, the targets' gap skips, the leases' renewals and the gap records count
//! once fsynced, as they count for the replicas once acknowledged (`core::fence::Channel`).

use super::fence::Channel;

/// How far a write must have reached before its call answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Out of Redis's AOF buffer, in the file: a process crash keeps it.
    Written,
    /// fsynced: a host crash keeps it too.
    Fsynced,
}

/// How far the AOF holds the node's writes, by sample point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Points {
    /// Every write of a point at or below this is written.
    pub written: u64,
    /// Every write of a point at or below this is fsynced.
    pub fsynced: u64,
}

impl Points {
    /// Whether the writes of point `p` have reached `level`.
    pub fn holds(&self, p: u64, level: Level) -> bool {
        match level {
            Level::Written => p <= self.written,
            Level::Fsynced => p <= self.fsynced,
        }
    }
}

/// The node's own AOF as an acknowledger: its samples' points and what they hold.
#[derive(Debug)]
pub struct Local {
    pub channel: Channel,
    points: Points,
    /// The newest sample's point.
    sampled: u64,
    /// The node's count at the newest sample.
    sampled_count: u64,
    /// The fsync in flight: its point, and when it started (ms).
    in_flight: Option<(u64, u64)>,
    /// The last fsyncs' durations (ms), from their start to their completion.
    fsync_ms: [u64; FSYNCS],
    fsyncs: usize,
}

/// How many recent fsyncs [`Local::round_ms`] covers.
const FSYNCS: usize = 16;

impl Default for Local {
    fn default() -> Self {
        Local::new()
    }
}

impl Local {
    pub const fn new() -> Local {
        Local {
            channel: Channel::new(),
            points: Points {
                written: 0,
                fsynced: 0,
            },
            sampled: 0,
            sampled_count: 0,
            in_flight: None,
            fsync_ms: [0; FSYNCS],
            fsyncs: 0,
        }
    }

    /// The point a write propagated from now on belongs to: the next sample's.
    pub fn next_point(&self) -> u64 {
        self.sampled.saturating_add(1)
    }

    pub fn points(&self) -> Points {
        self.points
    }

    /// A sample at a moment (`now_ms`) where everything propagated so far will be written
    /// before this iteration's replies go out: its point (written at once), with the node's
    /// count `advanced`.
    pub fn sample(&mut self, advanced: u64, now_ms: u64) -> u64 {
        let p = self.next_point();
        self.sampled = p;
        self.sampled_count = self.sampled_count.max(advanced);
        self.points.written = p;
        self.channel.stamp(p, advanced, now_ms);
        p
    }

    /// Whether a sample would add something: values past the last sample, or a renewal or a
    /// gap record to stamp.
    pub fn needs_sample(&self, advanced: u64) -> bool {
        advanced > self.sampled_count || self.channel.unstamped()
    }

    /// Whether something written waits to be fsynced.
    pub fn unsynced(&self) -> bool {
        self.points.fsynced < self.points.written
    }

    /// An fsync may start now (`now_ms`) for the newest written point, unless one is in
    /// flight or there is nothing to fsync: the point it covers.
    pub fn start_fsync(&mut self, now_ms: u64) -> Option<u64> {
        if self.in_flight.is_some() || !self.unsynced() {
            return None;
        }
        let p = self.points.written;
        self.in_flight = Some((p, now_ms));
        Some(p)
    }

    /// The fsync of `point` completed at `now_ms` (`ok`), or failed: what it covers counts
    /// once it succeeded.
    pub fn fsync_done(&mut self, point: u64, ok: bool, now_ms: u64) {
        let Some((p, started)) = self.in_flight.filter(|&(p, _)| p == point) else {
            return;
        };
        self.in_flight = None;
        if let Some(slot) = self.fsync_ms.get_mut(self.fsyncs % FSYNCS) {
            *slot = now_ms.saturating_sub(started);
        }
        self.fsyncs = self.fsyncs.saturating_add(1);
        if ok {
            self.points.fsynced = self.points.fsynced.max(p);
            self.channel.ack(p, now_ms);
        }
    }

    /// How long a round of the AOF takes, as the recent fsyncs took (the longest; `None` before
    /// the first): what a call waits for from its sample (taken each iteration) to its fsync.
    pub fn round_ms(&self) -> Option<u64> {
        let n = self.fsyncs.min(FSYNCS);
        self.fsync_ms.iter().take(n).copied().max()
    }

    /// Whether an fsync is in flight.
    pub fn fsyncing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Everything the node's count reached, `advanced`, is known on disk (the AOF fsynced at the
    /// end of a load, or `appendfsync always` until now): a first sample, written and fsynced.
    pub fn start_durable(&mut self, advanced: u64, now_ms: u64) {
        self.reset();
        let p = self.sample(advanced, now_ms);
        self.points.fsynced = p;
        self.channel.ack(p, now_ms);
    }

    /// The node's AOF holds everything again from scratch (a load, a promotion, the gate turned
    /// on): what is on disk now is what a restart reads, so the samples start over with
    /// nothing outstanding.
    pub fn reset(&mut self) {
        self.channel.clear();
        self.points = Points::default();
        self.sampled = 0;
        self.sampled_count = 0;
        self.in_flight = None;
    }
}

/// Rounds shorter than this count as this long: a budget lasting a few ms would make the node
/// fsync hundreds of times a second.
pub const MIN_ROUND_MS: u64 = 25;

/// The gap the node wants in force so that its budget outlasts its slowest acknowledger's
/// round: at `per_s` values a second, with rounds of `round_ms`, four rounds' worth (the
/// budget is renewed at half; twice that for a round slower than the last), never below
/// `floor` (`imid.seq-gap`) nor above `max` (`imid.seq-gap-max`).
pub fn wanted_gap(per_s: u64, round_ms: u64, floor: u64, max: u64) -> u64 {
    let ms = round_ms.max(MIN_ROUND_MS);
    let want = per_s.saturating_mul(ms).saturating_mul(4) / 1000;
    want.max(floor).min(max.max(floor))
}

/// The next gap record, from the gap in force `current` (0: none written, so the config's
/// `floor`) and the wanted one ([`wanted_gap`], four rounds' worth already): a raise at once;
/// a lowering only to half, once the wanted gap has stayed below a quarter long enough
/// (`calm`, the caller's measure), so that a short lull does not shrink the budget a burst
/// then needs. `None`: keep it.
pub fn next_gap(current: u64, wanted: u64, floor: u64, calm: bool) -> Option<u64> {
    let current = current.max(floor);
    if wanted > current {
        return Some(wanted);
    }
    if calm && wanted < current / 4 && current > floor {
        return Some((current / 2).max(floor));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fence::Lease;

    #[test]
    fn a_sample_is_written_at_once_and_fsynced_when_its_fsync_completes() {
        let mut l = Local::new();
        assert_eq!(l.next_point(), 1);
        assert_eq!(l.start_fsync(0), None, "nothing written yet");
        assert!(l.needs_sample(100));
        let p = l.sample(100, 0);
        assert!(!l.needs_sample(100));
        assert_eq!(p, 1);
        assert!(l.points().holds(1, Level::Written));
        assert!(!l.points().holds(1, Level::Fsynced));
        assert_eq!(l.channel.limit(1000), 0, "nothing fsynced: nothing at once");
        l.channel.renewed(Lease::Msgid, 9_000);
        assert!(l.needs_sample(100), "a renewal to stamp");
        let q = l.sample(150, 10);
        assert_eq!(l.start_fsync(11), Some(q));
        assert_eq!(l.start_fsync(11), None, "one in flight");
        l.sample(170, 12);
        l.fsync_done(q, true, 14);
        assert_eq!(l.points().fsynced, q);
        assert_eq!(l.channel.limit(1000), 1150);
        assert_eq!(l.channel.ids_acked().0, 9_000);
        assert_eq!(l.round_ms(), Some(3), "the fsync's own time");
        assert_eq!(l.start_fsync(20), Some(3), "the newest written point");
        l.fsync_done(3, false, 25);
        assert_eq!(l.points().fsynced, q, "a failed fsync counts nothing");
        assert!(l.unsynced());
        l.reset();
        assert_eq!((l.points(), l.next_point()), (Points::default(), 1));
    }

    #[test]
    fn the_wanted_gap_follows_the_rate_within_its_bounds() {
        // 300,000 values/s, 2 ms rounds (counted as 25 ms): 30,000.
        assert_eq!(wanted_gap(300_000, 2, 1000, 1_000_000), 30_000);
        // A slow disk: capped.
        assert_eq!(wanted_gap(300_000, 3_000, 1000, 1_000_000), 1_000_000);
        // Idle: the config's gap.
        assert_eq!(wanted_gap(0, 5, 1000, 1_000_000), 1000);
        // A cap below the config's gap: the config's gap wins.
        assert_eq!(wanted_gap(300_000, 100, 5000, 10), 5000);
        assert_eq!(next_gap(0, 30_000, 1000, false), Some(30_000));
        assert_eq!(next_gap(30_000, 40_000, 1000, false), Some(40_000));
        assert_eq!(next_gap(30_000, 20_000, 1000, false), None);
        assert_eq!(next_gap(30_000, 5_000, 1000, false), None, "not calm yet");
        assert_eq!(next_gap(30_000, 5_000, 1000, true), Some(15_000));
        assert_eq!(
            next_gap(1000, 10, 1000, true),
            None,
            "never below the floor"
        );
    }
}
