//! The index of a sequence map: an open-addressing table of entry addresses (address + 1; 0 is
//! an empty slot) with linear probing and no wrap-around, its slots in fixed-size pages.
//!
//! A key's home slot is `fastrange(hash, buckets)`; a cluster may run on into a short tail past
//! the last home (which grows by a page, or a size class for a one-page table, should a cluster
//! ever reach its end). The slots are kept in the order of the entries' 64-bit hashes (ordered
//! linear probing: an insert shifts the rest of its cluster right, a delete shifts it back), so
//! that "the next hash to return" is a scan cursor that survives everything (see
//! `SeqMap::scan`), and an insert's probe stops at the first entry hashed above its own.
//!
//! Resizing is incremental, as Redis's dict rehashes ([`Index`] says how).

use super::arena::Arena;
use crate::core::hash::hash;

pub(super) const PAGE_BITS: u32 = 10;
/// Slots per page (4 KiB) of a table of pages.
pub(super) const PAGE: usize = 1 << PAGE_BITS;
const PAGE_MASK: usize = PAGE - 1;
/// A table of at most this many slots (8 KiB) is one allocation of its size class instead, and
/// is resized at once (moving at most about 1,700 entries).
pub(super) const SMALL_CAP: usize = 2 * PAGE;
/// The page shift of a table of one page (any size).
const ONE_PAGE: u32 = 31;
/// Slots a lookup compares by name before it bisects the rest of the run by hash. Most hits
/// are within them (a hit is on average 2 to 4 slots from its home at the loads kept); a miss
/// in a long run (in the old table during a resize above all) reads a few more, not the run.
const LINEAR_PROBES: usize = 8;

/// `h` mapped onto `0..n` preserving order (Lemire's multiply-shift), so any `n` works and
/// home slots rise with the hash.
pub(super) fn fastrange(h: u64, n: usize) -> usize {
    ((u128::from(h) * n as u128) >> 64) as usize
}

/// The smallest hash whose home among `n` buckets is at least `slot`; `None` past the last.
fn first_hash_of(slot: usize, n: usize) -> Option<u64> {
    if slot >= n {
        return None;
    }
    u64::try_from(((slot as u128) << 64).div_ceil(n as u128)).ok()
}

/// Slots past the last home: room for the cluster that runs on from the last homes.
pub(super) fn tail(capacity: usize) -> usize {
    8 + capacity / 64
}

/// A slot's place: in the current table or in the old one being swept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pos {
    pub(super) old: bool,
    pub(super) slot: usize,
}

/// One table. `pages` holds `cap` slots: one page of `cap` slots when `cap <= SMALL_CAP` (or
/// when such a table's tail was extended), else `cap / PAGE` pages of `PAGE`; a page not yet
/// written is an empty box (reads as empty slots).
#[derive(Debug, Default)]
pub(super) struct Table {
    pages: Vec<Box<[u32]>>,
    /// Home slots (`cap` minus the tail).
    n_buckets: u32,
    /// Slots.
    n_cap: u32,
    /// Slots allocated (pages written), for memory accounting.
    allocated: u32,
    /// Slot `i` is in page `i >> shift`: PAGE_BITS, or ONE_PAGE for a table of one page.
    shift: u32,
}

impl Table {
    /// A table of `cap` slots (a multiple of PAGE above SMALL_CAP), nothing allocated yet.
    fn with_cap(cap: usize) -> Table {
        let (pages, shift) = if cap <= SMALL_CAP {
            (1, ONE_PAGE)
        } else {
            (cap / PAGE, PAGE_BITS)
        };
        Table {
            pages: (0..pages).map(|_| Box::default()).collect(),
            n_buckets: (cap - tail(cap)) as u32,
            n_cap: cap as u32,
            allocated: 0,
            shift,
        }
    }

    #[inline]
    fn buckets(&self) -> usize {
        self.n_buckets as usize
    }

    #[inline]
    fn cap(&self) -> usize {
        self.n_cap as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        (1usize << self.shift) - 1
    }

    fn one_page(&self) -> bool {
        self.shift == ONE_PAGE
    }

