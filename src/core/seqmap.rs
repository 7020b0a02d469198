//! The sequence map, Redis-free: many named sequences in one value, each with exactly the
//! rules of [`Seq`] (the SEQ.H* commands apply them; this file only stores the states).
//!
//! Layout, chosen for memory (a counter with a 10-byte name and a value below 2^32 costs about
//! 21 bytes, see docs/operations.md, "Sequence maps") with O(1) access:
//!
//! - `arena`: the entries back to back. An entry is a header byte (value width in bits 0-1:
//!   1, 2, 4 or 8 bytes; bit 2 the never-reissue mark; bit 3 dead), a byte holding the name's
//!   length minus one, the name (1..=256 bytes), the value little-endian in its width. A value
//!   that outgrows its width moves the entry to the end and leaves the old one dead; dead bytes
//!   are compacted away once they pass a quarter of the arena.
//! - `slots`: an open-addressing index of arena offsets (offset + 1; 0 is an empty slot) with
//!   linear probing and no wrap-around: a key's home slot is `fastrange(hash, buckets)`, a
//!   cluster may run on into a short tail past the last home. The slots are kept in the order
//!   of the entries' 64-bit hashes (ordered linear probing: an insert shifts the rest of its
//!   cluster right, a delete shifts it back). So the index never holds more than its load
//!   factor allows, and [`SeqMap::scan`] can use "the next hash to return" as a cursor that
//!   survives growth, deletes and compaction.
//!
//! Both vectors are sized to the allocator's size classes (jemalloc: four per doubling), so
//! that their capacities are the bytes the server really spends: `used_memory` counts usable
//! sizes, and [`SeqMap::mem_usage`] reports the same figure.
//!
//! The hash ([`crate::core::hash`]) is keyed per process, so a client cannot choose field names
//! that collide, and cursors hold within one process (a restarted server starts a new iteration).

use crate::core::hash::hash;
use crate::core::seq::{Seq, MAX_VALUE};

/// Longest field name.
pub const MAX_NAME: usize = 256;

const WIDTH_BITS: u8 = 0x03;
const MARK: u8 = 0x04;
const DEAD: u8 = 0x08;

/// Grow the index past this load (in percent of the home slots).
const MAX_LOAD_PCT: usize = 85;
/// Load after a bulk build (RDB, RESTORE, COPY): room to grow before the first resize.
const BUILD_LOAD_PCT: usize = 78;
/// Largest arena: offsets are stored as u32 (plus one).
const MAX_ARENA: usize = u32::MAX as usize - 1;

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

/// One map. See the module comment for the layout.
#[derive(Debug, Default)]
pub struct SeqMap {
    arena: Vec<u8>,
    slots: Vec<u32>,
    /// Home slots (`slots.len()` minus the tail).
    buckets: usize,
    len: usize,
    /// Bytes of dead entries in the arena.
    dead: usize,
    /// IDMP tokens (see [`Tokens`]).
    pub tokens: Option<Box<Tokens>>,
}

/// An entry as read from the arena.
struct Entry<'a> {
    header: u8,
    name: &'a [u8],
    value: u64,
    size: usize,
}

impl Entry<'_> {
    fn seq(&self) -> Seq {
        Seq::new(self.value.min(MAX_VALUE), self.header & MARK != 0).unwrap_or_default()
    }
}

/// `h` mapped onto `0..n` preserving order (Lemire's multiply-shift), so any `n` works and
/// home slots rise with the hash.
fn fastrange(h: u64, n: usize) -> usize {
    ((u128::from(h) * n as u128) >> 64) as usize
}

/// The allocation size the allocator really hands out for `bytes` (jemalloc's size classes:
/// multiples of 16 up to 128, then four classes per doubling). Sizing vectors to these wastes
/// nothing that `used_memory` would count.
pub fn size_class(bytes: usize) -> usize {
    if bytes <= 8 {
        return 8;
    }
    if bytes <= 128 {
        return bytes.div_ceil(16) * 16;
    }
    let k = usize::BITS - (bytes - 1).leading_zeros() - 1; // 2^k < bytes <= 2^(k+1)
    let step = 1usize << (k - 2);
    bytes.div_ceil(step).saturating_mul(step)
}

