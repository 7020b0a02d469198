//! The gap a restart or a promotion applies, as an acknowledger knows it: at least
//! `imid.seq-gap`, raised by the node when its rate needs a larger budget (`SEQ.GAP n`, written
//! to the AOF and the replicas, `node::durable`), lowered again when it does not.
//!
//! Why the budget follows what is acknowledged: a node restarted from files that end at
//! position `x` (or a replica promoted at `x`) skips the gap in force at `x`, the last `SEQ.GAP`
//! at or before it, at least its own `imid.seq-gap`. The files (the replica) hold at least the
//! acknowledged position `D`, maybe more; so what the node may hand out beyond the count at `D`
//! is the smallest gap in force anywhere from `D` on: the one acknowledged, and every one
//! written since ([`Gaps::budget`]). A raise counts once acknowledged; a lowering at once.

use super::marks::Stamped;

/// How many gap records wait for their acknowledgement at most; beyond it the newest is
/// replaced (its later position covers both; the smaller of the two counts until then).
pub const GAPS: usize = 8;

/// The gap records written and not yet acknowledged (each with the position that carries it,
/// once known), and the newest acknowledged one.
#[derive(Debug, Default)]
pub struct Gaps {
    pending: Stamped<GAPS>,
    /// The gap of the newest acknowledged record (0: none, so `imid.seq-gap` alone).
    acked: u64,
}

impl Gaps {
    pub const fn new() -> Gaps {
        Gaps {
            pending: Stamped::new(),
            acked: 0,
        }
    }

    /// A record of `gap` was written in the running call or event; its position is stamped
    /// later.
    pub fn push(&mut self, gap: u64) {
        self.pending.push(gap, u64::min);
    }

    /// Every record written so far lies at or below `pos`.
    pub fn stamp(&mut self, pos: u64) {
        self.pending.stamp(pos);
    }

    /// The acknowledger holds `pos`: the newest record stamped at or below it is in force there.
    pub fn ack(&mut self, pos: u64) {
        let acked = &mut self.acked;
        self.pending.ack(pos, |gap| *acked = gap);
    }

    /// What may be handed out beyond the acknowledged count: the smallest gap in force from the
    /// acknowledged position on, never below `floor` (`imid.seq-gap`, which a restart or a
    /// promotion applies in any case).
    pub fn budget(&self, floor: u64) -> u64 {
        // The gap in force at a position x is max(floor, the last record at or before x), and
        // max(floor, _) keeps order, so the smallest from the acknowledged position on is
        // max(floor, the smallest record among the acknowledged one and those pending).
        let smallest = self.pending.values().fold(self.acked, u64::min);
        smallest.max(floor)
    }

    /// The gap of the newest record, acknowledged or not (0: none).
    pub fn newest(&self) -> u64 {
        self.pending.newest().unwrap_or(self.acked)
    }

    /// Whether a record waits for its acknowledgement, and whether one waits to be stamped.
    pub fn pending(&self) -> (bool, bool) {
        (!self.pending.is_empty(), self.pending.unstamped())
    }

    /// The highest position a record not yet acknowledged was stamped with.
    pub fn highest_target(&self) -> Option<u64> {
        self.pending.highest_target()
    }

    /// The acknowledger starts over (a replica joined): nothing of what it held counts; the
    /// newest record waits again, to be stamped with the next position.
    pub fn restart(&mut self) {
        let top = self.newest();
        self.pending.reset_to(top);
        self.acked = 0;
    }

    pub fn clear(&mut self) {
        self.pending.clear();
        self.acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raise_counts_once_acknowledged_a_lowering_at_once() {
        let mut g = Gaps::new();
        assert_eq!(g.budget(1000), 1000, "no record: the config's gap");
        g.push(8000);
        g.stamp(10);
        assert_eq!(g.budget(1000), 1000, "raised, not acknowledged yet");
        g.ack(9);
        assert_eq!(g.budget(1000), 1000);
        g.ack(10);
        assert_eq!(g.budget(1000), 8000);
        g.push(2000);
        assert_eq!(
            g.budget(1000),
            2000,
            "a lowering counts before it is acknowledged"
        );
        g.stamp(20);
        g.push(16000);
        assert_eq!(
            g.budget(1000),
            2000,
            "the smallest in force from the acknowledged on"
        );
        g.stamp(30);
        g.ack(20);
        assert_eq!(g.budget(1000), 2000);
        g.ack(30);
        assert_eq!(g.budget(1000), 16000);
        assert_eq!(g.budget(50_000), 50_000, "never below the config's gap");
        g.restart();
        assert_eq!(g.budget(1000), 1000, "a new acknowledger holds nothing yet");
        g.stamp(40);
        g.ack(40);
        assert_eq!(g.budget(1000), 16000);
    }

    #[test]
    fn a_full_list_keeps_the_smaller_gap_until_the_newer_position() {
        let mut g = Gaps::new();
        for i in 0..GAPS as u64 {
            g.push(10_000 + i);
        }
        g.push(5_000);
        g.push(20_000);
        assert_eq!(g.budget(1000), 1000, "nothing acknowledged yet");
        g.stamp(7);
        g.ack(7);
        assert_eq!(
            g.budget(1000),
            5_000,
            "the replaced record keeps the smaller gap"
        );
    }
}