    #[inline]
    pub(super) fn home(&self, h: u64) -> usize {
        fastrange(h, self.buckets())
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> u32 {
        self.pages
            .get(i >> self.shift)
            .and_then(|p| p.get(i & self.mask()))
            .copied()
            .unwrap_or(0)
    }

    fn page_len(&self) -> usize {
        if self.one_page() {
            self.cap()
        } else {
            PAGE
        }
    }

    #[inline]
    fn set(&mut self, i: usize, v: u32) {
        let mask = self.mask();
        let Some(p) = self.pages.get_mut(i >> self.shift) else {
            return;
        };
        match p.get_mut(i & mask) {
            Some(s) => *s = v,
            // A page not written yet (empty slots): allocated for anything but an empty slot.
            None if v != 0 => self.set_in_new_page(i, v),
            None => {}
        }
    }

    #[cold]
    #[inline(never)]
    fn set_in_new_page(&mut self, i: usize, v: u32) {
        let len = self.page_len();
        let mask = self.mask();
        let Some(p) = self.pages.get_mut(i >> self.shift) else {
            return;
        };
        if p.is_empty() {
            *p = vec![0u32; len].into_boxed_slice();
            self.allocated += len as u32;
        }
        if let Some(s) = p.get_mut(i & mask) {
            *s = v;
        }
    }

    /// More room at the end (the tail), homes unchanged: a one-page table one size class up,
    /// a table of pages a page more.
    fn extend(&mut self) {
        if self.one_page() {
            let cap = super::size_class(self.cap() * 4 + 1) / 4;
            if let Some(p) = self.pages.first_mut() {
                if !p.is_empty() {
                    let mut v = std::mem::take(p).into_vec();
                    v.resize(cap, 0);
                    *p = v.into_boxed_slice();
                    self.allocated = cap as u32;
                }
            }
            self.n_cap = cap as u32;
        } else {
            self.pages.push(Box::default());
            self.n_cap = (self.pages.len() * PAGE) as u32;
        }
    }

    /// Frees the page before slot `i` when `i` starts a page (the sweep passed it).
    fn free_before(&mut self, i: usize) {
        if self.one_page() || i & PAGE_MASK != 0 || i == 0 {
            return;
        }
        if let Some(p) = self.pages.get_mut((i >> PAGE_BITS) - 1) {
            self.allocated -= p.len() as u32;
            *p = Box::default();
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        super::heap(self.pages.capacity() * std::mem::size_of::<Box<[u32]>>())
            + if self.one_page() {
                super::heap(self.allocated as usize * 4)
            } else {
                self.allocated as usize * 4
            }
    }

    /// The slot holding `name` (hash `h`) in the run of entries from `start`, or `None`: the
    /// first [`LINEAR_PROBES`] compared by name, the rest of the run, which is in hash order,
    /// bisected by hash (so a miss in a long run reads a few entries, not all of them).
    #[inline]
    fn find(
        &self,
        start: usize,
        name: &[u8],
        len_byte: u8,
        h: u64,
        arena: &Arena,
    ) -> Option<usize> {
        let page = self.pages.get(start >> self.shift)?;
        let near = page.get(start & self.mask()..)?;
        for (k, &s) in near.iter().take(LINEAR_PROBES).enumerate() {
            if s == 0 {
                return None;
            }
            if arena.is_named(s as usize - 1, len_byte, name) {
                return Some(start + k);
            }
        }
        self.find_far(
            start + near.len().min(LINEAR_PROBES),
            name,
            len_byte,
            h,
            arena,
        )
        .ok()
    }

    /// [`Table::find`] past the first probes: `Ok` with the slot holding `name`, or `Err` with
    /// the slot it would go to (the first past `from` whose hash is above `h`, or the run's end).
    #[inline(never)]
    fn find_far(
        &self,
        from: usize,
        name: &[u8],
        len_byte: u8,
        h: u64,
        arena: &Arena,
    ) -> Result<usize, usize> {
        let end = self.empty_from(from).unwrap_or(self.cap());
        let hash_at = |i: usize| {
            arena
                .entry((self.get(i) as usize).wrapping_sub(1))
                .map(|e| hash(e.name))
        };
        // The first entry of the run with a hash at least h...
        let (mut lo, mut hi) = (from, end);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if hash_at(mid).is_some_and(|x| x < h) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // ... and those sharing h.
        let mut i = lo;
        while i < end && hash_at(i) == Some(h) {
            if arena.is_named((self.get(i) as usize).wrapping_sub(1), len_byte, name) {
                return Ok(i);
            }
            i += 1;
        }
        Err(i)
    }

    /// The slot holding `name` (hash `h`) in the run of entries from `start`, `Ok`, or the slot
    /// an insert of it goes to, `Err`: the run is in hash order, so the walk stops at the first
    /// entry hashed above `h` (an entry passed is hashed, where [`Table::find`] only compares
    /// names). A miss reads about as many entries as a hit, instead of the rest of the run.
    #[inline]
    fn probe(
        &self,
        start: usize,
        name: &[u8],
        len_byte: u8,
        h: u64,
        arena: &Arena,
    ) -> Result<usize, usize> {
        let Some(page) = self.pages.get(start >> self.shift) else {
            return Err(start);
        };
        let near = page.get(start & self.mask()..).unwrap_or(&[]);
        if near.is_empty() {
            // A page not written yet (or the end of the table): empty.
            return Err(start);
        }
        // Like `Table::find`'s walk, and kept apart from it: a lookup compares names only (a
        // hit hashes nothing), a probe hashes every entry it passes to stop at the first one
        // hashed above `h`. Past the first probes both go on in the one `find_far`.
        for (k, &s) in near.iter().take(LINEAR_PROBES).enumerate() {
            if s == 0 {
                return Err(start + k);
            }
            // The hash first: it must be known to stop at all, and an insert's probe (a miss)
            // then never compares names.
            let there = arena.name(s as usize - 1).unwrap_or(&[]);
            let x = hash(there);
            if x > h {
                return Err(start + k);
            }
            if x == h && there == name {
                return Ok(start + k);
            }
        }
        self.find_far(
            start + near.len().min(LINEAR_PROBES),
            name,
            len_byte,
            h,
            arena,
        )
    }

    /// The first empty slot at or after `p`, if any before the end.
    fn empty_from(&self, mut p: usize) -> Option<usize> {
        while p < self.cap() {
            let page = self.pages.get(p >> self.shift)?;
            if page.is_empty() {
                return Some(p);
            }
            let from = p & self.mask();
            match page.get(from..)?.iter().position(|&s| s == 0) {
                Some(k) => return Some(p + k),
                None => p = (p | self.mask()) + 1,
            }
        }
        None
    }

    /// Puts `v` (an entry of hash `h`) at its ordered place among the slots from `start` (its
    /// home, or the sweep if later), shifting the rest of the cluster right. Extends the table
    /// when the cluster runs to its end. Returns the slots it moved (work).
    fn place(&mut self, h: u64, v: u32, start: usize, arena: &Arena) -> usize {
        let e = self.first_empty(start);
        // start..e is a run of entries in hash order: the place is after those with a hash at
        // most h (found by bisection, hashing a few names instead of the whole run).
        let mut p = e;
        let mut lo = start;
        while lo < p {
            let mid = lo + (p - lo) / 2;
            let below = arena
                .name((self.get(mid) as usize).wrapping_sub(1))
                .is_some_and(|x| hash(x) <= h);
            if below {
                lo = mid + 1;
            } else {
                p = mid;
            }
        }
        self.shift_in(p, e, v)
    }

    /// The first empty slot at or after `p`, the table extended when none is left.
    fn first_empty(&mut self, p: usize) -> usize {
        loop {
            match self.empty_from(p) {
                Some(e) => return e,
                None => self.extend(),
            }
        }
    }

    /// Puts `v` at slot `p`, empty (the table extended as far as it needs).
    fn put_at(&mut self, p: usize, v: u32) {
        while p >= self.cap() {
            self.extend();
        }
        self.set(p, v);
    }

    /// Puts `v` at slot `p`, found by [`Table::probe`] (the table unchanged since), shifting the
    /// rest of the cluster right. Returns the slots it moved (work).
    fn insert_at(&mut self, p: usize, v: u32) -> usize {
        let e = self.first_empty(p);
        self.shift_in(p, e, v)
    }

    /// Shifts `p..e` right by one slot (`e` is empty) and puts `v` at `p`. Returns `e - p`.
    fn shift_in(&mut self, p: usize, e: usize, v: u32) -> usize {
        if p >> self.shift == e >> self.shift && p < e {
            // Within one page (written: p holds an entry): one move.
            let mask = self.mask();
            if let Some(run) = self
                .pages
                .get_mut(p >> self.shift)
                .and_then(|page| page.get_mut(p & mask..=e & mask))
            {
                run.copy_within(..run.len() - 1, 1);
                if let Some(first) = run.first_mut() {
                    *first = v;
                }
                return e - p;
            }
        }
        let mut k = e;
        while k > p {
            let prev = self.get(k - 1);
            self.set(k, prev);
            k -= 1;
        }
        self.set(p, v);
        e - p
    }

    /// Empties slot `i` and shifts the rest of its cluster back (each entry not at its home,
    /// never before `floor`). Returns the slots it moved (work).
    fn remove(&mut self, i: usize, floor: usize, arena: &Arena) -> usize {
        let mut j = i;
        loop {
            let k = j + 1;
            let s = self.get(k);
            let moves = s != 0
                && arena
                    .entry(s as usize - 1)
                    .is_some_and(|e| self.home(hash(e.name)).max(floor) <= j);
            if !moves {
                self.set(j, 0);
                return j - i;
            }
            self.set(j, s);
            j = k;
        }
    }

    /// [`Index::scan`] in this table from slot `start`: calls `out` with the entries hashed at
    /// least `from` (and, in the current table during a resize, below `below`), counting the
    /// empty slots in `empties`. `Some` with the next cursor where the scan stops (`out` said
    /// so, or past `empty_budget` empty slots), `None` when this table is done.
    #[inline]
    fn scan_run(
        &self,
        start: usize,
        (from, below): (u64, Option<u64>),
        empties: &mut usize,
        empty_budget: usize,
        arena: &Arena,
        out: &mut impl FnMut(u32, u64) -> bool,
    ) -> Option<u64> {
        // In the current table during a resize, nothing lives past the split's home cluster.
        let end_home = below.map(|s| self.home(s));
        let mut i = start;
        while i < self.cap() {
            let s = self.get(i);
            if s == 0 {
                if end_home.is_some_and(|e| i >= e) {
                    return None;
                }
                *empties += 1;
                if *empties > empty_budget {
                    // Every entry homed at or before i sits before it (i is empty): go on
                    // from the first hash homed after it.
                    let next = first_hash_of(i + 1, self.buckets());
                    return match (next, below) {
                        (Some(n), Some(b)) => Some(n.min(b)),
                        (Some(n), None) => Some(n),
                        // This table is done.
                        (None, Some(b)) => Some(b),
                        (None, None) => None,
                    };
                }
                i += 1;
                continue;
            }
            let h = arena.entry(s as usize - 1).map_or(0, |e| hash(e.name));
            if h >= from && out(s, h) {
                return Some(h);
            }
            i += 1;
        }
        None
    }

    /// Slots in order (empty ones as 0).
    fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.pages.iter().flat_map(|p| p.iter().copied())
    }
}

/// Slots ahead of the sweep whose entries it starts loading.
const SWEEP_PREFETCH: usize = 4;

/// The old table during a resize.
#[derive(Debug)]
struct Old {
    t: Table,
    /// Every slot before this is empty (swept).
    sweep: usize,
    /// Every entry with a hash below this is in the current table, the others here.
    split: u64,
    /// The hash of the entry at `sweep`, where the last step stopped (it hashed it to see
    /// whether it shares the last hash moved); forgotten whenever this table changes.
    peeked: Option<u64>,
}

impl Old {
    /// This table, about to change.
    fn table(&mut self) -> &mut Table {
        self.peeked = None;
        &mut self.t
    }

