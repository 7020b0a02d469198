//! The sequence map, Redis-free: many named sequences in one value, each with exactly the
//! rules of [`Seq`] (the SEQ.H* commands apply them; this file only stores the states).
//!
//! Its two rules: O(1) access in little memory (a counter with a 10-byte name and a value below
//! 2^32 costs 21 to 24 bytes, see docs/operations.md, "Sequence maps"), and no call ever does
//! work in proportion to the whole map: growth and compaction run a bounded step per write
//! ([`SeqMap::step`]), and whatever reads the whole map reads it in any intermediate state.
//!
//! The pieces: the entries in `arena`, their index in `index` ([`SeqMap`] says how the two are
//! laid out), a write of many fields in [`Batch`]. The hash ([`crate::core::hash`]) is keyed
//! per process, so a client cannot choose field names that collide, and cursors hold within
//! one process (a restarted server starts a new iteration).

mod arena;
mod index;

use crate::core::hash::hash;
use crate::core::seq::{Seq, MAX_VALUE};
pub use arena::size_class;
use arena::{entry_size, heap, width_code, Arena, WIDTH_BITS};
use index::{Index, Pos};

/// Longest field name.
pub const MAX_NAME: usize = 256;

/// How many fields ahead a write of many fields starts loading what their probes read.
const PREFETCH_AHEAD: usize = 8;

/// Index slots a write sweeps at least while the index resizes.
pub const SWEEP_STEP: usize = 8;
/// Compaction work units a write spends while compaction is due (a chunk or entry visited is
/// one, an entry moved four: at most eight entries moved).
pub const COMPACT_STEP: usize = 32;

/// Why a write to the map was refused. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// The field name is empty or longer than [`MAX_NAME`] bytes.
    Name,
    /// The map's entries would pass 4 GiB.
    Full,
}

/// The IDMP token window of a map (`core::idmp`; SEQ.HNEXT ... IDMP). A map that never used
/// IDMP holds `None`: one word, no allocation.
pub type Tokens = crate::core::idmp::Window;

/// One map. Its layout, chosen for memory with O(1) access, and so that no call ever does work
/// in proportion to the whole map:
///
/// - the arena (`arena`): the entries back to back in chunks of at most 16 KiB. An entry is a
///   header byte (the value's width, the never-reissue mark, dead), the name's length, the
///   name, the value in 1, 2, 4 or 8 bytes. A value that outgrows its width moves the entry to
///   the end and leaves the old one dead; dead bytes are reclaimed chunk by chunk, a few entries
///   per write, once they pass a quarter of the arena.
/// - the index (`index`): an open-addressing table of entry addresses with linear probing, in
///   pages of 4 KiB, its slots kept in the order of the entries' 64-bit hashes. It grows by half
///   (and shrinks) incrementally, as Redis's dict rehashes: a new table is filled from the old
///   one a few slots per write, fast enough to end before the old one passes 90% full. At every
///   moment the entries below a hash `split` are in the new table and the rest in the old one,
///   both in hash order, so a lookup needs one probe (an insert's stops at the first entry
///   hashed above its own) and [`SeqMap::scan`] can use "the next hash to return" as a cursor
///   that survives growth, deletes and compaction. A table of at most 2,048 slots (8 KiB, about
///   1,700 fields) is one allocation, resized at once.
///
/// No allocation is ever reallocated above 16 KiB (a chunk) except the two directories (32
/// bytes per 16 KiB chunk, 16 per 4 KiB page). Everything that reads the whole map (RDB, DUMP,
/// AOF rewrite, digest, HGETALL) reads it in any of the intermediate states of
/// [`SeqMap::step`]'s background work.
#[derive(Debug, Default)]
pub struct SeqMap {
    arena: Arena,
    index: Index,
    len: usize,
    /// IDMP tokens (see [`Tokens`]).
    pub tokens: Option<Box<Tokens>>,
    /// The map is in the server's queue of maps with background work left (a cron finishes
    /// it for a map no write reaches); kept here so that a write adds it once.
    pub queued: bool,
    /// The background work done since the last [`SeqMap::take_work`] (tests).
    #[cfg(test)]
    work: Work,
}

/// Background work (tests): index slots swept, compaction units, cluster slots shifted, and
/// slots of a small table (at most `index::SMALL_CAP`) resized at once.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub sweep: usize,
    pub compact: usize,
    pub shift: usize,
    pub at_once: usize,
}

/// Checks a field name's length.
pub fn check_name(name: &[u8]) -> Result<(), MapError> {
    if name.is_empty() || name.len() > MAX_NAME {
        Err(MapError::Name)
    } else {
        Ok(())
    }
}

