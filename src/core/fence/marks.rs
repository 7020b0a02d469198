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
    pending: VecDeque<(u64, Option<u64>)>,
    acked: u64,
}

impl Marks {
    pub const fn new() -> Marks {
        Marks {
            pending: VecDeque::new(),
            acked: 0,
        }
    }

    /// A renewal to `until` was propagated in the running call; its offset is stamped later.
    pub fn push(&mut self, until: u64) {
        if self.pending.len() >= MARKS {
            if let Some(last) = self.pending.back_mut() {
                *last = (until.max(last.0), None);
            }
            return;
        }
        self.pending.push_back((until, None));
    }

    /// Every renewal propagated so far lies at or below `offset`.
    pub fn stamp(&mut self, offset: u64) {
        for (_, at) in self.pending.iter_mut().rev() {
            if at.is_some() {
                break;
            }
            *at = Some(offset);
        }
    }

    /// The replicas acknowledged `offset`: renewals stamped at or below it count.
    pub fn ack(&mut self, offset: u64) {
        while let Some(&(until, Some(at))) = self.pending.front() {
            if at > offset {
                break;
            }
            self.acked = self.acked.max(until);
            self.pending.pop_front();
        }
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
        self.pending.iter().map(|&(u, _)| u).max()
    }

    /// Whether a renewal waits to be stamped.
    pub fn unstamped(&self) -> bool {
        self.pending.iter().any(|&(_, at)| at.is_none())
    }

    /// The highest offset a renewal not yet acknowledged was stamped with.
    pub fn highest_target(&self) -> Option<u64> {
        self.pending.iter().filter_map(|&(_, at)| at).max()
    }

    /// A replica joined: nothing counts as acknowledged until it acknowledges too. The highest
    /// renewal (acknowledged or not) waits again, to be stamped with the next offset (every
    /// renewal was propagated by then).
    pub fn restart(&mut self) {
        let top = self.pending().map_or(self.acked, |p| p.max(self.acked));
        self.pending.clear();
        self.acked = 0;
        if top > 0 {
            self.pending.push_back((top, None));
        }
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