    /// [`Index::sweep`]'s pages: moves slots into `cur` from `sweep` until the step's budget is
    /// spent or this table is swept, freeing each page it passes.
    #[inline]
    fn sweep_into(&mut self, cur: &mut Table, step: &mut SweepStep, arena: &Arena) {
        let (shift, mask) = (self.t.shift, self.t.mask());
        while self.sweep < self.t.cap() {
            let Some(page) = self.t.pages.get_mut(self.sweep >> shift) else {
                break;
            };
            let from = self.sweep & mask;
            if page.is_empty() {
                // Never written: empty slots, passed at once (within the budget).
                let n = (mask + 1 - from)
                    .min(self.t.cap() - self.sweep)
                    .min(step.budget.saturating_sub(step.spent));
                if n == 0 {
                    break;
                }
                self.sweep += n;
                step.spent += n;
                step.peeked = None;
            } else if !step.move_page(page, from, &mut self.sweep, cur, arena) {
                // Stopped at the budget: the hash of the slot there is kept for the next step.
                self.peeked = step.peeked.take();
                break;
            }
            self.t.free_before(self.sweep);
        }
    }

    /// Ends a sweep step whose last entry moved had hash `last`: sets the split past it, and
    /// says whether this table is done with.
    #[inline]
    fn split_after(&mut self, last: Option<u64>) -> bool {
        match last {
            // The largest hash moved: nothing is left in the old table (its entries all had
            // it, and they were contiguous), and no split can be above it.
            Some(u64::MAX) => true,
            Some(h) => {
                self.split = h + 1;
                self.sweep >= self.t.cap()
            }
            None => self.sweep >= self.t.cap(),
        }
    }
}

/// One step of [`Index::sweep`]: its budget and what it has done so far.
struct SweepStep {
    budget: usize,
    /// Slots visited.
    spent: usize,
    /// The hash of the last entry moved.
    last: Option<u64>,
    /// Once an entry is placed, every slot of the current table after it is empty: the
    /// entries there before this step all hash below the split, so below the ones moved
    /// now, which are moved in hash order. So the next goes to its home or right after.
    next: Option<usize>,
    /// The hash of the slot at the sweep, if known (hashed by the step before, or by this
    /// one where it stopped).
    peeked: Option<u64>,
}

impl SweepStep {
    /// Moves the entries of a written page of the old table from slot `from` (`sweep` is its
    /// place in the table) into `cur`, emptying their slots. Returns false where the budget
    /// stopped it, the hash of the slot there left in `peeked`.
    #[inline]
    fn move_page(
        &mut self,
        page: &mut [u32],
        from: usize,
        sweep: &mut usize,
        cur: &mut Table,
        arena: &Arena,
    ) -> bool {
        let hash_of = |s: u32| arena.name(s as usize - 1).map_or(0, hash);
        for j in from..page.len() {
            let s = page.get(j).copied().unwrap_or(0);
            // The entries about to move are all over the arena: each load is started a few
            // slots ahead, so that they overlap instead of waiting in turn.
            if let Some(&a) = page.get(j + SWEEP_PREFETCH).filter(|&&a| a != 0) {
                arena.prefetch(a as usize - 1);
            }
            let known = self.peeked.take();
            let h = (s != 0).then(|| known.unwrap_or_else(|| hash_of(s)));
            // Past the budget only for the entries that share the last one's hash.
            if self.spent >= self.budget && (h.is_none() || h != self.last) {
                self.peeked = h;
                return false;
            }
            if let Some(h) = h {
                let home = cur.home(h);
                let dest = match self.next {
                    Some(n) => n.max(home),
                    None => cur.first_empty(home),
                };
                cur.put_at(dest, s);
                self.next = Some(dest + 1);
                if let Some(slot) = page.get_mut(j) {
                    *slot = 0;
                }
                self.last = Some(h);
            }
            *sweep += 1;
            self.spent += 1;
        }
        true
    }
}

/// The index. See the module comment; its resize:
///
/// Resizing is incremental, as Redis's dict rehashes: a new table (`cur`), half as large again,
/// is set up empty and the old one is swept into it a few slots per write ([`Index::sweep`],
/// each entry hashed again to find its home there), in slot order, which is hash order. So at
/// any time the entries with a hash below `split` are in `cur`, the others in the old table at
/// or after `sweep`, and every lookup knows where to look from the hash alone; both halves
/// stay in hash order, one after the other. An old-table probe starts at
/// `max(home, sweep)`: the slots before `sweep` are empty, every entry at or after it still has
/// the slots between there and itself filled. A page of the new table is allocated when first
/// written, a page of the old one freed once swept, so the index never holds much more than one
/// table's worth of pages.
#[derive(Debug, Default)]
pub(super) struct Index {
    cur: Table,
    old: Option<Box<Old>>,
}

/// Grow a table of more than a page past this load (in percent of the home slots), to one half
/// as large again. Every entry moves once per resize, hashed again, so the step sets the cost
/// of growth: 1.5 x moves 2 entries per insert (3/16 more, as before, moved 5.3). The old table
/// still takes the inserts above the split while it is swept, so the sweep ends before it
/// passes [`SWEPT_BY_PCT`]: the new table then holds 60% of its homes, and the index costs at
/// most 4 / 0.6 = 6.7 bytes per field (5.3 to 6.3 with 3/16).
pub(super) const MAX_LOAD_PCT: usize = 75;
/// The load (in percent of its homes) an old table being swept must not reach: a lookup there
/// starts at most this full (a miss reads about as many entries as a hit, the run being in hash
/// order), and the new table's load when the sweep ends is this over the growth, 90 / 1.5.
const SWEPT_BY_PCT: usize = 90;
/// Grow a table of one page (resized at once, so never overloaded) past this load.
const SMALL_MAX_LOAD_PCT: usize = 85;
/// Shrink it below this load...
const MIN_LOAD_PCT: usize = 25;
/// ... to this one.
const SHRUNK_LOAD_PCT: usize = 50;
/// Load after a bulk build (RDB, RESTORE, COPY) of more than a page: a little below
/// [`MAX_LOAD_PCT`] (a resize is only a few slots per write, so no room for growth need be
/// kept).
pub(super) const BUILD_LOAD_PCT: usize = 72;
/// Load after a bulk build of one page.
const SMALL_BUILD_LOAD_PCT: usize = 78;
/// Slots of the smallest table (64 bytes).
const MIN_CAP: usize = 16;

/// Most entries a table of `cap` slots (`buckets` homes) takes before growing.
fn max_load(buckets: usize, cap: usize) -> usize {
    let pct = if cap <= SMALL_CAP {
        SMALL_MAX_LOAD_PCT
    } else {
        MAX_LOAD_PCT
    };
    buckets * pct / 100
}

/// The capacity after `cap`: one allocator size class up (14% to 25% more) while one page,
/// then half as many pages more (at least one).
fn grown(cap: usize) -> usize {
    if cap < SMALL_CAP {
        (super::size_class(cap * 4 + 1) / 4).clamp(MIN_CAP, SMALL_CAP)
    } else {
        let pages = cap / PAGE;
        (pages + (pages / 2).max(1)) * PAGE
    }
}

/// The smallest capacity (in the steps of [`grown`]) whose homes take `n` entries at `pct`.
fn cap_for(n: usize, pct: usize) -> usize {
    let mut cap = MIN_CAP;
    while (cap - tail(cap)) * pct < n * 100 {
        cap = grown(cap);
    }
    cap
}

impl Index {
    /// An index of `cap` slots laid out from entries in hash order, `(hash, address + 1)`: each
    /// at its home or right after the one before. `None` when they do not fit.
    pub(super) fn build(cap: usize, entries: &[(u64, u32)]) -> Option<Index> {
        let mut t = Table::with_cap(cap);
        let mut next = 0usize;
        for &(h, v) in entries {
            let p = t.home(h).max(next);
            if p >= t.cap() {
                return None;
            }
            t.set(p, v);
            next = p + 1;
        }
        Some(Index { cur: t, old: None })
    }

