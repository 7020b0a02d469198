//! What one acknowledger holds of the node's hand-outs, by position: the replicas of the term
//! (positions are replication offsets, `Book`), or the node's own AOF (positions are the local
//! gate's sample points, `Local`). The same four things count for both: the budget's samples
//! of the node's count, the targets' gap skips, the two leases' renewals, and the gap records.

use super::{Gaps, Lease, Marks, Ring, Skips};

/// How many recent rounds [`Channel::round_ms`] covers.
const ROUNDS: usize = 16;

/// Samples, skips, lease renewals and gap records waiting for one acknowledger, and what it
/// acknowledged of them.
#[derive(Debug)]
pub struct Channel {
    ring: Ring,
    skips: Skips,
    msgid: Marks,
    uid: Marks,
    gaps: Gaps,
    /// The count of the newest sample acknowledged.
    acked: Option<u64>,
    /// The last rounds' durations (ms): from a sample to its acknowledgement.
    rounds: [u64; ROUNDS],
    round: usize,
}

impl Default for Channel {
    fn default() -> Self {
        Channel::new()
    }
}

impl Channel {
    pub const fn new() -> Channel {
        Channel {
            ring: Ring::new(),
            skips: Skips::new(),
            msgid: Marks::new(),
            uid: Marks::new(),
            gaps: Gaps::new(),
            acked: None,
            rounds: [0; ROUNDS],
            round: 0,
        }
    }

    /// Everything propagated so far, the node's count `advanced` included, lies at or below
    /// `pos` (at `now_ms`, for the rounds' durations).
    pub fn stamp(&mut self, pos: u64, advanced: u64, now_ms: u64) {
        self.msgid.stamp(pos);
        self.uid.stamp(pos);
        self.gaps.stamp(pos);
        self.ring.push_at(pos, advanced, now_ms);
    }

    /// The acknowledger holds `pos` (at `now_ms`): the samples, skips, renewals and gap records
    /// it covers count.
    pub fn ack(&mut self, pos: u64, now_ms: u64) {
        if let Some((c, at)) = self.ring.ack_at(pos) {
            let acked = self.acked.map_or(c, |p| p.max(c));
            self.acked = Some(acked);
            self.skips.ack(acked);
            if let Some(slot) = self.rounds.get_mut(self.round % ROUNDS) {
                *slot = now_ms.saturating_sub(at);
            }
            self.round = self.round.saturating_add(1);
        }
        self.msgid.ack(pos);
        self.uid.ack(pos);
        // MSGID.FLOOR's replay raises a replica's UID floor too (`node::ids`).
        self.uid.raise(self.msgid.acked());
        self.gaps.ack(pos);
    }

    /// The count of the newest sample acknowledged.
    pub fn acked(&self) -> Option<u64> {
        self.acked
    }

    /// The node's count may reach this at once: the acknowledged count plus the budget
    /// ([`Gaps::budget`], at least `gap`); 0 while nothing is acknowledged.
    pub fn limit(&self, gap: u64) -> u64 {
        self.acked
            .map_or(0, |a| a.saturating_add(self.gaps.budget(gap)))
    }

    /// Past this count the budget is due for renewal (half of it used).
    pub fn renew_at(&self, gap: u64) -> u64 {
        self.acked
            .map_or(0, |a| a.saturating_add(self.gaps.budget(gap) / 2))
    }

    /// How long a round takes, as the recent ones took (the longest; `None` before the first).
    pub fn round_ms(&self) -> Option<u64> {
        let n = self.round.min(ROUNDS);
        self.rounds.iter().take(n).copied().max()
    }

    /// Whether a renewal or a gap record waits to be stamped, or a gap record for its
    /// acknowledgement.
    pub fn unstamped(&self) -> bool {
        self.msgid.unstamped() || self.uid.unstamped() || self.gaps.pending().1
    }

    /// Whether a gap record waits for its acknowledgement.
    pub fn gap_pending(&self) -> bool {
        self.gaps.pending().0
    }

