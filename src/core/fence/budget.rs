//! Sequence values against the node-wide budget: the node counts every increase of a sequence
//! value it makes (`advanced`) and samples `(offset, advanced)` pairs ([`Ring`]). A call may
//! answer at once while `advanced`, with its own increase, stays at most `imid.seq-gap` above
//! the count of the newest sample the replicas acknowledged ([`within`]). Enough because such a
//! replica holds every key at its value at that sample or later, marked for the gap: promoted,
//! its first NEXT on a key lies `gap + 1` above, past all this node handed out since. A gap
//! skip is charged to its own target ([`Skips`]).

use std::collections::VecDeque;

/// Whether a call that raises sequence values by `increase` may reply at once: `advanced`
/// (the node's count before the call) plus `increase` is at most `gap` above `acked`, the count
/// of the newest acknowledged sample (`None`: nothing acknowledged yet, so nothing may be
/// handed out unacknowledged).
#[inline(always)]
pub fn within(advanced: u64, increase: u64, acked: Option<u64>, gap: u64) -> bool {
    match acked {
        Some(a) => advanced.saturating_add(increase).saturating_sub(a) <= gap,
        None => false,
    }
}

/// How many samples the ring keeps; when full, the newest is replaced (a later sample covers
/// more, so nothing is lost but granularity).
pub const RING: usize = 64;

/// `(offset, advanced, ms)` samples not yet acknowledged, oldest first (`ms`: when it was
/// taken, on the caller's clock); offsets and counts never decrease along the ring.
#[derive(Debug, Default)]
pub struct Ring {
    samples: VecDeque<(u64, u64, u64)>,
    /// The count of the newest sample kept since the last [`Ring::clear`], acknowledged or not.
    last: Option<u64>,
}

impl Ring {
    pub const fn new() -> Ring {
        Ring {
            samples: VecDeque::new(),
            last: None,
        }
    }

    /// Records that every increase counted in `advanced` was propagated at or before `offset`.
    /// A sample that adds nothing (the count has not moved since the newest one, even one
    /// already acknowledged) is dropped: it would only make the replicas acknowledge again (the
    /// offset moves with every `REPLCONF GETACK` the fence sends itself).
    pub fn push(&mut self, offset: u64, advanced: u64) {
        self.push_at(offset, advanced, 0);
    }

    /// [`Ring::push`], taken at `ms`.
    pub fn push_at(&mut self, offset: u64, advanced: u64, ms: u64) {
        if self.last.is_some_and(|a| a >= advanced) {
            return;
        }
        self.last = Some(advanced);
        let full = self.samples.len() >= RING;
        match self.samples.back_mut() {
            // The newer sample's time: the round from it to its acknowledgement is what a
            // call that needs it waits.
            Some(last) if full => *last = (offset.max(last.0), advanced, ms),
            _ => self.samples.push_back((offset, advanced, ms)),
        }
    }

    /// The replicas acknowledged `offset`: drops every sample at or below it and returns the
    /// count of the newest of them (`None` when none was).
    pub fn ack(&mut self, offset: u64) -> Option<u64> {
        self.ack_at(offset).map(|(a, _)| a)
    }

    /// [`Ring::ack`], with when the newest acknowledged sample was taken.
    pub fn ack_at(&mut self, offset: u64) -> Option<(u64, u64)> {
        let mut newest = None;
        while let Some(&(o, a, ms)) = self.samples.front() {
            if o > offset {
                break;
            }
            newest = Some((a, ms));
            self.samples.pop_front();
        }
        newest
    }

    /// The count of the newest sample, acknowledged or not.
    pub fn newest(&self) -> Option<u64> {
        self.samples.back().map(|&(_, a, _)| a)
    }

    /// The offset of the newest sample not yet acknowledged.
    pub fn newest_offset(&self) -> Option<u64> {
        self.samples.back().map(|&(o, ..)| o)
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn clear(&mut self) {
        self.samples.clear();
        self.last = None;
    }
}

/// How many targets' gap skips wait for the replicas at most; beyond it a skip is charged to
/// the node-wide budget instead (as a whole `imid.seq-gap`: safe, it only makes every sequence
/// call of the node wait for it).
pub const SKIPS: usize = 1024;

/// Gap skips not yet acknowledged, each charged to its own target (a sequence key, a map's
/// field: `id`, a hash of its name, so a collision only makes another target wait too) rather
/// than to the node-wide budget: until the replicas acknowledge the sample whose count reaches
/// `count`, that target's calls wait and the node's other sequences go on within the budget.
/// Why this is enough: a promoted replica that never saw the skip holds the target at its
/// value before it (marked, or missing on a node that is itself inherited), so it would hand
/// out the very values the skip made room for; once it holds the skip, the budget's argument
/// applies to the target as to any other.
#[derive(Debug, Default)]
pub struct Skips {
    pending: Vec<(u64, u64)>,
}

impl Skips {
    pub const fn new() -> Skips {
        Skips {
            pending: Vec::new(),
        }
    }

    /// The skip of `id`, covered once the acknowledged count reaches `count`; `false` (nothing
    /// recorded) when [`SKIPS`] are pending already.
    pub fn insert(&mut self, id: u64, count: u64) -> bool {
        if let Some(e) = self.pending.iter_mut().find(|e| e.0 == id) {
            e.1 = e.1.max(count);
            return true;
        }
        if self.pending.len() >= SKIPS {
            return false;
        }
        self.pending.push((id, count));
        true
    }

    /// Whether `id` has a skip the acknowledged count `acked` does not cover.
    pub fn pending(&self, id: u64, acked: Option<u64>) -> bool {
        self.pending
            .iter()
            .any(|&(i, c)| i == id && acked.is_none_or(|a| c > a))
    }