    /// Capacity for a bulk build of `n` entries; `as_grown`: a table of one page as full as
    /// inserts one at a time would have left it (a map made by one SEQ.HSET costs what the same
    /// fields set one by one would), else a little below, with room for growth (a load).
    pub(super) fn build_cap(n: usize, as_grown: bool) -> usize {
        let small_pct = if as_grown {
            SMALL_MAX_LOAD_PCT
        } else {
            SMALL_BUILD_LOAD_PCT
        };
        let cap = cap_for(n, small_pct);
        if cap <= SMALL_CAP {
            return cap;
        }
        // Above, any number of pages: the fewest that take n.
        let mut pages = (n * 100 / BUILD_LOAD_PCT)
            .div_ceil(PAGE)
            .max(SMALL_CAP / PAGE + 1);
        while (pages * PAGE - tail(pages * PAGE)) * BUILD_LOAD_PCT < n * 100 {
            pages += 1;
        }
        pages * PAGE
    }

    /// The next capacity after `cap` (for a build that did not fit).
    pub(super) fn next_cap(cap: usize) -> usize {
        grown(cap)
    }

    /// Where an entry of hash `h` is or goes: the table and the slot its probe starts at.
    #[inline]
    fn route(&self, h: u64) -> (bool, usize) {
        match &self.old {
            Some(o) if h >= o.split => (true, o.t.home(h).max(o.sweep)),
            _ => (false, self.cur.home(h)),
        }
    }

