//! The index of a sequence map: an open-addressing table of entry addresses (address + 1; 0 is
//! an empty slot) with linear probing and no wrap-around, its slots in fixed-size pages.
//!
//! A key's home slot is `fastrange(hash, buckets)`; a cluster may run on into a short tail past
//! the last home (which grows by a page, or a size class for a one-page table, should a cluster
//! ever reach its end). The slots are kept in the order of the entries' 64-bit hashes (ordered
//! linear probing: an insert shifts the rest of its cluster right, a delete shifts it back), so
//! that "the next hash to return" is a scan cursor that survives everything (see
//! `SeqMap::scan`).
//!
//! Resizing is incremental, as Redis's dict rehashes: a new table (`cur`) is set up empty and
//! the old one is swept into it a few slots per write ([`Index::sweep`]), in slot order, which
//! is hash order. So at any time the entries with a hash below `split` are in `cur`, the others
//! in the old table at or after `sweep`, and every lookup knows where to look from the hash
//! alone; both halves stay in hash order, one after the other. An old-table probe starts at
//! `max(home, sweep)`: the slots before `sweep` are empty, every entry at or after it still has
//! the slots between there and itself filled. A page of the new table is allocated when first
//! written, a page of the old one freed once swept, so the index never holds much more than one
//! table's worth of pages.

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

    fn set(&mut self, i: usize, v: u32) {
        let len = self.page_len();
        let mask = self.mask();
        let Some(p) = self.pages.get_mut(i >> self.shift) else {
            return;
        };
        if p.is_empty() {
            if v == 0 {
                return;
            }
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
    }

    /// [`Table::find`] past the first probes.
    #[inline(never)]
    fn find_far(
        &self,
        from: usize,
        name: &[u8],
        len_byte: u8,
        h: u64,
        arena: &Arena,
    ) -> Option<usize> {
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
                return Some(i);
            }
            i += 1;
        }
        None
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
    /// home, or the sweep if later), shifting the rest of the cluster right; `last`: every
    /// entry in the table has a hash at most `h`, so the place is the cluster's end. Extends the
    /// table when the cluster runs to its end. Returns the slots it moved (work).
    fn place(&mut self, h: u64, v: u32, start: usize, last: bool, arena: &Arena) -> usize {
        let e = loop {
            match self.empty_from(start) {
                Some(e) => break e,
                None => self.extend(),
            }
        };
        // start..e is a run of entries in hash order: the place is after those with a hash at
        // most h (found by bisection, hashing a few names instead of the whole run).
        let mut p = e;
        if !last {
            let mut lo = start;
            while lo < p {
                let mid = lo + (p - lo) / 2;
                let below = arena
                    .entry((self.get(mid) as usize).wrapping_sub(1))
                    .is_some_and(|x| hash(x.name) <= h);
                if below {
                    lo = mid + 1;
                } else {
                    p = mid;
                }
            }
        }
        // Shift p..e right by one, from the end.
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

    /// Slots in order (empty ones as 0).
    fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.pages.iter().flat_map(|p| p.iter().copied())
    }
}

/// The old table during a resize.
#[derive(Debug)]
struct Old {
    t: Table,
    /// Every slot before this is empty (swept).
    sweep: usize,
    /// Every entry with a hash below this is in the current table, the others here.
    split: u64,
}

/// The index. See the module comment.
#[derive(Debug, Default)]
pub(super) struct Index {
    cur: Table,
    old: Option<Box<Old>>,
}