    /// Message IDs and UIDs with a time below these may go out at once.
    pub fn ids_acked(&self) -> (u64, u64) {
        (self.msgid.acked(), self.uid.acked())
    }

    /// The highest position something waits to have acknowledged: a sample, a renewal, a gap
    /// record.
    pub fn highest_target(&self) -> Option<u64> {
        [
            self.ring.newest_offset(),
            self.msgid.highest_target(),
            self.uid.highest_target(),
            self.gaps.highest_target(),
        ]
        .into_iter()
        .flatten()
        .max()
    }

    /// Whether a sample newer than the acknowledged one waits.
    pub fn unacked(&self) -> bool {
        !self.ring.is_empty()
    }

    /// A lease renewal to `until` was propagated in the running call.
    pub fn renewed(&mut self, lease: Lease, until: u64) {
        match lease {
            Lease::Msgid => self.msgid.push(until),
            Lease::Uid => self.uid.push(until),
        }
    }

    /// Whether a renewal waits for this acknowledger.
    pub fn renewal_pending(&self) -> bool {
        self.msgid.pending().is_some() || self.uid.pending().is_some()
    }

    /// A gap record of `gap` was propagated in the running call or event.
    pub fn gap_written(&mut self, gap: u64) {
        self.gaps.push(gap);
    }

    /// A call skipped the gap on target `id` and brought the node's count to `count`: charged
    /// to the target until this acknowledger holds that count, or (no id, or too many pending)
    /// to the node as a whole `gap`. The node's count after it.
    pub fn charge_skip(&mut self, id: Option<u64>, count: u64, gap: u64) -> u64 {
        match id {
            Some(id) if self.skips.insert(id, count) => count,
            _ => count.saturating_add(gap),
        }
    }

    /// Whether target `id` has a gap skip this acknowledger has not acknowledged.
    pub fn skip_pending(&self, id: u64) -> bool {
        self.skips.pending(id, self.acked)
    }

    /// How many targets' skips wait for this acknowledger.
    pub fn skips(&self) -> usize {
        self.skips.len()
    }

    /// The acknowledger starts over (a replica joined the term): what was acknowledged was
    /// acknowledged without it, so nothing counts until it acknowledges again. The pending
    /// skips stay (their counts still say what must be acknowledged); the leases' highest
    /// renewal and the newest gap record wait for one round, not for the next renewal.
    pub fn restart(&mut self) {
        self.ring.clear();
        self.msgid.restart();
        self.uid.restart();
        self.gaps.restart();
        self.acked = None;
    }

    /// Everything forgotten (a new term).
    pub fn clear(&mut self) {
        self.restart();
        self.skips.clear();
        self.msgid.clear();
        self.uid.clear();
        self.gaps.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_counts_what_its_acknowledger_holds() {
        let mut c = Channel::new();
        assert_eq!(c.limit(1000), 0, "nothing acknowledged: nothing at once");
        c.stamp(10, 5, 0);
        c.renewed(Lease::Msgid, 5_000);
        c.gap_written(4_000);
        assert!(c.unstamped());
        assert_eq!(c.highest_target(), Some(10));
        c.stamp(20, 7, 3);
        c.ack(10, 4);
        assert_eq!(c.round_ms(), Some(4));
        assert_eq!(c.acked(), Some(5));
        assert_eq!(
            c.limit(1000),
            1005,
            "the renewal and the record came after 10"
        );
        assert_eq!(c.ids_acked(), (0, 0));
        c.ack(20, 13);
        assert_eq!(c.round_ms(), Some(10));
        assert_eq!(c.limit(1000), 4007);
        assert_eq!(c.renew_at(1000), 2007);
        assert_eq!(
            c.ids_acked(),
            (5_000, 5_000),
            "a message-ID renewal raises the UIDs'"
        );
        assert!(!c.unacked());
        assert_eq!(c.charge_skip(Some(3), 9, 1000), 9);
        assert!(c.skip_pending(3));
        c.stamp(30, 9, 20);
        c.ack(30, 21);
        assert!(!c.skip_pending(3));
        c.restart();
        assert_eq!((c.acked(), c.limit(1000)), (None, 0));
    }
}
