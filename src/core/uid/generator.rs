//! The UID generator state machine: per lane the linear index of its last ID, runs of
//! consecutive IDs, and the bound on borrowing ahead of the clock.

use super::*;

/// A run worked out but not issued yet.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) node: u64,
    pub(super) lane: usize,
    /// The linear index of the clock's (or the floor's) unit, seq 0.
    pub(super) clock_l: u64,
    pub(super) first: u64,
    pub(super) final_l: u64,
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
    pub(super) first: u64,
    pub(super) last: u64,
    /// The node field in place.
    pub(super) node_bits: u64,
    pub(super) seq_bits: u32,
    pub(super) seq_mask: u64,
    pub(super) seq_shift: u32,
    pub(super) shift_time: u32,
    /// Unix ms of the last ID's time unit: the caller keeps it below the shared time lease.
    pub time_ms: u64,
}

impl Run {
    #[inline]
    pub(super) fn uid_at(&self, l: u64) -> u64 {
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
pub(super) const NONE: u64 = u64::MAX;

/// The UID generator: a layout, the node mode, and per lane the linear index of its last ID.
///
/// Its rules (as MSGID's):
/// - per lane (one lane per node, or per hash slot in cluster mode) every ID is strictly
///   greater than every ID issued before it;
/// - time is `max(now, last, floor)`: a clock that runs backwards never makes IDs go back;
/// - a full seq field borrows the next time unit; nothing sleeps, spins or wraps;
/// - the generator owns no lease: it takes the shared time floor (Unix ms) and reports the ms
///   time of the last ID it issued, which the caller keeps below the shared time lease. After
///   a restart the floor is at or above that lease, and UID time units start at
///   `ceil((floor - epoch) / unit)`, above every unit issued before.
///
/// Within a lane the generator works on the linear index `L = time_unit << S | seq`: the IDs of
/// a lane are consecutive values of `L`, so a batch of `n` IDs is the run `L .. L + n - 1`, and
/// a full seq field rolls over into the next time unit by plain addition. The node field is
/// fixed per lane, so where it sits (below or above seq) only changes the shifts.
#[derive(Debug)]
pub struct UidGenerator {
    pub(super) layout: Layout,
    pub(super) mode: NodeMode,
    /// Last issued `L = time << seq_bits | seq` per lane (`NONE`: nothing yet). One lane for a
    /// fixed node, one per hash slot in slot mode (128 KiB).
    pub(super) lanes: Vec<u64>,
    pub(super) stats: UidStats,
    /// The latest clock reading seen by [`issue_bounded`](Self::issue_bounded).
    pub(super) latest_now_ms: u64,
    /// What [`issue_one`](Self::issue_one) needs to issue the next ID of the same time unit
    /// without planning it again; `None` until a bounded issue of a fixed node has run.
    pub(super) repeat: Option<Repeat>,
}

/// The inputs of the last bounded issue (fixed node only) and the UID it ended with. A call
/// with the same clock reading and floor plans exactly as that one did: its run starts at the
/// lane's next index, in the same time unit while the seq field has room, so its UID is the
/// last one plus one step of the seq field, and every check the plan made (exhaustion, the
/// borrowing bound, the lease) still holds for that unit.
#[derive(Clone, Copy, Debug)]
pub(super) struct Repeat {
    pub(super) now_ms: u64,
    pub(super) floor_ms: u64,
    pub(super) uid: u64,
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
    pub(super) fn lane_of(&self, slot: u16) -> (u64, usize) {
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
    ) -> Result<Run, UidExhausted> {
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
    pub(super) fn time_ms_of(&self, l: u64) -> u64 {
        // l >> seq_bits <= time_max: the unit's ms is below 2^63 (Layout::new).
        self.layout.epoch_ms + (l >> self.layout.widths.seq) * self.layout.unit.ms()
    }

    /// Where a run of `count` would go, without issuing it.
    #[inline(always)]
    pub(super) fn plan(
        &self,
        slot: u16,
        now_ms: u64,
        floor_ms: u64,
        count: u32,
    ) -> Result<Plan, UidExhausted> {
        let (node, lane) = self.lane_of(slot);
        let layout = &self.layout;
        let exhausted = UidExhausted {
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
    pub(super) fn commit(&mut self, p: Plan) -> Run {
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
    ) -> Result<Run, UidExhausted> {
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
    ) -> Result<(u64, u64), UidExhausted> {
        self.issue_for(target, now_ms, floor_ms, 1)
            .map(|run| (run.first(), run.time_ms))
    }
}