    fn table(&self, old: bool) -> Option<&Table> {
        if old {
            self.old.as_deref().map(|o| &o.t)
        } else {
            Some(&self.cur)
        }
    }

    /// The slot holding `name` (hash `h`).
    #[inline]
    pub(super) fn find(&self, name: &[u8], h: u64, arena: &Arena) -> Option<Pos> {
        if self.cur.buckets() == 0 {
            return None;
        }
        let len_byte = u8::try_from(name.len().checked_sub(1)?).ok()?;
        let (old, start) = self.route(h);
        let slot = self.table(old)?.find(start, name, len_byte, h, arena)?;
        Some(Pos { old, slot })
    }

    /// The address (plus one) at `pos`, 0 for none.
    pub(super) fn get(&self, pos: Pos) -> u32 {
        self.table(pos.old).map_or(0, |t| t.get(pos.slot))
    }

    /// Points `pos` at address `addr`.
    pub(super) fn set(&mut self, pos: Pos, addr: usize) {
        let t = if pos.old {
            self.old.as_deref_mut().map(Old::table)
        } else {
            Some(&mut self.cur)
        };
        if let Some(t) = t {
            t.set(pos.slot, (addr + 1) as u32);
        }
    }

    /// The slot holding `name` (hash `h`), `Ok`, or the slot an insert of it takes, `Err`
    /// (`None` for an index without a table, or a name out of range): see [`Table::probe`].
    /// Valid until the index changes.
    #[inline]
    pub(super) fn probe(&self, name: &[u8], h: u64, arena: &Arena) -> Result<Pos, Option<Pos>> {
        let Some(len_byte) = name.len().checked_sub(1).and_then(|l| u8::try_from(l).ok()) else {
            return Err(None);
        };
        if self.cur.buckets() == 0 {
            return Err(None);
        }
        let (old, start) = self.route(h);
        let Some(t) = self.table(old) else {
            return Err(None);
        };
        match t.probe(start, name, len_byte, h, arena) {
            Ok(slot) => Ok(Pos { old, slot }),
            Err(slot) => Err(Some(Pos { old, slot })),
        }
    }