impl SeqMap {
    pub fn new() -> SeqMap {
        SeqMap::default()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The state of `name`, or `None` when the field is missing.
    pub fn get(&self, name: &[u8]) -> Option<Seq> {
        let pos = self.index.find(name, hash(name), &self.arena)?;
        self.state_at(pos)
    }

    fn state_at(&self, pos: Pos) -> Option<Seq> {
        match self.index.get(pos) {
            0 => None,
            s => self.arena.entry(s as usize - 1).map(|e| e.seq()),
        }
    }

    /// Where `name` is (or would go): one hash and one probe, for a read followed by a write of
    /// the same field ([`SeqMap::state`], then [`SeqMap::store`]) with no change in between.
    pub fn locate(&self, name: &[u8]) -> Located {
        let hash = hash(name);
        Located {
            hash,
            pos: self.index.find(name, hash, &self.arena),
        }
    }

    /// The state of a located field, or `None` when it is missing.
    pub fn state(&self, at: &Located) -> Option<Seq> {
        at.pos.and_then(|p| self.state_at(p))
    }

    /// [`SeqMap::set`] at a place [`SeqMap::locate`] found for `name` in this map, unchanged
    /// since.
    pub fn store(&mut self, name: &[u8], at: Located, s: Seq) -> Result<bool, MapError> {
        check_name(name)?;
        self.write(name, at.hash, at.pos, s)
    }

    /// Stores `s` as the state of `name`. `Ok(true)` when the field was added.
    pub fn set(&mut self, name: &[u8], s: Seq) -> Result<bool, MapError> {
        check_name(name)?;
        let h = hash(name);
        match self.index.probe(name, h, &self.arena) {
            Ok(p) => self.write(name, h, Some(p), s),
            Err(at) => self.add(name, h, at, s).map(|()| true),
        }
    }

    /// Stores `s` as the state of `name`, whose [`hash`] is `h` (a caller that hashed the
    /// name already, as SEQ.HSET to find its repeated fields), unless the field holds `s`
    /// already (nothing is done then, no background step either). Returns the state before,
    /// `None` when the field was added.
    pub fn put(&mut self, name: &[u8], h: u64, s: Seq) -> Result<Option<Seq>, MapError> {
        check_name(name)?;
        match self.index.probe(name, h, &self.arena) {
            Ok(p) => {
                let old = self.state_at(p).unwrap_or_default();
                if old != s {
                    self.write(name, h, Some(p), s)?;
                }
                Ok(Some(old))
            }
            Err(at) => self.add(name, h, at, s).map(|()| None),
        }
    }

    fn write(&mut self, name: &[u8], h: u64, pos: Option<Pos>, s: Seq) -> Result<bool, MapError> {
        match pos {
            Some(p) => {
                self.update(p, name, s)?;
                self.finish_write(SWEEP_STEP);
                Ok(false)
            }
            None => self.add(name, h, None, s).map(|()| true),
        }
    }

    /// Inserts `name` (not in the map), at `at` when [`Index::probe`] found its slot; then the
    /// background step of an insert.
    fn add(&mut self, name: &[u8], h: u64, at: Option<Pos>, s: Seq) -> Result<(), MapError> {
        self.insert(name, h, at, s)?;
        let rate = self.index.sweep_rate(self.len, SWEEP_STEP);
        self.finish_write(rate);
        Ok(())
    }

    /// Whether adding `bytes` of entries could fail (callers check a whole batch first, so
    /// that it is all or nothing).
    pub fn fits(&self, bytes: usize) -> bool {
        self.arena.fits(bytes)
    }

    /// Bytes an entry for `name` with value `v` takes (for [`SeqMap::fits`]).
    pub fn entry_bytes(name: &[u8], v: u64) -> usize {
        entry_size(name.len(), width_code(v))
    }

    /// Writes every field of `batch` (SEQ.HSET), all or nothing: the whole write is checked to
    /// fit before the first field is set.
    pub fn set_batch(&mut self, batch: &Batch) -> Result<Written, MapError> {
        if !self.fits(batch.bytes) {
            // Near the 4 GiB limit only: the bytes of the fields that are new, exactly.
            let new: usize = batch
                .fields
                .iter()
                .filter(|f| self.index.probe(f.name, f.hash, &self.arena).is_err())
                .map(|f| SeqMap::entry_bytes(f.name, f.state.value()))
                .sum();
            if !self.fits(new) {
                return Err(MapError::Full);
            }
        }
        let mut w = Written::default();
        // A big map's index and entries are mostly out of the CPU's caches: the loads of the
        // fields ahead are started early (a slot PREFETCH_AHEAD fields ahead, the entries it
        // points at half as far ahead), so that they overlap instead of waiting in turn.
        let ahead = |i: usize| batch.fields.get(i).map(|f| f.hash);
        for (i, f) in batch.fields.iter().enumerate() {
            if let Some(h) = ahead(i + PREFETCH_AHEAD) {
                self.index.prefetch(h, false, &self.arena);
            }
            if let Some(h) = ahead(i + PREFETCH_AHEAD / 2) {
                self.index.prefetch(h, true, &self.arena);
            }
            let old = self.put(f.name, f.hash, f.state)?;
            w.note(old, f.state);
        }
        Ok(w)
    }

    /// A map holding `batch`'s fields (SEQ.HSET of a missing key), built at once as an RDB load
    /// builds one: the index laid out in one pass instead of grown through every resize.
    pub fn from_batch(batch: &Batch) -> Result<(SeqMap, Written), MapError> {
        let fields = batch.fields.iter().map(|f| (f.name, f.hash, f.state));
        let m = SeqMap::build_hashed(fields, batch.fields.len(), true).map_err(|e| match e {
            BuildError::Name => MapError::Name,
            // The batch has no repeated name; should it, the map would be wrong: refused.
            BuildError::Full | BuildError::Duplicate(_) => MapError::Full,
        })?;
        let mut w = Written::default();
        for f in &batch.fields {
            w.note(None, f.state);
        }
        Ok((m, w))
    }

    fn update(&mut self, pos: Pos, name: &[u8], s: Seq) -> Result<(), MapError> {
        let addr = match self.index.get(pos) {
            0 => return Ok(()),
            slot => slot as usize - 1,
        };
        let Some((wc, size)) = self
            .arena
            .entry(addr)
            .map(|e| (e.header & WIDTH_BITS, e.size))
        else {
            return Ok(());
        };
        if width_code(s.value()) <= wc {
            self.arena.write_value(addr, name.len(), wc, s);
            return Ok(());
        }
        // Wider: the entry moves to the end, the old one dies.
        let new = self
            .arena
            .append(name, s, width_code(s.value()))
            .ok_or(MapError::Full)?;
        self.index.set(pos, new);
        self.arena.kill(addr, size);
        Ok(())
    }

    fn insert(&mut self, name: &[u8], h: u64, at: Option<Pos>, s: Seq) -> Result<(), MapError> {
        let wc = width_code(s.value());
        if !self.arena.fits(entry_size(name.len(), wc)) {
            return Err(MapError::Full);
        }
        let grown = self.index.grow_for(self.len + 1, &self.arena);
        #[cfg(test)]
        {
            self.work.at_once += grown.unwrap_or(0);
        }
        let addr = self.arena.append(name, s, wc).ok_or(MapError::Full)?;
        // A resize moved every slot: the place found before it no longer holds.
        let _shifted = match (grown, at) {
            (None, Some(at)) => self.index.insert_at(h, addr, at, &self.arena),
            _ => self.index.insert(h, addr, &self.arena),
        };
        #[cfg(test)]
        {
            self.work.shift += _shifted;
        }
        self.len += 1;
        Ok(())
    }

    /// Removes `name`; whether it was there.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        let Some(pos) = self.index.find(name, hash(name), &self.arena) else {
            return false;
        };
        let addr = match self.index.get(pos) {
            0 => return false,
            s => s as usize - 1,
        };
        let size = self.arena.entry(addr).map_or(0, |e| e.size);
        let _shifted = self.index.remove(pos, &self.arena);
        #[cfg(test)]
        {
            self.work.shift += _shifted;
        }
        self.arena.kill(addr, size);
        self.len -= 1;
        if self.len == 0 {
            // Everything goes at once: by now a handful of chunks and pages (deletes shrink the
            // index and free dead chunks as they go).
            *self = SeqMap {
                tokens: self.tokens.take(),
                ..SeqMap::default()
            };
        } else {
            let _at_once = self.index.shrink_for(self.len, &self.arena);
            #[cfg(test)]
            {
                self.work.at_once += _at_once;
            }
            self.finish_write(SWEEP_STEP);
        }
        true
    }

    /// The bounded step every write ends with: `sweep` index slots while the index resizes,
    /// [`COMPACT_STEP`] units of compaction while it is due.
    #[inline]
    fn finish_write(&mut self, sweep: usize) {
        if self.index.resizing() || self.arena.compaction_due() {
            self.step_parts(sweep, COMPACT_STEP);
        }
    }

    #[inline(never)]
    fn step_parts(&mut self, sweep: usize, compact: usize) {
        let _swept = self.index.sweep(sweep, &self.arena);
        let index = &mut self.index;
        let _compacted = self
            .arena
            .compact_step(compact, |m, name| index.relocate(hash(name), m.old, m.new));
        #[cfg(test)]
        {
            self.work.sweep += _swept;
            self.work.compact += _compacted;
        }
    }

    /// One bounded step of the background work (resizing the index, compacting the arena),
    /// at most about `budget` slots and `budget` compaction units, for a map no write reaches
    /// (a timer's step). Whether work is left.
    ///
    /// Every write ends with such a bounded step too (`finish_write`), and the cron calls this
    /// one for a map nobody writes (`types::map::idle`): an insert sweeps the old table at the
    /// rate that ends the resize in time (at least [`SWEEP_STEP`] slots), any other write
    /// [`SWEEP_STEP`] slots, and each write spends [`COMPACT_STEP`] units on compaction while it
    /// is due.
    pub fn step(&mut self, budget: usize) -> bool {
        self.step_parts(budget, budget);
        self.pending()
    }

    /// Whether background work is left (see [`SeqMap::step`]).
    pub fn pending(&self) -> bool {
        self.index.resizing() || self.arena.compaction_due()
    }

    /// The background work done since the last call (tests).
    #[cfg(test)]
    pub fn take_work(&mut self) -> Work {
        std::mem::take(&mut self.work)
    }

    /// Every field in scan order (the hash order).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Seq)> + '_ {
        self.index
            .slots()
            .filter_map(|s| self.arena.entry(s as usize - 1))
            .map(|e| (e.name, e.seq()))
    }

    /// One page of a scan: the fields whose hash is at least `cursor`, in hash order, `count`
    /// of them (more when the last one's hash is shared, so a cursor never splits a hash); then
    /// the next cursor (the hash of the next field), or 0 at the end. A page may hold fewer
    /// (even none) when it passed `10 * count` (at least 100) empty slots: it then ends at an
    /// empty slot, with the first hash homed after it as the cursor. Every field present for
    /// the whole scan is returned at least once: the fields stay in hash order through growth,
    /// deletes and compaction, and a page ends before the cursor it hands out. The next cursor
    /// is never 0 otherwise, since it is above a hash just visited.
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut out: impl FnMut(&'a [u8], Seq),
    ) -> u64 {
        let count = count.max(1);
        let mut n = 0usize;
        let mut last: Option<u64> = None;
        let arena = &self.arena;
        self.index
            .scan(cursor, count.saturating_mul(10).max(100), arena, |s, h| {
                if n >= count && last != Some(h) {
                    return true;
                }
                if let Some(e) = arena.entry(s as usize - 1) {
                    out(e.name, e.seq());
                }
                n += 1;
                last = Some(h);
                false
            })
    }

    /// Bytes this map holds on the heap (its chunks, pages and their directories, the token
    /// window's box) plus the map itself, which the caller boxes. Allocations are sized to the
    /// allocator's size classes (jemalloc: four per doubling), so that this reports the bytes
    /// `used_memory` counts.
    pub fn mem_usage(&self) -> usize {
        heap(std::mem::size_of::<SeqMap>())
            + self.arena.heap_bytes()
            + self.index.heap_bytes()
            + self
                .tokens
                .as_ref()
                .map_or(0, |t| heap(std::mem::size_of::<Tokens>()) + t.heap_bytes())
    }

    /// A copy sized like a freshly loaded map.
    pub fn duplicate(&self) -> SeqMap {
        let mut m = SeqMap::build(self.iter(), self.len).unwrap_or_default();
        m.tokens.clone_from(&self.tokens);
        m
    }

    /// Builds a map from distinct fields (`hint` of them, for sizing): the arena at once, the
    /// index by sorting on the hash. A repeated name is refused (`Err` with it).
    pub fn build<'a>(
        fields: impl Iterator<Item = (&'a [u8], Seq)>,
        hint: usize,
    ) -> Result<SeqMap, BuildError> {
        SeqMap::build_hashed(fields.map(|(name, s)| (name, hash(name), s)), hint, false)
    }

    /// [`SeqMap::build`] from fields whose [`hash`] is known; `as_grown`: see
    /// [`Index::build_cap`].
    fn build_hashed<'a>(
        fields: impl Iterator<Item = (&'a [u8], u64, Seq)>,
        hint: usize,
        as_grown: bool,
    ) -> Result<SeqMap, BuildError> {
        let mut arena = Arena::default();
        let mut order: Vec<(u64, u32)> = Vec::with_capacity(hint);
        for (name, h, s) in fields {
            check_name(name).map_err(|_| BuildError::Name)?;
            let addr = arena
                .append_bulk(name, s, width_code(s.value()))
                .ok_or(BuildError::Full)?;
            order.push((h, (addr + 1) as u32));
        }
        arena.trim_tail();
        order.sort_unstable();
        // Equal hashes sit together: a repeated name is among them.
        let mut i = 0;
        while i < order.len() {
            let h = order.get(i).map_or(0, |p| p.0);
            let mut j = i + 1;
            while order.get(j).is_some_and(|p| p.0 == h) {
                j += 1;
            }
            if j - i > 1 {
                let names: Vec<&[u8]> = order
                    .get(i..j)
                    .unwrap_or(&[])
                    .iter()
                    .filter_map(|&(_, s)| arena.entry(s as usize - 1).map(|e| e.name))
                    .collect();
                for (a, x) in names.iter().enumerate() {
                    if names.iter().skip(a + 1).any(|y| y == x) {
                        return Err(BuildError::Duplicate(x.to_vec()));
                    }
                }
            }
            i = j;
        }
        let len = order.len();
        if len == 0 {
            return Ok(SeqMap::default());
        }
        // Placed in hash order: each at its home or right after the one before.
        let mut cap = Index::build_cap(len, as_grown);
        let index = loop {
            if let Some(index) = Index::build(cap, &order) {
                break index;
            }
            cap = Index::next_cap(cap);
        };
        Ok(SeqMap {
            arena,
            index,
            len,
            ..SeqMap::default()
        })
    }
    /// The fields as an RDB blob: per field, the name's length minus one (a byte), the name,
    /// the value as LEB128 (at most 9 bytes). Marks are not saved: a loaded field is always
    /// marked. [`SeqMap::decode`] reads it back.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.arena.used() - self.arena.dead() + self.len);
        for (name, s) in self.iter() {
            out.push(u8::try_from(name.len() - 1).unwrap_or(u8::MAX));
            out.extend_from_slice(name);
            let mut v = s.value();
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    out.push(b);
                    break;
                }
                out.push(b | 0x80);
            }
        }
        out
    }

    /// Reads [`SeqMap::encode`]'s blob holding exactly `count` fields, every field marked
    /// (`mark`). Refuses anything else: a short or long blob, a value above 2^63-1 or encoded
    /// in more than 9 bytes, a repeated name.
    pub fn decode(blob: &[u8], count: u64, mark: bool) -> Result<SeqMap, String> {
        // At least 3 bytes a field: a count the blob cannot hold is refused before any
        // allocation sized by it.
        if count.saturating_mul(3) > blob.len() as u64 {
            return Err(format!(
                "sequence map of {count} fields in a blob of {} bytes",
                blob.len()
            ));
        }
        let mut fields: Vec<(&[u8], Seq)> = Vec::with_capacity(count as usize);
        let mut rest = blob;
        for k in 0..count {
            let (&l, r) = rest
                .split_first()
                .ok_or_else(|| format!("sequence map field {k} truncated"))?;
            let len = usize::from(l) + 1;
            let name = r
                .get(..len)
                .ok_or_else(|| format!("sequence map field {k} truncated"))?;
            let mut r = r.get(len..).unwrap_or(&[]);
            let mut v: u64 = 0;
            let mut shift = 0u32;
            loop {
                let (&b, t) = r
                    .split_first()
                    .ok_or_else(|| format!("sequence map value {k} truncated"))?;
                r = t;
                if shift > 56 {
                    return Err(format!("sequence map value {k} longer than 9 bytes"));
                }
                v |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            let s = Seq::new(v, mark)
                .filter(|_| v <= MAX_VALUE)
                .ok_or_else(|| format!("sequence map value {v} above {MAX_VALUE}"))?;
            fields.push((name, s));
            rest = r;
        }
        if !rest.is_empty() {
            return Err(format!(
                "sequence map blob has {} bytes after its {count} fields",
                rest.len()
            ));
        }
        SeqMap::build(fields.into_iter(), count as usize).map_err(|e| match e {
            BuildError::Duplicate(n) => format!(
                "sequence map field {:?} appears twice",
                String::from_utf8_lossy(&n)
            ),
            BuildError::Name => "sequence map field name out of range".to_owned(),
            BuildError::Full => "sequence map above 4 GiB".to_owned(),
        })
    }

    /// Checks the structure's invariants (tests): the arena's bookkeeping, the index's order
    /// and clusters, and that the index holds exactly the live entries, once each.
    #[cfg(test)]
    pub fn check(&self) {
        self.arena.check();
        let slots = self.index.check(&self.arena);
        assert_eq!(slots.len(), self.len);
        let mut indexed: Vec<usize> = slots.iter().map(|&s| s as usize - 1).collect();
        indexed.sort_unstable();
        let live = self.arena.live_addresses();
        assert_eq!(indexed, live, "index and live entries");
    }

    /// How far a resize of the index and a compaction pass are, each 0 to 1 (tests).
    #[cfg(test)]
    pub fn progress(&self) -> (Option<f64>, Option<f64>) {
        (
            self.index.resize_progress(),
            self.arena.compaction_progress(),
        )
    }

    /// Whether the index is being resized and the arena compacted (tests).
    #[cfg(test)]
    pub fn phase(&self) -> (bool, bool) {
        (self.index.resizing(), self.arena.compaction_due())
    }
}