    /// Forgets the skips `acked` covers.
    pub fn ack(&mut self, acked: u64) {
        self.pending.retain(|&(_, c)| c > acked);
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_budget_is_the_gap_above_the_acknowledged_count() {
        assert!(!within(0, 1, None, 1000), "nothing acknowledged yet");
        assert!(within(0, 1000, Some(0), 1000));
        assert!(!within(0, 1001, Some(0), 1000));
        assert!(within(5000, 1, Some(4001), 1000));
        assert!(!within(5000, 2, Some(4001), 1000));
        // gap 0: every increase waits for its own write
        assert!(!within(10, 1, Some(10), 0));
        assert!(within(10, 0, Some(10), 0));
        // never wraps
        assert!(!within(u64::MAX, u64::MAX, Some(0), 1000));
    }

    #[test]
    fn a_skip_is_pending_for_its_target_until_its_count_is_acknowledged() {
        let mut s = Skips::default();
        assert!(!s.pending(7, None));
        assert!(s.insert(7, 10));
        assert!(s.pending(7, None), "nothing acknowledged yet");
        assert!(s.pending(7, Some(9)));
        assert!(!s.pending(8, Some(9)), "another target goes on");
        assert!(!s.pending(7, Some(10)), "covered");
        // A second skip of the same target: the later count holds.
        assert!(s.insert(7, 12));
        assert_eq!(s.len(), 1);
        s.ack(11);
        assert!(s.pending(7, Some(11)));
        s.ack(12);
        assert!(s.is_empty());
        // Full: refused, so the caller charges the node instead.
        for i in 0..SKIPS as u64 {
            assert!(s.insert(i, 1));
        }
        assert!(!s.insert(u64::MAX, 1));
        assert!(s.insert(0, 2), "a pending target is updated even when full");
    }

    #[test]
    fn samples_are_acknowledged_in_order() {
        let mut r = Ring::default();
        r.push(100, 10);
        r.push(150, 10); // nothing new: dropped
        assert_eq!(r.len(), 1);
        r.push(200, 20);
        r.push(300, 35);
        assert_eq!(r.ack(99), None);
        assert_eq!(r.ack(250), Some(20));
        assert_eq!(r.newest(), Some(35));
        assert_eq!(r.ack(250), None, "already taken");
        assert_eq!(r.ack(1000), Some(35));
        assert!(r.is_empty());
        // Acknowledged, the count is still not new: a later offset (the fence's own GETACK
        // moved it) adds nothing to ask the replicas for.
        r.push(1100, 35);
        assert!(r.is_empty());
        r.push(1200, 36);
        assert_eq!(r.newest_offset(), Some(1200));
        r.clear();
        r.push(1300, 36);
        assert_eq!(
            r.newest_offset(),
            Some(1300),
            "after clear, nothing is acknowledged"
        );
    }

    #[test]
    fn a_full_ring_replaces_its_newest_sample() {
        let mut r = Ring::default();
        for i in 0..RING as u64 {
            r.push(i * 10, i + 1);
        }
        assert_eq!(r.len(), RING);
        r.push(10_000, 500);
        assert_eq!(r.len(), RING);
        assert_eq!(r.newest(), Some(500));
        // the replaced sample's offset is the newer one: acknowledging the older offset no
        // longer credits the newer count
        assert_eq!(r.ack((RING as u64 - 1) * 10), Some(RING as u64 - 1));
        assert_eq!(r.ack(10_000), Some(500));
    }

    /// What the budget promises, against a model that remembers every sample: whatever a call
    /// was allowed to hand out at once lies at most `gap` above the count the replicas hold.
    #[derive(Clone, Debug)]
    enum Op {
        /// A call raising the count by this much asks to reply at once.
        Advance(u64),
        /// The node samples (offset grows by this much first).
        Sample(u64),
        /// The replicas acknowledge up to this fraction of the propagated offset.
        Ack(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u64..400).prop_map(Op::Advance),
            (1u64..50).prop_map(Op::Sample),
            any::<u8>().prop_map(Op::Ack),
        ]
    }

    proptest! {
        #[test]
        fn nothing_at_once_beyond_the_gap_above_what_the_replicas_hold(
            ops in proptest::collection::vec(op(), 1..400),
            gap in 0u64..1500,
        ) {
            let mut ring = Ring::default();
            let mut acked: Option<u64> = None;
            let (mut advanced, mut offset) = (0u64, 0u64);
            // the model: every sample ever taken, and the highest offset acknowledged
            let mut history: Vec<(u64, u64)> = Vec::new();
            let mut acked_offset = None;
            for op in ops {
                match op {
                    Op::Advance(n) => {
                        let now = within(advanced, n, acked, gap);
                        advanced += n;
                        if now {
                            // the replicas hold the count of the newest sample at or below
                            // the acknowledged offset
                            let held = acked_offset.and_then(|a| {
                                history.iter().rev().find(|&&(o, _)| o <= a).map(|&(_, c)| c)
                            });
                            let held = held.expect("something acknowledged");
                            prop_assert!(advanced - held <= gap);
                        }
                        // every increase is propagated at once: the offset moves
                        offset += 1;
                    }
                    Op::Sample(d) => {
                        offset += d;
                        ring.push(offset, advanced);
                        history.push((offset, advanced));
                    }
                    Op::Ack(f) => {
                        let a = offset * u64::from(f) / 255;
                        let a = acked_offset.map_or(a, |p: u64| p.max(a));
                        acked_offset = Some(a);
                        if let Some(c) = ring.ack(a) {
                            acked = Some(acked.map_or(c, |p| p.max(c)));
                        }
                    }
                }
            }
        }
    }
}