    /// Asks the CPU to start loading what a probe for hash `h` reads first: the slot where it
    /// starts (`entries` false), or the entries of the first few slots from there (`entries`
    /// true; the slots themselves are read, so that is best done once they were loaded). A
    /// hint for a write of many fields, whose probes are known ahead.
    #[inline]
    pub(super) fn prefetch(&self, h: u64, entries: bool, arena: &Arena) {
        if self.cur.buckets() == 0 {
            return;
        }
        let (old, start) = self.route(h);
        let Some(t) = self.table(old) else {
            return;
        };
        let Some(near) = t
            .pages
            .get(start >> t.shift)
            .and_then(|p| p.get(start & t.mask()..))
        else {
            return;
        };
        if !entries {
            super::arena::prefetch(near.as_ptr());
            return;
        }
        for &s in near.iter().take(2) {
            if s == 0 {
                break;
            }
            arena.prefetch(s as usize - 1);
        }
    }

    /// [`Index::insert`] at the slot [`Index::probe`] gave for it, the index unchanged since.
    /// Returns the slots moved.
    pub(super) fn insert_at(&mut self, h: u64, addr: usize, at: Pos, arena: &Arena) -> usize {
        let v = (addr + 1) as u32;
        match (at.old, self.old.as_deref_mut()) {
            (true, Some(o)) => o.table().insert_at(at.slot, v),
            (false, _) => self.cur.insert_at(at.slot, v),
            (true, None) => self.insert(h, addr, arena),
        }
    }

