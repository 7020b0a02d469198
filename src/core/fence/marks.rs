//! Message IDs and UIDs against acknowledged lease renewals: an ID goes out at once only when
//! its time lies below a renewal (`MSGID.FLOOR`, `UID.FLOOR`) the replicas acknowledged, which
//! a promoted replica inherits as its floor.

use std::collections::VecDeque;

/// How many lease renewals wait for their acknowledgement at most; beyond it the newest is
/// replaced by the newer renewal (its later offset covers both).
pub const MARKS: usize = 8;

/// A lease's renewals waiting for the replicas (each with the offset that carries it, once
/// known) and the highest one they acknowledged: IDs with a time below [`Marks::acked`] may be
/// handed out at once.
#[derive(Debug, Default)]
pub struct Marks {
    pending: Stamped<MARKS>,
    acked: u64,
}

impl Marks {
    pub const fn new() -> Marks {
        Marks {
            pending: Stamped::new(),
            acked: 0,
        }
    }

    /// A renewal to `until` was propagated in the running call; its offset is stamped later.
    pub fn push(&mut self, until: u64) {
        self.pending.push(until, u64::max);
    }

    /// Every renewal propagated so far lies at or below `offset`.
    pub fn stamp(&mut self, offset: u64) {
        self.pending.stamp(offset);
    }

    /// The replicas acknowledged `offset`: renewals stamped at or below it count.
    pub fn ack(&mut self, offset: u64) {
        let acked = &mut self.acked;
        self.pending
            .ack(offset, |until| *acked = (*acked).max(until));
    }

    /// A renewal the replicas acknowledged by another way (a message-ID renewal, whose replay
    /// raises the UID floor too).
    pub fn raise(&mut self, until: u64) {
        self.acked = self.acked.max(until);
    }

    /// Every ID with a time below this may be handed out at once.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// The highest renewal not yet acknowledged.
    pub fn pending(&self) -> Option<u64> {
        self.pending.values().max()
    }

    /// Whether a renewal waits to be stamped.
    pub fn unstamped(&self) -> bool {
        self.pending.unstamped()
    }

    /// The highest offset a renewal not yet acknowledged was stamped with.
    pub fn highest_target(&self) -> Option<u64> {
        self.pending.highest_target()
    }

    /// A replica joined: nothing counts as acknowledged until it acknowledges too. The highest
    /// renewal (acknowledged or not) waits again, to be stamped with the next offset (every
    /// renewal was propagated by then).
    pub fn restart(&mut self) {
        let top = self.pending().map_or(self.acked, |p| p.max(self.acked));
        self.pending.reset_to(top);
        self.acked = 0;
    }

    pub fn clear(&mut self) {
        self.pending.clear();
        self.acked = 0;
    }
}

/// Records waiting for an acknowledgement, oldest first, each with the position that carries
/// it once stamped (an offset, or an AOF sample point); at most `N`, beyond which the newest
/// takes the new value in. [`Marks`] keeps its lease renewals in one, `gaps::Gaps` its gap
/// records: they differ only in how two values merge and what an acknowledged one does.
#[derive(Debug, Default)]
pub(super) struct Stamped<const N: usize> {
    records: VecDeque<(u64, Option<u64>)>,
}

impl<const N: usize> Stamped<N> {
    pub(super) const fn new() -> Stamped<N> {
        Stamped {
            records: VecDeque::new(),
        }
    }

    /// `value` was written in the running call or event; its position is stamped later. With
    /// `N` waiting, the newest becomes `merge(value, newest)` instead, unstamped again (its
    /// later position covers both).
    pub(super) fn push(&mut self, value: u64, merge: fn(u64, u64) -> u64) {
        if self.records.len() >= N {
            if let Some(last) = self.records.back_mut() {
                *last = (merge(value, last.0), None);
            }
            return;
        }
        self.records.push_back((value, None));
    }

    /// Every record written so far lies at or below `pos`.
    pub(super) fn stamp(&mut self, pos: u64) {
        for (_, at) in self.records.iter_mut().rev() {
            if at.is_some() {
                break;
            }
            *at = Some(pos);
        }
    }

    /// The acknowledger holds `pos`: takes out the records stamped at or below it, oldest
    /// first, each value handed to `acked`.
    pub(super) fn ack(&mut self, pos: u64, mut acked: impl FnMut(u64)) {
        while let Some(&(value, Some(at))) = self.records.front() {
            if at > pos {
                break;
            }
            acked(value);
            self.records.pop_front();
        }
    }

    /// The values waiting, oldest first.
    pub(super) fn values(&self) -> impl Iterator<Item = u64> + '_ {
        self.records.iter().map(|&(v, _)| v)
    }

    /// The newest value waiting.
    pub(super) fn newest(&self) -> Option<u64> {
        self.records.back().map(|&(v, _)| v)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Whether a record waits to be stamped.
    pub(super) fn unstamped(&self) -> bool {
        self.records.iter().any(|&(_, at)| at.is_none())
    }

    /// The highest position a record waiting was stamped with.
    pub(super) fn highest_target(&self) -> Option<u64> {
        self.records.iter().filter_map(|&(_, at)| at).max()
    }

    /// Nothing waits any more but `top` (unless 0), to be stamped with the next position.
    pub(super) fn reset_to(&mut self, top: u64) {
        self.records.clear();
        if top > 0 {
            self.records.push_back((top, None));
        }
    }

    pub(super) fn clear(&mut self) {
        self.records.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_marks_count_once_acknowledged() {
        let mut m = Marks::default();
        m.push(5_000);
        assert_eq!(m.acked(), 0);
        m.ack(1_000); // not stamped yet: nothing
        assert_eq!(m.acked(), 0);
        m.stamp(100);
        m.push(7_500);
        m.ack(99);
        assert_eq!((m.acked(), m.pending()), (0, Some(7_500)));
        m.ack(100);
        assert_eq!(m.acked(), 5_000, "the second is not stamped yet");
        m.stamp(180);
        m.ack(180);
        assert_eq!((m.acked(), m.pending()), (7_500, None));
        m.raise(6_000); // never back
        assert_eq!(m.acked(), 7_500);
        m.raise(9_000);
        assert_eq!(m.acked(), 9_000);
        // A replica joins: the highest renewal waits for it again, from the next stamp.
        m.push(9_500);
        m.restart();
        assert_eq!((m.acked(), m.pending()), (0, Some(9_500)));
        m.ack(u64::MAX);
        assert_eq!(m.acked(), 0, "not stamped yet");
        m.stamp(300);
        m.ack(300);
        assert_eq!((m.acked(), m.pending()), (9_500, None));
        m.clear();
        assert_eq!(m.acked(), 0);
    }

    #[test]
    fn many_renewals_collapse_into_the_newest() {
        let mut m = Marks::default();
        for i in 0..20 {
            m.push(1_000 + i);
        }
        assert_eq!(m.pending(), Some(1_019));
        m.stamp(50);
        m.ack(50);
        assert_eq!(m.acked(), 1_019);
    }
}