/// Slots past the last home: room for the cluster that runs on from the last homes.
fn tail(capacity: usize) -> usize {
    8 + capacity / 64
}

/// Width code for a value: 0..=3 for 1, 2, 4, 8 bytes.
fn width_code(v: u64) -> u8 {
    if v < 1 << 8 {
        0
    } else if v < 1 << 16 {
        1
    } else if v < 1 << 32 {
        2
    } else {
        3
    }
}

fn entry_size(name_len: usize, wc: u8) -> usize {
    2 + name_len + (1usize << wc)
}

fn read_entry(arena: &[u8], off: usize) -> Option<Entry<'_>> {
    let (&header, rest) = arena.get(off..)?.split_first()?;
    let (&l, rest) = rest.split_first()?;
    let len = usize::from(l) + 1;
    let name = rest.get(..len)?;
    let w = 1usize << (header & WIDTH_BITS);
    let vb = rest.get(len..len + w)?;
    let mut buf = [0u8; 8];
    buf.get_mut(..w)?.copy_from_slice(vb);
    Some(Entry {
        header,
        name,
        value: u64::from_le_bytes(buf),
        size: 2 + len + w,
    })
}

fn push_entry(arena: &mut Vec<u8>, name: &[u8], s: Seq, wc: u8) {
    let header = wc | if s.needs_gap() { MARK } else { 0 };
    arena.push(header);
    arena.push(u8::try_from(name.len().saturating_sub(1)).unwrap_or(u8::MAX));
    arena.extend_from_slice(name);
    let bytes = s.value().to_le_bytes();
    arena.extend_from_slice(bytes.get(..1usize << wc).unwrap_or(&bytes));
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

    fn slot_entry(&self, i: usize) -> Option<Entry<'_>> {
        let s = *self.slots.get(i)?;
        if s == 0 {
            return None;
        }
        read_entry(&self.arena, s as usize - 1)
    }

    /// The slot holding `name`, or `None`.
    fn find(&self, name: &[u8], h: u64) -> Option<usize> {
        if self.buckets == 0 {
            return None;
        }
        let home = fastrange(h, self.buckets);
        let len_byte = u8::try_from(name.len().checked_sub(1)?).ok()?;
        for (i, &s) in self.slots.iter().enumerate().skip(home) {
            if s == 0 {
                return None;
            }
            let off = s as usize - 1;
            // The length byte first: most non-matching entries stop there.
            if self.arena.get(off + 1) == Some(&len_byte)
                && self.arena.get(off + 2..off + 2 + name.len()) == Some(name)
            {
                return Some(i);
            }
        }
        None
    }

    /// The state of `name`, or `None` when the field is missing.
    pub fn get(&self, name: &[u8]) -> Option<Seq> {
        let i = self.find(name, hash(name))?;
        self.slot_entry(i).map(|e| e.seq())
    }

    /// Where `name` is (or would go): one hash and one probe, for a read followed by a write of
    /// the same field ([`SeqMap::state`], then [`SeqMap::store`]) with no change in between.
    pub fn locate(&self, name: &[u8]) -> Located {
        let hash = hash(name);
        Located {
            hash,
            slot: self.find(name, hash),
        }
    }

    /// The state of a located field, or `None` when it is missing.
    pub fn state(&self, at: &Located) -> Option<Seq> {
        at.slot.and_then(|i| self.slot_entry(i)).map(|e| e.seq())
    }

    /// [`SeqMap::set`] at a place [`SeqMap::locate`] found for `name` in this map, unchanged
    /// since.
    pub fn store(&mut self, name: &[u8], at: Located, s: Seq) -> Result<bool, MapError> {
        check_name(name)?;
        match at.slot {
            Some(i) => {
                self.update(i, name, s)?;
                Ok(false)
            }
            None => {
                self.insert(name, at.hash, s)?;
                Ok(true)
            }
        }
    }

    /// Stores `s` as the state of `name`. `Ok(true)` when the field was added.
    pub fn set(&mut self, name: &[u8], s: Seq) -> Result<bool, MapError> {
        check_name(name)?;
        let h = hash(name);
        match self.find(name, h) {
            Some(i) => {
                self.update(i, name, s)?;
                Ok(false)
            }
            None => {
                self.insert(name, h, s)?;
                Ok(true)
            }
        }
    }

    /// Bytes the arena may still take.
    fn room_for(&self, bytes: usize) -> bool {
        self.arena.len() - self.dead + bytes <= MAX_ARENA
    }

    /// Whether adding `bytes` of entries could fail (callers check a whole batch first, so
    /// that it is all or nothing).
    pub fn fits(&self, bytes: usize) -> bool {
        self.room_for(bytes)
    }

    /// Bytes an entry for `name` with value `v` takes (for [`SeqMap::fits`]).
    pub fn entry_bytes(name: &[u8], v: u64) -> usize {
        entry_size(name.len(), width_code(v))
    }

    fn update(&mut self, i: usize, name: &[u8], s: Seq) -> Result<(), MapError> {
        let Some(&slot) = self.slots.get(i) else {
            return Ok(());
        };
        let off = slot as usize - 1;
        let Some(e) = read_entry(&self.arena, off) else {
            return Ok(());
        };
        let wc = e.header & WIDTH_BITS;
        let old_size = e.size;
        if width_code(s.value()) <= wc {
            let header = wc | if s.needs_gap() { MARK } else { 0 };
            let bytes = s.value().to_le_bytes();
            let vstart = off + 2 + name.len();
            let w = 1usize << wc;
            if let Some(hb) = self.arena.get_mut(off) {
                *hb = header;
            }
            if let (Some(dst), Some(src)) = (self.arena.get_mut(vstart..vstart + w), bytes.get(..w))
            {
                dst.copy_from_slice(src);
            }
            return Ok(());
        }
        // Wider: the entry moves to the end, the old one dies.
        let wn = width_code(s.value());
        let size = entry_size(name.len(), wn);
        if !self.room_for(size) {
            return Err(MapError::Full);
        }
        let new_off = self.append(name, s, wn);
        if let Some(hb) = self.arena.get_mut(off) {
            *hb |= DEAD;
        }
        self.dead += old_size;
        if let Some(sl) = self.slots.get_mut(i) {
            *sl = (new_off + 1) as u32;
        }
        self.maybe_compact();
        Ok(())
    }

    /// Appends an entry, growing the arena to the next size class when full; its offset.
    fn append(&mut self, name: &[u8], s: Seq, wc: u8) -> usize {
        let size = entry_size(name.len(), wc);
        let need = self.arena.len() + size;
        if need > self.arena.capacity() {
            let cap = self.arena.capacity();
            let want = size_class(need.max(cap + cap / 8).max(64));
            self.arena.reserve_exact(want - self.arena.len());
        }
        let off = self.arena.len();
        push_entry(&mut self.arena, name, s, wc);
        off
    }

    fn insert(&mut self, name: &[u8], h: u64, s: Seq) -> Result<(), MapError> {
        let wc = width_code(s.value());
        if !self.room_for(entry_size(name.len(), wc)) {
            return Err(MapError::Full);
        }
        if (self.len + 1) * 100 > self.buckets * MAX_LOAD_PCT {
            self.grow_index();
        }
        let off = self.append(name, s, wc);
        self.len += 1;
        loop {
            if self.place(h, off) {
                break;
            }
            // The cluster ran past the tail: a bigger index.
            self.grow_index();
        }
        self.maybe_compact();
        Ok(())
    }

    /// Puts offset `off` (hash `h`) in its ordered place; false when there is no empty slot
    /// left after it.
    fn place(&mut self, h: u64, off: usize) -> bool {
        if self.buckets == 0 {
            return false;
        }
        let home = fastrange(h, self.buckets);
        let mut p = home;
        while let Some(&s) = self.slots.get(p) {
            if s == 0 {
                break;
            }
            match read_entry(&self.arena, s as usize - 1) {
                Some(e) if hash(e.name) <= h => p += 1,
                _ => break,
            }
        }
        let Some(e) = self
            .slots
            .iter()
            .skip(p)
            .position(|&s| s == 0)
            .map(|k| p + k)
        else {
            return false;
        };
        self.slots.copy_within(p..e, p + 1);
        if let Some(sl) = self.slots.get_mut(p) {
            *sl = (off + 1) as u32;
        }
        true
    }

    /// The index one allocation size class up (14% to 25% more slots, the steps of the
    /// allocator's classes: a bigger factor would leave more slots empty, a smaller one would
    /// pay for bytes the allocator rounds up anyway), the entries placed in the order of the
    /// old one (which is the hash order, so each goes at its home or right after the one
    /// before: no shifting).
    fn grow_index(&mut self) {
        let mut bytes = self.slots.len() * 4;
        loop {
            bytes = size_class(bytes + 1).max(64);
            let cap = bytes / 4;
            let buckets = cap - tail(cap);
            if buckets * MAX_LOAD_PCT < self.len * 100 {
                continue;
            }
            let mut slots = vec![0u32; cap];
            let mut next = 0usize;
            let mut ok = true;
            for &s in self.slots.iter().filter(|&&s| s != 0) {
                let Some(e) = read_entry(&self.arena, s as usize - 1) else {
                    continue;
                };
                let p = fastrange(hash(e.name), buckets).max(next);
                match slots.get_mut(p) {
                    Some(d) => *d = s,
                    None => {
                        ok = false;
                        break;
                    }
                }
                next = p + 1;
            }
            if ok {
                self.slots = slots;
                self.buckets = buckets;
                return;
            }
        }
    }

    /// Removes `name`; whether it was there.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        let Some(i) = self.find(name, hash(name)) else {
            return false;
        };
        let Some(&s) = self.slots.get(i) else {
            return false;
        };
        let off = s as usize - 1;
        if let Some(e) = read_entry(&self.arena, off) {
            self.dead += e.size;
        }
        if let Some(hb) = self.arena.get_mut(off) {
            *hb |= DEAD;
        }
        self.len -= 1;
        // Backward shift: later entries of the cluster move back unless at their home.
        let mut j = i;
        loop {
            let k = j + 1;
            let moved = match self.slot_entry(k) {
                Some(e) => fastrange(hash(e.name), self.buckets) <= j,
                None => false,
            };
            if !moved {
                if let Some(sl) = self.slots.get_mut(j) {
                    *sl = 0;
                }
                break;
            }
            let v = self.slots.get(k).copied().unwrap_or(0);
            if let Some(sl) = self.slots.get_mut(j) {
                *sl = v;
            }
            j = k;
        }
        if self.len == 0 {
            *self = SeqMap {
                tokens: self.tokens.take(),
                ..SeqMap::default()
            };
        } else {
            self.maybe_compact();
        }
        true
    }

    /// Rewrites the arena without its dead entries once they pass a quarter of it.
    fn maybe_compact(&mut self) {
        if self.dead < 64 || self.dead * 4 < self.arena.len() {
            return;
        }
        let live = self.arena.len() - self.dead;
        let mut arena = Vec::with_capacity(size_class(live + live / 16));
        for s in self.slots.iter_mut().filter(|s| **s != 0) {
            let off = *s as usize - 1;
            let Some(e) = read_entry(&self.arena, off) else {
                continue;
            };
            let new_off = arena.len();
            if let Some(bytes) = self.arena.get(off..off + e.size) {
                arena.extend_from_slice(bytes);
            }
            *s = (new_off + 1) as u32;
        }
        self.arena = arena;
        self.dead = 0;
    }

    /// Every field in scan order (the hash order).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Seq)> + '_ {
        self.slots
            .iter()
            .filter(|&&s| s != 0)
            .filter_map(|&s| read_entry(&self.arena, s as usize - 1))
            .map(|e| (e.name, e.seq()))
    }

    /// One page of a scan: the fields whose hash is at least `cursor`, in hash order, `count`
    /// of them (more when the last one's hash is shared, so a cursor never splits a hash); then
    /// the next cursor (the hash of the next field), or 0 at the end. Every field present for
    /// the whole scan is returned at least once: the slots stay in hash order through growth,
    /// deletes and compaction, and a page ends before the cursor it hands out. The next cursor
    /// is never 0 otherwise, since it is above a hash just returned.
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut out: impl FnMut(&'a [u8], Seq),
    ) -> u64 {
        if self.buckets == 0 {
            return 0;
        }
        let start = fastrange(cursor, self.buckets);
        let mut n = 0usize;
        let mut last: Option<u64> = None;
        for i in start..self.slots.len() {
            let Some(e) = self.slot_entry(i) else {
                continue;
            };
            let h = hash(e.name);
            if h < cursor {
                continue;
            }
            if n >= count.max(1) && last != Some(h) {
                return h;
            }
            out(e.name, e.seq());
            n += 1;
            last = Some(h);
        }
        0
    }

    /// Bytes this map holds on the heap (its vectors at their allocation sizes, the token
    /// window's box) plus the map itself, which the caller boxes.
    pub fn mem_usage(&self) -> usize {
        let heap = |bytes: usize| if bytes == 0 { 0 } else { size_class(bytes) };
        heap(std::mem::size_of::<SeqMap>())
            + heap(self.arena.capacity())
            + heap(self.slots.capacity() * 4)
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
        let mut arena = Vec::new();
        let mut order: Vec<(u64, u32)> = Vec::with_capacity(hint);
        for (name, s) in fields {
            check_name(name).map_err(|_| BuildError::Name)?;
            let wc = width_code(s.value());
            let off = arena.len();
            if off + entry_size(name.len(), wc) > MAX_ARENA {
                return Err(BuildError::Full);
            }
            push_entry(&mut arena, name, s, wc);
            order.push((hash(name), (off + 1) as u32));
        }
        let mut sized = Vec::with_capacity(size_class(arena.len().max(1)));
        sized.extend_from_slice(&arena);
        drop(arena);
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
                    .filter_map(|&(_, s)| read_entry(&sized, s as usize - 1).map(|e| e.name))
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
        let mut m = SeqMap {
            arena: sized,
            len,
            ..SeqMap::default()
        };
        if len == 0 {
            return Ok(SeqMap::default());
        }
        // Place in hash order, as rebuild_index does from an index.
        let mut want = len * 100 / BUILD_LOAD_PCT + 1;
        loop {
            let cap = size_class((want + tail(want)) * 4) / 4;
            let buckets = cap - tail(cap);
            let mut slots = vec![0u32; cap];
            let mut next = 0usize;
            let ok = order.iter().all(|&(h, s)| {
                let p = fastrange(h, buckets).max(next);
                next = p + 1;
                slots.get_mut(p).map(|d| *d = s).is_some()
            });
            if ok {
                m.slots = slots;
                m.buckets = buckets;
                return Ok(m);
            }
            want = want + want / 4 + 8;
        }
    }

    /// The fields as an RDB blob: per field, the name's length minus one (a byte), the name,
    /// the value as LEB128 (at most 9 bytes). Marks are not saved: a loaded field is always
    /// marked. [`SeqMap::decode`] reads it back.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.arena.len() - self.dead + self.len);
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

    /// Checks the structure's invariants (tests).
    #[cfg(test)]
    fn check(&self) {
        let mut n = 0;
        let mut prev = None;
        for (i, &s) in self.slots.iter().enumerate() {
            if s == 0 {
                continue;
            }
            let e = read_entry(&self.arena, s as usize - 1).unwrap();
            assert_eq!(e.header & DEAD, 0);
            let h = hash(e.name);
            let home = fastrange(h, self.buckets);
            assert!(home <= i);
            assert!(self.slots[home..i].iter().all(|&x| x != 0));
            if let Some(p) = prev {
                assert!(p <= h, "hash order");
            }
            prev = Some(h);
            n += 1;
        }
        assert_eq!(n, self.len);
        assert!(self.len * 100 <= self.buckets * MAX_LOAD_PCT || self.len == 0);
    }
}