    /// Inserts address `addr` of an entry of hash `h` (not in the index). Returns the slots
    /// moved.
    pub(super) fn insert(&mut self, h: u64, addr: usize, arena: &Arena) -> usize {
        let v = (addr + 1) as u32;
        let (old, start) = self.route(h);
        match (old, self.old.as_deref_mut()) {
            (true, Some(o)) => o.table().place(h, v, start, arena),
            _ => self.cur.place(h, v, start, arena),
        }
    }

    /// Removes the entry at `pos`. Returns the slots moved.
    pub(super) fn remove(&mut self, pos: Pos, arena: &Arena) -> usize {
        match (pos.old, self.old.as_deref_mut()) {
            (true, Some(o)) => {
                let floor = o.sweep;
                o.table().remove(pos.slot, floor, arena)
            }
            _ => self.cur.remove(pos.slot, 0, arena),
        }
    }

    /// Points the slot holding address `old` (an entry of hash `h`) at `new`; false when no
    /// slot holds it.
    pub(super) fn relocate(&mut self, h: u64, old: usize, new: usize) -> bool {
        let (in_old, start) = self.route(h);
        let t = if in_old {
            match self.old.as_deref_mut() {
                Some(o) => o.table(),
                None => return false,
            }
        } else {
            &mut self.cur
        };
        let want = (old + 1) as u32;
        let mut i = start;
        loop {
            match t.get(i) {
                0 => return false,
                s if s == want => {
                    t.set(i, (new + 1) as u32);
                    return true;
                }
                _ => i += 1,
            }
        }
    }

    /// Whether a resize is under way.
    pub(super) fn resizing(&self) -> bool {
        self.old.is_some()
    }

    /// Starts growing when one more entry would pass the load (and no resize runs).
    /// Returns `None` when it did not, else the slots a small table's resize moved at once.
    pub(super) fn grow_for(&mut self, len: usize, arena: &Arena) -> Option<usize> {
        if self.old.is_none() && len > max_load(self.cur.buckets(), self.cur.cap()) {
            let mut cap = grown(self.cur.cap());
            while max_load(cap - tail(cap), cap) < len {
                cap = grown(cap);
            }
            return Some(self.resize(cap, arena));
        }
        None
    }

    /// Starts shrinking when `len` entries leave the table under a quarter full.
    /// Returns the slots a small table's resize moved at once.
    pub(super) fn shrink_for(&mut self, len: usize, arena: &Arena) -> usize {
        if self.old.is_none()
            && self.cur.cap() > MIN_CAP
            && len * 100 < self.cur.buckets() * MIN_LOAD_PCT
        {
            let cap = cap_for(len, SHRUNK_LOAD_PCT);
            if cap < self.cur.cap() {
                return self.resize(cap, arena);
            }
        }
        0
    }

    fn resize(&mut self, cap: usize, arena: &Arena) -> usize {
        let t = std::mem::replace(&mut self.cur, Table::with_cap(cap));
        if t.allocated == 0 {
            // Nothing to move (a new map's first table).
            return 0;
        }
        let small = t.cap() <= SMALL_CAP && cap <= SMALL_CAP;
        let old_cap = t.cap();
        self.old = Some(Box::new(Old {
            t,
            sweep: 0,
            split: 0,
            peeked: None,
        }));
        if small {
            // One page to another (at most SMALL_CAP slots, well under a millisecond): at once,
            // so that a small map never holds two tables.
            return self.sweep(old_cap, arena);
        }
        0
    }

    /// Slots the sweep must visit per insert so that it ends before `len` entries pass the old
    /// table's [`SWEPT_BY_PCT`] or the current table's load: the rest over the inserts left,
    /// at least `min`.
    pub(super) fn sweep_rate(&self, len: usize, min: usize) -> usize {
        let Some(o) = self.old.as_deref() else {
            return 0;
        };
        let rest = o.t.cap().saturating_sub(o.sweep);
        let limit =
            (o.t.buckets() * SWEPT_BY_PCT / 100).min(max_load(self.cur.buckets(), self.cur.cap()));
        match limit.checked_sub(len) {
            Some(room) if room > 0 => rest.div_ceil(room).max(min),
            _ => rest,
        }
    }