/// The fields of one write of many (SEQ.HSET), each name hashed once. A name given more than
/// once is written once, at its first place, with its last state (as HSET does). A missing
/// key's map is built from it at once, as an RDB load builds one ([`SeqMap::from_batch`]); an
/// existing map takes its fields one by one, loading what the probes of the fields ahead will
/// read while it writes the current one ([`SeqMap::set_batch`]).
#[derive(Debug, Default)]
pub struct Batch<'a> {
    fields: Vec<BatchField<'a>>,
    /// Bytes the fields' entries would take were they all new (see [`SeqMap::fits`]).
    bytes: usize,
}

#[derive(Debug)]
struct BatchField<'a> {
    name: &'a [u8],
    hash: u64,
    state: Seq,
}

impl<'a> Batch<'a> {
    /// The batch of `pairs` (names already checked, see [`check_name`]). A repeated name is
    /// found through a table of the pairs' hashes, so no name is hashed twice.
    pub fn new(pairs: impl ExactSizeIterator<Item = (&'a [u8], Seq)>) -> Batch<'a> {
        let n = pairs.len();
        let mut fields: Vec<BatchField<'a>> = Vec::with_capacity(n);
        // Open addressing over the low bits of the hashes (the map's index uses the high
        // ones): each slot the position in `fields` plus one. Not needed for one pair.
        let mut seen: Vec<u32> = if n > 1 {
            vec![0; (2 * n).next_power_of_two()]
        } else {
            Vec::new()
        };
        let mask = seen.len().wrapping_sub(1);
        for (name, state) in pairs {
            let h = hash(name);
            let mut slot = h as usize & mask;
            let repeated = loop {
                match seen.get(slot).copied() {
                    Some(0) => {
                        if let Some(s) = seen.get_mut(slot) {
                            *s = fields.len() as u32 + 1;
                        }
                        break None;
                    }
                    Some(i) => {
                        let i = i as usize - 1;
                        if fields.get(i).is_some_and(|f| f.hash == h && f.name == name) {
                            break Some(i);
                        }
                        slot = (slot + 1) & mask;
                    }
                    None => break None,
                }
            };
            match repeated.and_then(|i| fields.get_mut(i)) {
                Some(f) => f.state = state,
                None => fields.push(BatchField {
                    name,
                    hash: h,
                    state,
                }),
            }
        }
        let bytes = fields
            .iter()
            .map(|f| SeqMap::entry_bytes(f.name, f.state.value()))
            .sum();
        Batch { fields, bytes }
    }

    /// Distinct names.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// What a batch write did: the fields added, whether anything changed (a value or a mark), and
/// by how much the values rose in all (a missing field counts from 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub added: u64,
    pub changed: bool,
    pub raised: u64,
}

impl Written {
    fn note(&mut self, old: Option<Seq>, new: Seq) {
        let before = old.map_or(0, Seq::value);
        self.raised = self
            .raised
            .saturating_add(new.value().saturating_sub(before));
        match old {
            Some(o) => self.changed |= o != new,
            None => {
                self.added += 1;
                self.changed = true;
            }
        }
    }
}

/// A field's place in a map, from [`SeqMap::locate`]: valid until the map changes.
#[derive(Clone, Copy, Debug)]
pub struct Located {
    hash: u64,
    pos: Option<Pos>,
}

/// Why [`SeqMap::build`] refused its fields.
#[derive(Debug, PartialEq, Eq)]
pub enum BuildError {
    Duplicate(Vec<u8>),
    Name,
    Full,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    fn seq(v: u64, m: bool) -> Seq {
        Seq::new(v, m).unwrap()
    }

    #[test]
    fn size_classes() {
        let cases = [
            (1, 8),
            (9, 16),
            (17, 32),
            (128, 128),
            (129, 160),
            (160, 160),
            (161, 192),
            (257, 320),
            (4097, 5120),
            (1 << 20, 1 << 20),
            ((1 << 20) + 1, (1 << 20) + (1 << 18)),
        ];
        for (b, want) in cases {
            assert_eq!(size_class(b), want, "{b}");
        }
    }

    #[test]
    fn set_get_widen_remove() {
        let mut m = SeqMap::new();
        assert_eq!(m.get(b"a"), None);
        assert_eq!(m.set(b"a", seq(5, false)), Ok(true));
        assert_eq!(m.set(b"a", seq(300, true)), Ok(false));
        assert_eq!(m.get(b"a"), Some(seq(300, true)));
        assert_eq!(m.set(b"a", seq(MAX_VALUE, false)), Ok(false));
        assert_eq!(m.get(b"a"), Some(seq(MAX_VALUE, false)));
        assert_eq!(m.set(b"a", seq(1, false)), Ok(false));
        assert_eq!(m.get(b"a"), Some(seq(1, false)));
        assert_eq!(m.set(b"", seq(1, false)), Err(MapError::Name));
        assert_eq!(m.set(&[7u8; 257], seq(1, false)), Err(MapError::Name));
        assert_eq!(m.set(&[7u8; 256], seq(1, false)), Ok(true));
        assert_eq!(m.len(), 2);
        m.check();
        assert!(m.remove(b"a"));
        assert!(!m.remove(b"a"));
        assert_eq!(m.get(b"a"), None);
        assert!(m.remove(&[7u8; 256]));
        assert!(m.is_empty());
        m.check();
    }

    /// 10-byte names and values below 2^32, as the memory figures of docs/operations.md.
    fn counter(i: u32) -> (String, Seq) {
        (
            format!("u{i:09}"),
            seq(u64::from(i) * 4000 % (1 << 32), false),
        )
    }

    /// Memory per field at every size from 10,000 to 1,000,000 fields while a map grows by
    /// single inserts (so through every resize and its intermediate states), then after a
    /// build (an RDB load): at most 24 bytes.
    #[test]
    fn memory_per_field_through_growth() {
        let mut m = SeqMap::new();
        let mut worst: (f64, u32) = (0.0, 0);
        let mut resizing_seen = 0;
        for i in 0..1_000_000u32 {
            let (name, s) = counter(i);
            m.set(name.as_bytes(), s).unwrap();
            let n = i + 1;
            if n >= 10_000 {
                let per = m.mem_usage() as f64 / f64::from(n);
                if per > worst.0 {
                    worst = (per, n);
                }
                resizing_seen += usize::from(m.phase().0);
            }
        }
        eprintln!(
            "worst {:.2} B/field at {} fields; {resizing_seen} inserts found a resize under way",
            worst.0, worst.1
        );
        assert!(worst.0 <= 24.0, "{worst:?}");
        assert!(resizing_seen > 1000);
        m.check();
        for i in (0..1_000_000).step_by(97) {
            let (name, s) = counter(i);
            assert_eq!(m.get(name.as_bytes()), Some(s));
        }
        let built = m.duplicate();
        built.check();
        let per = built.mem_usage() as f64 / 1e6;
        eprintln!("built: {per:.2} B/field");
        assert!(per <= 24.0);
    }

    /// A batch keeps each name once, at its first place, with its last state; a write of it
    /// says what it added, whether anything changed (a value or a mark) and how far the values
    /// rose, as the same writes one by one would, and leaves the same map.
    #[test]
    fn batches_write_as_their_fields_one_by_one() {
        let pairs: Vec<(&[u8], Seq)> = vec![
            (b"a", seq(5, false)),
            (b"b", seq(7, false)),
            (b"a", seq(3, false)),
            (b"c", seq(1 << 40, true)),
            (b"b", seq(9, false)),
        ];
        let b = Batch::new(pairs.into_iter());
        let names: Vec<&[u8]> = b.fields.iter().map(|f| f.name).collect();
        assert_eq!(names, [&b"a"[..], b"b", b"c"]);
        assert_eq!(b.fields[0].state, seq(3, false));
        assert_eq!(b.fields[1].state, seq(9, false));
        assert_eq!(b.len(), 3);
        // Into a missing key (built at once) and into an empty map (field by field): the same.
        let (built, w) = SeqMap::from_batch(&b).unwrap();
        let mut grown = SeqMap::new();
        assert_eq!(grown.set_batch(&b).unwrap(), w);
        assert_eq!(
            w,
            Written {
                added: 3,
                changed: true,
                raised: 3 + 9 + (1 << 40)
            }
        );
        built.check();
        grown.check();
        for (n, s) in grown.iter() {
            assert_eq!(built.get(n), Some(s));
        }
        assert_eq!(built.len(), 3);
        // Again with one value higher, one lower, one the same: 2 changed, raised by the one.
        let again: Vec<(&[u8], Seq)> = vec![
            (b"a", seq(4, false)),
            (b"b", seq(2, false)),
            (b"c", seq(1 << 40, true)),
        ];
        let w = grown.set_batch(&Batch::new(again.into_iter())).unwrap();
        assert_eq!(
            w,
            Written {
                added: 0,
                changed: true,
                raised: 1
            }
        );
        // Nothing different: nothing changed (the caller then replicates and signals nothing).
        let same: Vec<(&[u8], Seq)> = vec![(b"a", seq(4, false)), (b"c", seq(1 << 40, true))];
        let w = grown.set_batch(&Batch::new(same.into_iter())).unwrap();
        assert_eq!(w, Written::default());
        // Only the mark differs: a change, no rise.
        let mark: Vec<(&[u8], Seq)> = vec![(b"a", seq(4, true))];
        let w = grown.set_batch(&Batch::new(mark.into_iter())).unwrap();
        assert_eq!(
            w,
            Written {
                added: 0,
                changed: true,
                raised: 0
            }
        );
        assert_eq!(grown.get(b"a"), Some(seq(4, true)));
        grown.check();
    }

    /// Many names, some given twice, into maps big enough for incremental resizes: each map
    /// against a model, and a map built from a batch costs no more memory than the same fields
    /// set one at a time.
    #[test]
    fn big_batches_into_growing_maps() {
        let mut m = SeqMap::new();
        let mut model: HashMap<Vec<u8>, Seq> = HashMap::new();
        for round in 0..40u32 {
            let owned: Vec<(Vec<u8>, Seq)> = (0..2_000u32)
                .map(|i| {
                    // every 7th name repeats one of this round's earlier ones
                    let k = if i % 7 == 6 { i - 3 } else { i };
                    (
                        format!("n:{round}:{k}").into_bytes(),
                        seq(u64::from(round * 10_000 + i), false),
                    )
                })
                .collect();
            for (n, s) in &owned {
                model.insert(n.clone(), *s);
            }
            let b = Batch::new(owned.iter().map(|(n, s)| (n.as_slice(), *s)));
            let w = m.set_batch(&b).unwrap();
            assert_eq!(w.added as usize, b.len());
            if round % 8 == 0 {
                m.check();
            }
        }
        m.check();
        assert_eq!(m.len(), model.len());
        for (n, s) in &model {
            assert_eq!(m.get(n), Some(*s));
        }
        for fields in [1u32, 100, 1_000, 1_700, 5_000] {
            let owned: Vec<(Vec<u8>, Seq)> = (0..fields)
                .map(|i| (format!("u{i:09}").into_bytes(), seq(u64::from(i), false)))
                .collect();
            let b = Batch::new(owned.iter().map(|(n, s)| (n.as_slice(), *s)));
            let (built, _) = SeqMap::from_batch(&b).unwrap();
            built.check();
            let mut one_by_one = SeqMap::new();
            for (n, s) in &owned {
                one_by_one.set(n, *s).unwrap();
            }
            assert!(
                built.mem_usage() <= one_by_one.mem_usage(),
                "{fields} fields: built {} grown {}",
                built.mem_usage(),
                one_by_one.mem_usage()
            );
        }
    }

    #[test]
    fn locate_then_store_is_set() {
        let mut m = SeqMap::new();
        for i in 0..5000u64 {
            let name = format!("l{i}");
            let at = m.locate(name.as_bytes());
            assert_eq!(m.state(&at), None);
            assert_eq!(m.store(name.as_bytes(), at, seq(i, false)), Ok(true));
            let at = m.locate(name.as_bytes());
            assert_eq!(m.state(&at), Some(seq(i, false)));
            assert_eq!(m.store(name.as_bytes(), at, seq(i << 33, true)), Ok(false));
            assert_eq!(m.get(name.as_bytes()), Some(seq(i << 33, true)));
        }
        m.check();
        assert_eq!(m.len(), 5000);
    }

    #[test]
    fn encode_decode_roundtrip_and_refusals() {
        let mut m = SeqMap::new();
        for i in 0..1000u64 {
            m.set(format!("k{i}").as_bytes(), seq(i * i * i * i, false))
                .unwrap();
        }
        m.set(b"max", seq(MAX_VALUE, false)).unwrap();
        let blob = m.encode();
        let d = SeqMap::decode(&blob, m.len() as u64, true).unwrap();
        d.check();
        assert_eq!(d.len(), m.len());
        for (n, s) in m.iter() {
            assert_eq!(d.get(n), Some(seq(s.value(), true)));
        }
        assert!(SeqMap::decode(&blob, m.len() as u64 + 1, true).is_err());
        assert!(SeqMap::decode(&blob, m.len() as u64 - 1, true).is_err());
        assert!(SeqMap::decode(&blob[..blob.len() - 1], m.len() as u64, true).is_err());
        assert!(SeqMap::decode(&blob, u64::MAX, true).is_err());
        // a repeated field
        let dup = [0u8, b'x', 1, 0, b'x', 2];
        assert!(SeqMap::decode(&dup, 2, true).unwrap_err().contains("twice"));
        // a value above 2^63-1, and an overlong one
        let big = [
            0u8, b'x', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80,
        ];
        assert!(SeqMap::decode(&big, 1, true).is_err());
        let max = [
            0u8, b'x', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ];
        let d = SeqMap::decode(&max, 1, false).unwrap();
        assert_eq!(d.get(b"x"), Some(seq(MAX_VALUE, false)));
        assert_eq!(SeqMap::decode(&[], 0, true).unwrap().len(), 0);
    }

    /// The per-write bound: while a map grows to 300,000 fields one insert at a time, widens
    /// every value, takes bulk inserts and loses every field one remove at a time, no single
    /// write sweeps more than a few dozen index slots or spends more than one step of
    /// compaction, although the index resizes and the arena compacts many times over (a
    /// resize or compaction done whole would sweep or move in proportion to the map).
    #[test]
    fn every_write_does_bounded_background_work() {
        const N: u32 = 300_000;
        let mut m = SeqMap::new();
        let mut max = Work::default();
        let mut total = Work::default();
        let note = |w: Work, max: &mut Work, total: &mut Work| {
            max.sweep = max.sweep.max(w.sweep);
            max.compact = max.compact.max(w.compact);
            max.shift = max.shift.max(w.shift);
            max.at_once = max.at_once.max(w.at_once);
            total.sweep += w.sweep;
            total.compact += w.compact;
            total.shift += w.shift;
            total.at_once += w.at_once;
        };
        for i in 0..N {
            m.set(format!("f{i}").as_bytes(), seq(1, false)).unwrap();
            note(m.take_work(), &mut max, &mut total);
        }
        let grown = total;
        m.check();
        for i in 0..N {
            m.set(format!("f{i}").as_bytes(), seq(1_000_000, false))
                .unwrap();
            note(m.take_work(), &mut max, &mut total);
        }
        m.check();
        for i in 0..N {
            // deleted in another order than inserted: dead entries all over the chunks
            let k = (u64::from(i) * 7919 % u64::from(N)) as u32;
            assert!(m.remove(format!("f{k}").as_bytes()));
            note(m.take_work(), &mut max, &mut total);
            if i == N / 2 {
                m.check();
            }
        }
        assert!(m.is_empty());
        eprintln!("max per write {max:?}, total {total:?}, after growth {grown:?}");
        // Growth alone swept every table it left (about 3 slots per insert, the index growing
        // by half each time), and no more: growth by 3/16 swept 6 slots per insert, a cost
        // each bulk write paid (issue 37).
        assert!(grown.sweep > 2 * N as usize, "{grown:?}");
        assert!(grown.sweep < 4 * N as usize, "{grown:?}");
        assert!(total.compact > N as usize, "{total:?}");
        assert!(max.sweep <= 4 * SWEEP_STEP, "{max:?}");
        assert!(max.compact <= COMPACT_STEP + arena::MOVE_COST, "{max:?}");
        // A table of one allocation is resized at once: at most SMALL_CAP slots.
        assert!(
            max.at_once > 0 && max.at_once <= index::SMALL_CAP,
            "{max:?}"
        );
        // Cluster shifts are the probing's own, bounded by the longest cluster.
        assert!(max.shift < 5_000, "{max:?}");
    }

    /// A scan through growth, widening (compaction) and deletes that shrink the index: every
    /// field present for the whole scan is returned, while pages end in every phase.
    #[test]
    fn scan_returns_every_field_across_resizes_and_compaction() {
        let mut m = SeqMap::new();
        for i in 0..20_000u64 {
            m.set(format!("s{i}").as_bytes(), seq(i % 200, false))
                .unwrap();
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut round = 0u64;
        let mut phases = HashSet::new();
        loop {
            cursor = m.scan(cursor, 37, |n, _| {
                seen.insert(n.to_vec());
            });
            phases.insert(m.phase());
            // Between pages: new fields (growth), widened ones (compaction), and after a
            // while deletes of most of the temporary ones (the index shrinks).
            for k in 0..100u64 {
                let id = 100_000 + round * 100 + k;
                m.set(format!("t{id}").as_bytes(), seq(1, false)).unwrap();
                let w = (round * 100 + k) % 20_000;
                m.set(format!("s{w}").as_bytes(), seq(1 << 20, false))
                    .unwrap();
            }
            if round > 300 {
                for k in 0..400u64 {
                    m.remove(format!("t{}", 100_000 + (round - 300) * 400 + k).as_bytes());
                }
            }
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        m.check();
        for i in 0..20_000u64 {
            assert!(seen.contains(format!("s{i}").as_bytes()), "s{i} missed");
        }
        eprintln!("{round} pages, phases {phases:?}");
        assert!(phases.contains(&(true, false)) || phases.contains(&(true, true)));
        assert!(phases.contains(&(false, true)) || phases.contains(&(true, true)));
    }

    /// A scan of a map emptied down to a few fields (the index shrinking behind it) returns
    /// pages after a bounded walk of empty slots, and still every field.
    #[test]
    fn scan_pages_walk_boundedly_through_empty_slots() {
        let mut m = SeqMap::new();
        for i in 0..50_000u32 {
            m.set(format!("e{i}").as_bytes(), seq(1, false)).unwrap();
        }
        for i in 0..49_990u32 {
            m.remove(format!("e{i}").as_bytes());
        }
        // A resize may still be under way: its tables are sparse.
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut pages = 0;
        loop {
            cursor = m.scan(cursor, 1, |n, _| {
                seen.insert(n.to_vec());
            });
            pages += 1;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 10);
        eprintln!("{pages} pages");
    }

    /// The model: a map against a HashMap through random sets (of names short and long),
    /// removes, gets, explicit steps of background work of random size, and a scan running
    /// across all of it; the structure checked in intermediate states. The names are long
    /// enough and many enough for several chunks and index pages, so that resizes and
    /// compaction passes happen while everything else goes on.
    fn run_model(ops: Vec<(u8, u16, u64)>) -> Result<HashMap<(bool, bool), usize>, TestCaseError> {
        let mut m = SeqMap::new();
        let mut model: HashMap<Vec<u8>, Seq> = HashMap::new();
        let name = |k: u16| {
            let mut n = format!("n{k}-").into_bytes();
            n.resize(2 + usize::from(k) % 120, b'x');
            n
        };
        // The scan under way: its cursor, what it returned, the names present since it began.
        let mut cursor = 0u64;
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut whole: HashSet<Vec<u8>> = model.keys().cloned().collect();
        let mut phases: HashMap<(bool, bool), usize> = HashMap::new();
        for (i, (op, k, v)) in ops.into_iter().enumerate() {
            let n = name(k);
            match op {
                0..=3 => {
                    // values of every width (op 3: as given, the widest)
                    let shift = if op == 3 { 0 } else { k % 40 };
                    let s = seq(v >> shift, v % 2 == 0);
                    prop_assert_eq!(m.set(&n, s).unwrap(), !model.contains_key(&n));
                    model.insert(n, s);
                }
                4 | 5 => {
                    prop_assert_eq!(m.remove(&n), model.remove(&n).is_some());
                    whole.remove(&n);
                }
                6 => prop_assert_eq!(m.get(&n), model.get(&n).copied()),
                7 => {
                    m.step((v % 64) as usize);
                }
                _ => {
                    cursor = m.scan(cursor, 1 + (v % 20) as usize, |n, s| {
                        seen.insert(n.to_vec());
                        assert_eq!(model.get(n), Some(&s));
                    });
                    if cursor == 0 {
                        for n in &whole {
                            prop_assert!(seen.contains(n), "scan missed {:?}", n);
                        }
                        seen.clear();
                        whole = model.keys().cloned().collect();
                    }
                }
            }
            *phases.entry(m.phase()).or_default() += 1;
            if i % 1024 == 0 {
                m.check();
            }
        }
        m.check();
        prop_assert_eq!(m.len(), model.len());
        for (n, s) in m.iter() {
            prop_assert_eq!(model.get(n), Some(&s));
        }
        let d = m.duplicate();
        d.check();
        prop_assert_eq!(d.iter().count(), model.len());
        let blob = m.encode();
        let back = SeqMap::decode(&blob, m.len() as u64, false).unwrap();
        prop_assert_eq!(back.len(), model.len());
        while m.step(16) {}
        m.check();
        prop_assert!(!m.pending());
        Ok(phases)
    }

    /// The model over one long fixed run over 20,000 names, which must pass through many
    /// incremental resizes (the index above 2,048 slots) and compaction passes, and be checked
    /// inside them.
    #[test]
    fn model_through_every_phase() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Growth first (mostly sets), then churn, then mostly removes.
        let mut ops = Vec::new();
        for i in 0..200_000u32 {
            let r = next();
            let k = ((r >> 8) % 20_000) as u16;
            ops.push(match i {
                // growth
                0..60_000 => ([0, 1, 2, 3, 6, 6, 7, 8][(r % 8) as usize], k, r >> 24),
                // churn
                60_000..100_000 => ((r % 10) as u8, k, r >> 24),
                // new names (the index grows) between rewrites of old ones to wide values
                // (compaction): both at once
                100_000..150_000 if i % 4 == 0 => (0, 20_000 + k, r >> 24),
                100_000..150_000 => (3, k, u64::MAX >> 24),
                // removes (the index shrinks)
                _ => ([4, 5, 4, 5, 0, 6, 7, 8][(r % 8) as usize], k, r >> 24),
            });
        }
        let phases = run_model(ops).unwrap();
        eprintln!("ops per phase (resizing, compacting): {phases:?}");
        let count = |p: (bool, bool)| phases.get(&p).copied().unwrap_or(0);
        // A resize runs through about a third of a growth by half (10,925 of 200,000 ops seen).
        assert!(
            count((true, false)) + count((true, true)) > 8_000,
            "{phases:?}"
        );
        assert!(
            count((false, true)) + count((true, true)) > 5_000,
            "{phases:?}"
        );
    }

    /// A resize of the index that starts during a compaction pass (compaction then relocates
    /// entries into both tables, the sweep moves relocated ones): the map against a HashMap,
    /// a scan across, and the structure checked, while both run.
    #[test]
    fn a_resize_during_a_compaction_pass() {
        let name = |i: u32| format!("c{i:07}");
        let mut m = SeqMap::new();
        let mut model: HashMap<Vec<u8>, Seq> = HashMap::new();
        let set = |m: &mut SeqMap, model: &mut HashMap<Vec<u8>, Seq>, i: u32, v: u64| {
            let s = seq(v, false);
            assert_eq!(
                m.set(name(i).as_bytes(), s).unwrap(),
                model.insert(name(i).into_bytes(), s).is_none()
            );
        };
        // Grown to the edge of a resize of a table of pages...
        let mut n = 0u32;
        while n < 20_000 || !m.index.grows_at_next_insert(m.len) {
            set(&mut m, &mut model, n, 1);
            n += 1;
            if m.pending() && !m.index.grows_at_next_insert(m.len) {
                while m.step(64) {}
            }
        }
        while m.step(64) {}
        assert!(m.index.grows_at_next_insert(m.len));
        // ... then values widened all over it until a compaction pass is due (an update never
        // grows the index)...
        let mut w = 0u32;
        while !m.phase().1 {
            set(&mut m, &mut model, w * 7919 % n, 1 << 40);
            w += 1;
        }
        // ... then one insert: both at once.
        set(&mut m, &mut model, n, 1);
        n += 1;
        assert_eq!(m.phase(), (true, true));
        m.check();
        let mut both = 0;
        let (mut cursor, mut seen) = (0u64, HashSet::new());
        let whole: HashSet<Vec<u8>> = model.keys().cloned().collect();
        for k in 0..20_000u32 {
            match k % 4 {
                0 => {
                    set(&mut m, &mut model, n, 1);
                    n += 1;
                }
                1 => set(&mut m, &mut model, (w + k) * 7919 % n, 1 << 40),
                2 => {
                    let i = (k * 31) % n;
                    assert_eq!(
                        m.get(name(i).as_bytes()),
                        model.get(name(i).as_bytes()).copied()
                    );
                }
                _ => {
                    if cursor != 0 || k == 3 {
                        cursor = m.scan(cursor, 25, |f, _| {
                            seen.insert(f.to_vec());
                        });
                    }
                }
            }
            both += usize::from(m.phase() == (true, true));
            if k % 500 == 0 {
                m.check();
            }
        }
        m.check();
        assert!(both > 100, "{both} writes found both under way");
        assert_eq!(cursor, 0, "the scan ended");
        assert!(
            whole.iter().all(|f| seen.contains(f)),
            "the scan missed a field"
        );
        for (f, s) in m.iter() {
            assert_eq!(model.get(f), Some(&s));
        }
        assert_eq!(m.len(), model.len());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Names enough for indexes of several pages (resized incrementally).
        #[test]
        fn model(ops in proptest::collection::vec((0u8..10, 0u16..12_000, 0u64..1 << 40), 1..12_000)) {
            run_model(ops).map(drop)?;
        }

        /// Fewer names: many rewrites of the same fields (widening), removes and re-adds.
        #[test]
        fn model_few_names(ops in proptest::collection::vec((0u8..10, 0u16..300, 0u64..1 << 40), 1..4000)) {
            run_model(ops).map(drop)?;
        }
    }

    /// The write sequences of tests/it/seqmap_persistence.rs
    /// (`intermediate_states_persist_and_digest_alike`), which must leave its maps
    /// in the middle of background work: the same calls here (SEQ.HSET of one field is one
    /// `set`, SEQ.HDEL of one field one `remove`; where a resize or pass stands depends only on
    /// the counts and sizes of the entries, not on the hash key), and the progress checked to be
    /// well inside, so that no change of the hash moves it out.
    #[test]
    fn the_servers_intermediate_states() {
        let name = |i: u32| format!("f:{i:06}");
        // "grow": 34,400 inserts, the index halfway through a resize (from 31,747 to 37,122).
        let mut m = SeqMap::new();
        for i in 0..34_400u32 {
            m.set(name(i).as_bytes(), seq(u64::from(i), false)).unwrap();
        }
        let (resize, _) = m.progress();
        assert!(
            resize.is_some_and(|p| (0.15..0.85).contains(&p)),
            "{resize:?}"
        );
        // "widen": 40,000 inserts, then 17,500 values widened all over the map, a compaction
        // pass under way.
        let mut m = SeqMap::new();
        for i in 0..40_000u32 {
            m.set(name(i).as_bytes(), seq(u64::from(i), false)).unwrap();
        }
        for j in 0..17_500u32 {
            let i = j * 7919 % 40_000;
            m.set(name(i).as_bytes(), seq(u64::from(i) + (1 << 32), false))
                .unwrap();
        }
        let (_, pass) = m.progress();
        assert!(pass.is_some_and(|p| (0.15..0.85).contains(&p)), "{pass:?}");
        // "shrink": 40,000 inserts, then the first 28,000 removed, the index halfway through
        // shrinking.
        let mut m = SeqMap::new();
        for i in 0..40_000u32 {
            m.set(name(i).as_bytes(), seq(u64::from(i), false)).unwrap();
        }
        for i in 0..28_000u32 {
            assert!(m.remove(name(i).as_bytes()));
        }
        let (resize, _) = m.progress();
        assert!(
            resize.is_some_and(|p| (0.15..0.85).contains(&p)),
            "{resize:?}"
        );
    }
}