/// A field's place in a map, from [`SeqMap::locate`]: valid until the map changes.
#[derive(Clone, Copy, Debug)]
pub struct Located {
    hash: u64,
    slot: Option<usize>,
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
    use std::collections::HashMap;

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
        assert!(m.remove(b"a"));
        assert!(!m.remove(b"a"));
        assert_eq!(m.get(b"a"), None);
        assert!(m.remove(&[7u8; 256]));
        assert!(m.is_empty());
        m.check();
    }

    #[test]
    fn many_fields_and_memory() {
        for n in [10_000, 200_000, 1_000_000] {
            fill_and_measure(n);
        }
    }

    fn fill_and_measure(n: u32) {
        let mut m = SeqMap::new();
        for i in 0..n {
            let name = format!("f{i:09}");
            m.set(name.as_bytes(), seq(u64::from(i) * 4000, false))
                .unwrap();
        }
        m.check();
        for i in (0..n).step_by(97) {
            let name = format!("f{i:09}");
            assert_eq!(
                m.get(name.as_bytes()),
                Some(seq(u64::from(i) * 4000, false))
            );
        }
        let per = m.mem_usage() as f64 / f64::from(n);
        eprintln!(
            "n {n}: {per} B/field; arena {} cap {} slots {} buckets {} len {}",
            m.arena.len(),
            m.arena.capacity(),
            m.slots.capacity(),
            m.buckets,
            m.len
        );
        assert!(per < 24.0, "{per} bytes per field");
    }

    #[test]
    fn locate_then_store_is_set() {
        let mut m = SeqMap::new();
        for i in 0..500u64 {
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
        assert_eq!(m.len(), 500);
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

    #[test]
    fn scan_returns_every_field_across_growth_and_deletes() {
        let mut m = SeqMap::new();
        for i in 0..5000u64 {
            m.set(format!("s{i}").as_bytes(), seq(i, false)).unwrap();
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0u64;
        loop {
            cursor = m.scan(cursor, 37, |n, _| {
                seen.insert(n.to_vec());
            });
            // grow, delete and widen between pages
            for k in 0..40u64 {
                let id = 10_000 + round * 40 + k;
                m.set(format!("s{id}").as_bytes(), seq(1 << 40, false))
                    .unwrap();
                m.remove(format!("s{}", 10_000 + round * 40 + k / 2).as_bytes());
            }
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        m.check();
        for i in 0..5000u64 {
            assert!(seen.contains(format!("s{i}").as_bytes()), "s{i} missed");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn model(ops in proptest::collection::vec((0u8..4, 0u16..300, 0u64..1 << 40), 1..2000)) {
            let mut m = SeqMap::new();
            let mut model: HashMap<Vec<u8>, Seq> = HashMap::new();
            for (op, k, v) in ops {
                let name = format!("n{k}").into_bytes();
                match op {
                    0 | 1 => {
                        let s = seq(v >> (k % 40), v % 2 == 0);
                        prop_assert_eq!(m.set(&name, s).unwrap(), !model.contains_key(&name));
                        model.insert(name, s);
                    }
                    2 => prop_assert_eq!(m.remove(&name), model.remove(&name).is_some()),
                    _ => prop_assert_eq!(m.get(&name), model.get(&name).copied()),
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
        }
    }
}