    /// Moves the old table's next `budget` slots into the current one (entries of one hash
    /// go together, so the last may pass the budget); ends the resize when the old table is
    /// swept. Returns the slots visited.
    pub(super) fn sweep(&mut self, budget: usize, arena: &Arena) -> usize {
        let Some(o) = self.old.as_deref_mut() else {
            return 0;
        };
        let mut step = SweepStep {
            budget,
            spent: 0,
            last: None,
            next: None,
            // The peeked hash is the first slot's, if any.
            peeked: o.peeked.take(),
        };
        o.sweep_into(&mut self.cur, &mut step, arena);
        if o.split_after(step.last) {
            self.old = None;
        }
        step.spent
    }

    /// Every address (plus one) in hash order.
    pub(super) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.cur
            .slots()
            .chain(self.old.iter().flat_map(|o| o.t.slots()))
            .filter(|&s| s != 0)
    }

    /// One page of a scan (see `SeqMap::scan`): calls `out` with each address (plus one) and
    /// hash in hash order from `cursor`; `out` answers whether to stop before that entry (the
    /// page is full), and the hash is then the next cursor. Returns it, or 0 at the end. Visits
    /// at most `empty_budget` empty slots once something was returned, then stops at an empty
    /// slot with a cursor all of whose smaller hashes were visited.
    pub(super) fn scan(
        &self,
        cursor: u64,
        empty_budget: usize,
        arena: &Arena,
        mut out: impl FnMut(u32, u64) -> bool,
    ) -> u64 {
        if self.cur.buckets() == 0 {
            return 0;
        }
        let mut empties = 0usize;
        // The current table (hashes below the split), then the old one.
        let split = self.old.as_deref().map(|o| o.split);
        let segments: [(Option<&Table>, usize, u64, Option<u64>); 2] = [
            (
                split.is_none_or(|s| cursor < s).then_some(&self.cur),
                self.cur.home(cursor),
                cursor,
                split,
            ),
            (
                self.old.as_deref().map(|o| &o.t),
                self.old
                    .as_deref()
                    .map_or(0, |o| o.t.home(cursor.max(o.split)).max(o.sweep)),
                split.map_or(cursor, |s| cursor.max(s)),
                None,
            ),
        ];
        for (table, start, from, below) in segments {
            let Some(t) = table else {
                continue;
            };
            if let Some(next) = t.scan_run(
                start,
                (from, below),
                &mut empties,
                empty_budget,
                arena,
                &mut out,
            ) {
                return next;
            }
        }
        0
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.cur.heap_bytes()
            + self.old.as_deref().map_or(0, |o| {
                super::heap(std::mem::size_of::<Old>()) + o.t.heap_bytes()
            })
    }

    /// Whether the next insert into a map of `len` fields starts growing the index (tests).
    #[cfg(test)]
    pub(super) fn grows_at_next_insert(&self, len: usize) -> bool {
        self.old.is_none() && len + 1 > max_load(self.cur.buckets(), self.cur.cap())
    }

    /// How far a resize is, 0 to 1 (tests).
    #[cfg(test)]
    pub(super) fn resize_progress(&self) -> Option<f64> {
        self.old
            .as_deref()
            .map(|o| o.sweep as f64 / o.t.cap() as f64)
    }

    /// Checks the invariants (tests): hash order across both tables, each entry after its
    /// home (or the sweep) with no empty slot in between, split between the halves. Returns
    /// the addresses (plus one) in order.
    #[cfg(test)]
    pub(super) fn check(&self, arena: &Arena) -> Vec<u32> {
        let mut out = Vec::new();
        let mut prev: Option<u64> = None;
        let split = self.old.as_deref().map(|o| o.split);
        let tables = [Some((&self.cur, 0usize, false))]
            .into_iter()
            .chain(self.old.as_deref().map(|o| Some((&o.t, o.sweep, true))))
            .flatten();
        for (t, floor, old) in tables {
            if t.cap() == 0 {
                continue;
            }
            assert!(t.one_page() || (t.cap() > SMALL_CAP && t.cap() % PAGE == 0));
            assert!(t.buckets() + 8 <= t.cap());
            let allocated: usize = t.pages.iter().map(|p| p.len()).sum();
            assert_eq!(allocated, t.allocated as usize);
            for i in 0..t.cap() {
                let s = t.get(i);
                if s == 0 {
                    continue;
                }
                assert!(i >= floor, "entry before the sweep");
                let e = arena.entry(s as usize - 1).unwrap();
                assert_eq!(e.header & super::arena::DEAD, 0);
                let h = hash(e.name);
                let home = t.home(h);
                assert!(home <= i);
                assert!(
                    (home.max(floor)..i).all(|x| t.get(x) != 0),
                    "hole in a cluster"
                );
                if let Some(p) = prev {
                    assert!(p <= h, "hash order");
                }
                if let Some(split) = split {
                    assert_eq!(h >= split, old, "split");
                }
                prev = Some(h);
                out.push(s);
            }
        }
        out
    }
}