/// Grow a table of more than a page past this load (in percent of the home slots). Its old
/// table still takes the inserts above the split while it is swept (about 6% of its homes more
/// by the end): a miss there read 9 entries on average from a start at 75%, 50 from a start at
/// 85% (the map of 1,000,000 fields in the core's timing runs). The index costs 5.4 to 6.4
/// bytes per field at this load (a resize grows it by 3/16), about 0.8 more than at 85%.
pub(super) const MAX_LOAD_PCT: usize = 75;
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
/// then 3/16 more pages (at least one).
fn grown(cap: usize) -> usize {
    if cap < SMALL_CAP {
        (super::size_class(cap * 4 + 1) / 4).clamp(MIN_CAP, SMALL_CAP)
    } else {
        let pages = cap / PAGE;
        (pages + (pages * 3 / 16).max(1)) * PAGE
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

    /// Capacity for a bulk build of `n` entries.
    pub(super) fn build_cap(n: usize) -> usize {
        let cap = cap_for(n, SMALL_BUILD_LOAD_PCT);
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
            self.old.as_deref_mut().map(|o| &mut o.t)
        } else {
            Some(&mut self.cur)
        };
        if let Some(t) = t {
            t.set(pos.slot, (addr + 1) as u32);
        }
    }

    /// Inserts address `addr` of an entry of hash `h` (not in the index). Returns the slots
    /// moved.
    pub(super) fn insert(&mut self, h: u64, addr: usize, arena: &Arena) -> usize {
        let v = (addr + 1) as u32;
        let (old, start) = self.route(h);
        match (old, self.old.as_deref_mut()) {
            (true, Some(o)) => o.t.place(h, v, start, false, arena),
            _ => self.cur.place(h, v, start, false, arena),
        }
    }

    /// Removes the entry at `pos`. Returns the slots moved.
    pub(super) fn remove(&mut self, pos: Pos, arena: &Arena) -> usize {
        match (pos.old, self.old.as_deref_mut()) {
            (true, Some(o)) => o.t.remove(pos.slot, o.sweep, arena),
            _ => self.cur.remove(pos.slot, 0, arena),
        }
    }

    /// Points the slot holding address `old` (an entry of hash `h`) at `new`; false when no
    /// slot holds it.
    pub(super) fn relocate(&mut self, h: u64, old: usize, new: usize) -> bool {
        let (in_old, start) = self.route(h);
        let t = if in_old {
            match self.old.as_deref_mut() {
                Some(o) => &mut o.t,
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
    /// Returns the slots a small table's resize moved at once.
    pub(super) fn grow_for(&mut self, len: usize, arena: &Arena) -> usize {
        if self.old.is_none() && len > max_load(self.cur.buckets(), self.cur.cap()) {
            let mut cap = grown(self.cur.cap());
            while max_load(cap - tail(cap), cap) < len {
                cap = grown(cap);
            }
            return self.resize(cap, arena);
        }
        0
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
        }));
        if small {
            // One page to another (at most SMALL_CAP slots, well under a millisecond): at once,
            // so that a small map never holds two tables.
            return self.sweep(old_cap, arena);
        }
        0
    }

    /// Slots the sweep must visit per insert so that it ends before `len` entries pass the
    /// current table's load: the rest over the inserts left, at least `min`.
    pub(super) fn sweep_rate(&self, len: usize, min: usize) -> usize {
        let Some(o) = self.old.as_deref() else {
            return 0;
        };
        let rest = o.t.cap().saturating_sub(o.sweep);
        match max_load(self.cur.buckets(), self.cur.cap()).checked_sub(len) {
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
        let hash_at = |t: &Table, i: usize| -> Option<u64> {
            let s = t.get(i);
            (s != 0).then(|| arena.entry(s as usize - 1).map_or(0, |e| hash(e.name)))
        };
        // The entries about to move are all over the arena: their loads are started together
        // instead of one after the other.
        for i in o.sweep..(o.sweep + budget + 1).min(o.t.cap()) {
            let s = o.t.get(i);
            if s != 0 {
                arena.prefetch(s as usize - 1);
            }
        }
        let mut spent = 0;
        let mut last: Option<u64> = None;
        while o.sweep < o.t.cap() {
            let h = hash_at(&o.t, o.sweep);
            // Past the budget only for the entries that share the last one's hash.
            if spent >= budget && (h.is_none() || h != last) {
                break;
            }
            if let Some(h) = h {
                let s = o.t.get(o.sweep);
                let home = self.cur.home(h);
                self.cur.place(h, s, home, true, arena);
                o.t.set(o.sweep, 0);
                last = Some(h);
            }
            o.sweep += 1;
            o.t.free_before(o.sweep);
            spent += 1;
        }
        let finished = match last {
            // The largest hash moved: nothing is left in the old table (its entries all had
            // it, and they were contiguous), and no split can be above it.
            Some(u64::MAX) => true,
            Some(h) => {
                o.split = h + 1;
                o.sweep >= o.t.cap()
            }
            None => o.sweep >= o.t.cap(),
        };
        if finished {
            self.old = None;
        }
        spent
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
            // In the current table during a resize, nothing lives past the split's home
            // cluster.
            let end_home = below.map(|s| t.home(s));
            let mut i = start;
            while i < t.cap() {
                let s = t.get(i);
                if s == 0 {
                    if end_home.is_some_and(|e| i >= e) {
                        break;
                    }
                    empties += 1;
                    if empties > empty_budget {
                        // Every entry homed at or before i sits before it (i is empty): go on
                        // from the first hash homed after it.
                        let next = first_hash_of(i + 1, t.buckets());
                        match (next, below) {
                            (Some(n), Some(b)) => return n.min(b),
                            (Some(n), None) => return n,
                            // This table is done.
                            (None, Some(b)) => return b,
                            (None, None) => break,
                        }
                    }
                    i += 1;
                    continue;
                }
                let h = arena.entry(s as usize - 1).map_or(0, |e| hash(e.name));
                if h >= from && out(s, h) {
                    return h;
                }
                i += 1;
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
