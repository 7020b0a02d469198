//! The entries of a sequence map, in chunks of at most [`CHUNK`] bytes.
//!
//! An entry is a header byte (value width in bits 0-1: 1, 2, 4 or 8 bytes; bit 2 the
//! never-reissue mark; bit 3 dead), a byte holding the name's length minus one, the name
//! (1..=256 bytes), the value little-endian in its width. Entries are appended to the tail chunk;
//! an entry that does not fit in what is left of it opens a new chunk. A chunk grows one
//! allocator size class at a time up to [`CHUNK`], so that no reallocation ever copies more than
//! one chunk, and a map's last chunk wastes no more than a size class's step.
//!
//! Addresses, moves and the reclaiming of dead bytes: [`Arena`].

use super::MAX_NAME;
use crate::core::seq::{Seq, MAX_VALUE};

pub(super) const CHUNK_BITS: u32 = 14;
/// Most bytes a chunk holds (16 KiB).
pub(super) const CHUNK: usize = 1 << CHUNK_BITS;
const OFFSET_MASK: usize = CHUNK - 1;
/// Chunk ids: addresses (plus one) fit in a u32.
const MAX_CHUNKS: usize = (1 << (32 - CHUNK_BITS)) - 1;
/// Largest entry: header, length, a 256-byte name, an 8-byte value.
pub(super) const MAX_ENTRY: usize = 2 + MAX_NAME + 8;
/// Most entry bytes (live and dead) the arena may hold: every chunk but one filled to within
/// an entry of its end still leaves room for them, so an append within this never runs out of
/// chunk ids.
const MAX_USED: usize = (MAX_CHUNKS - 1) * (CHUNK - MAX_ENTRY);

/// Entry bytes from which each new chunk is allocated whole (1 MiB: a chunk's slack, at most
/// 16 KiB, is then at most 1.6% of the arena; below, chunks grow a size class at a time, which
/// copies each a few times over, about 100 bytes per 16-byte entry).
const WHOLE_CHUNKS_AT: usize = 64 * CHUNK;

pub(super) const WIDTH_BITS: u8 = 0x03;
pub(super) const MARK: u8 = 0x04;
pub(super) const DEAD: u8 = 0x08;

/// Compaction starts once dead bytes are at least this many and a quarter of the arena...
const COMPACT_MIN: usize = 64;
/// ... and, during a pass, empties the chunks at least 1/COMPACT_CHUNK_SHARE dead.
const COMPACT_CHUNK_SHARE: usize = 8;
/// Work units of a step: visiting a chunk or an entry costs one, moving an entry this many.
pub(super) const MOVE_COST: usize = 4;

/// An entry as read from the arena.
pub(super) struct Entry<'a> {
    pub(super) header: u8,
    pub(super) name: &'a [u8],
    pub(super) value: u64,
    pub(super) size: usize,
}

impl Entry<'_> {
    pub(super) fn seq(&self) -> Seq {
        Seq::new(self.value.min(MAX_VALUE), self.header & MARK != 0).unwrap_or_default()
    }
}

/// Width code for a value: 0..=3 for 1, 2, 4, 8 bytes.
pub(super) fn width_code(v: u64) -> u8 {
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

pub(super) fn entry_size(name_len: usize, wc: u8) -> usize {
    2 + name_len + (1usize << wc)
}

fn read_entry(bytes: &[u8], off: usize) -> Option<Entry<'_>> {
    let (&header, rest) = bytes.get(off..)?.split_first()?;
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

/// Asks the CPU to start loading the cache line at `p` (a hint; no effect on any result).
#[inline(always)]
pub(super) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and never changes memory, whatever the
    // address (SSE, which has it, is part of x86_64).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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

/// An allocation's real size (0 for none).
pub(super) fn heap(bytes: usize) -> usize {
    if bytes == 0 {
        0
    } else {
        size_class(bytes)
    }
}

#[derive(Debug, Default)]
struct Chunk {
    bytes: Vec<u8>,
    /// Dead bytes in `bytes`. For a free chunk (no allocation): the next free chunk's id plus
    /// one, 0 for none.
    dead: u32,
}

/// The arena. See the module comment; its addresses and dead bytes:
///
/// An entry's address is `chunk id << CHUNK_BITS | offset in the chunk`, below 2^32 - 1 (the
/// index stores address + 1 in a u32). A value that outgrows its width moves the entry to the
/// tail and leaves the old copy dead; a removed field leaves its entry dead. Dead bytes are
/// reclaimed chunk by chunk ([`Arena::compact_step`]): once they pass a quarter of the arena, a
/// pass over the chunks moves the live entries of every chunk at least an eighth dead to the
/// tail, a bounded number per step, and frees the chunk when none is left; a chunk that is all
/// dead is freed at once, without a walk. Freed chunk ids are reused before new ones.
#[derive(Debug, Default)]
pub(super) struct Arena {
    chunks: Vec<Chunk>,
    /// The chunk appended to (valid while `chunks` is not empty).
    tail: u32,
    /// The first free chunk's id plus one, 0 for none (the list runs through `Chunk::dead`).
    free: u32,
    /// Bytes of entries, live and dead (the chunks' lengths; below MAX_USED, so below 2^32).
    used: u32,
    /// Bytes of dead entries.
    dead: u32,
    /// The chunks' allocations, at their size classes (at most MAX_CHUNKS chunks of CHUNK).
    allocated: u32,
    /// During a compaction pass: the chunk it is at and the offset of the next entry there.
    compact: Option<(u32, u32)>,
    /// Moves the index did not follow (tests: must stay 0).
    #[cfg(test)]
    unfollowed: usize,
}

/// What moving one entry in a compaction step did.
enum Move {
    /// Nothing: the entry could not be read (cannot happen).
    Skipped,
    /// Moved, or (when the index did not follow) left where it was.
    Done,
    /// No room in the arena.
    Full,
}

/// What a compaction pass finds where it stands ([`Arena::pass_at`]).
enum PassAt {
    /// The pass is over, or stopped (it starts again later).
    Stop,
    /// Nothing to move there.
    Passed,
    /// A live entry of this many bytes, to move.
    Live(usize),
}

/// What a compaction step did: the entries it moved, each with its old and new address and its
/// name, for the index to follow.
pub(super) struct Moved {
    pub(super) old: usize,
    pub(super) new: usize,
}

impl Arena {
    fn chunk(&self, addr: usize) -> Option<&Chunk> {
        self.chunks.get(addr >> CHUNK_BITS)
    }

    /// The entry at `addr`.
    pub(super) fn entry(&self, addr: usize) -> Option<Entry<'_>> {
        read_entry(&self.chunk(addr)?.bytes, addr & OFFSET_MASK)
    }

    /// The name of the entry at `addr` (the header and value left unread).
    #[inline]
    pub(super) fn name(&self, addr: usize) -> Option<&[u8]> {
        let c = self.chunk(addr)?;
        let off = addr & OFFSET_MASK;
        let len = usize::from(*c.bytes.get(off + 1)?) + 1;
        c.bytes.get(off + 2..off + 2 + len)
    }

    /// Asks the CPU to start loading the entry at `addr` (a hint; no effect on the result).
    #[inline]
    pub(super) fn prefetch(&self, addr: usize) {
        if let Some(c) = self.chunk(addr) {
            prefetch(c.bytes.as_ptr().wrapping_add(addr & OFFSET_MASK));
        }
    }

    /// Whether the entry at `addr` is named `name` (`len_byte` is its length minus one): the
    /// length byte first, most non-matching entries stop there.
    #[inline]
    pub(super) fn is_named(&self, addr: usize, len_byte: u8, name: &[u8]) -> bool {
        let Some(c) = self.chunk(addr) else {
            return false;
        };
        let off = addr & OFFSET_MASK;
        c.bytes.get(off + 1) == Some(&len_byte)
            && c.bytes.get(off + 2..off + 2 + name.len()) == Some(name)
    }

    /// Entry bytes, live and dead.
    pub(super) fn used(&self) -> usize {
        self.used as usize
    }

    /// Dead entry bytes.
    pub(super) fn dead(&self) -> usize {
        self.dead as usize
    }

    /// Whether `bytes` more of entries can be appended.
    pub(super) fn fits(&self, bytes: usize) -> bool {
        (self.used as usize).saturating_add(bytes) <= MAX_USED
    }

    /// Heap bytes: the chunks and their directory.
    pub(super) fn heap_bytes(&self) -> usize {
        self.allocated as usize + heap(self.chunks.capacity() * std::mem::size_of::<Chunk>())
    }

    /// Writes the value (and mark) of the entry at `addr` in place; `wc` is its width code.
    pub(super) fn write_value(&mut self, addr: usize, name_len: usize, wc: u8, s: Seq) {
        let Some(c) = self.chunks.get_mut(addr >> CHUNK_BITS) else {
            return;
        };
        let off = addr & OFFSET_MASK;
        let header = wc | if s.needs_gap() { MARK } else { 0 };
        let w = 1usize << wc;
        let bytes = s.value().to_le_bytes();
        if let Some(hb) = c.bytes.get_mut(off) {
            *hb = header;
        }
        let vstart = off + 2 + name_len;
        if let (Some(dst), Some(src)) = (c.bytes.get_mut(vstart..vstart + w), bytes.get(..w)) {
            dst.copy_from_slice(src);
        }
    }

    /// Appends an entry for `name` with `s` in width `wc`; its address, or `None` when the
    /// arena is full (nothing changed then).
    pub(super) fn append(&mut self, name: &[u8], s: Seq, wc: u8) -> Option<usize> {
        self.append_seq(name, s, wc, false)
    }

    /// [`Arena::append`] for a bulk build: every chunk is allocated whole at once (call
    /// [`Arena::trim_tail`] after the last).
    pub(super) fn append_bulk(&mut self, name: &[u8], s: Seq, wc: u8) -> Option<usize> {
        self.append_seq(name, s, wc, true)
    }

    fn append_seq(&mut self, name: &[u8], s: Seq, wc: u8, bulk: bool) -> Option<usize> {
        let header = wc | if s.needs_gap() { MARK } else { 0 };
        let len = u8::try_from(name.len().checked_sub(1)?).ok()?;
        let value = s.value().to_le_bytes();
        let value = value.get(..1usize << wc)?;
        self.append_parts(header, len, name, value, bulk)
    }

    /// The tail chunk's allocation down to the size class of what it holds (after a bulk
    /// build).
    pub(super) fn trim_tail(&mut self) {
        if let Some(c) = self.chunks.get_mut(self.tail as usize) {
            let want = size_class(c.bytes.len().max(1));
            if want < c.bytes.capacity() {
                self.allocated -= heap(c.bytes.capacity()) as u32;
                let mut v = Vec::with_capacity(want);
                v.extend_from_slice(&c.bytes);
                c.bytes = v;
                self.allocated += heap(c.bytes.capacity()) as u32;
            }
        }
    }

    /// Appends an entry given as its parts.
    fn append_parts(
        &mut self,
        header: u8,
        len: u8,
        name: &[u8],
        value: &[u8],
        bulk: bool,
    ) -> Option<usize> {
        let size = 2 + name.len() + value.len();
        if !self.fits(size) {
            return None;
        }
        let tail_len = self.chunks.get(self.tail as usize).map(|c| c.bytes.len());
        let id = match tail_len {
            Some(l) if l + size <= CHUNK => self.tail as usize,
            _ => self.open_chunk()?,
        };
        // Past WHOLE_CHUNKS_AT, a chunk is allocated whole: its growth would copy it again and
        // again, and one chunk's slack is small beside the rest.
        let whole = bulk || self.used as usize >= WHOLE_CHUNKS_AT;
        let c = self.chunks.get_mut(id)?;
        let need = c.bytes.len() + size;
        if need > c.bytes.capacity() {
            // One size class up (at least an eighth more), never past a chunk.
            let cap = c.bytes.capacity();
            let want = if whole {
                CHUNK
            } else {
                size_class(need.max(cap + cap / 8).max(64)).min(CHUNK)
            };
            self.allocated -= heap(cap) as u32;
            c.bytes.reserve_exact(want - c.bytes.len());
            self.allocated += heap(c.bytes.capacity()) as u32;
        }
        let off = c.bytes.len();
        c.bytes.push(header);
        c.bytes.push(len);
        c.bytes.extend_from_slice(name);
        c.bytes.extend_from_slice(value);
        self.used += size as u32;
        Some(id << CHUNK_BITS | off)
    }

    /// A new tail chunk (a free id first); its id.
    fn open_chunk(&mut self) -> Option<usize> {
        let id = if self.free != 0 {
            let id = self.free as usize - 1;
            let c = self.chunks.get_mut(id)?;
            self.free = std::mem::take(&mut c.dead);
            id
        } else {
            if self.chunks.len() >= MAX_CHUNKS {
                return None;
            }
            if self.chunks.len() < 4 {
                // A small map's directory holds what it uses (Vec would reserve four).
                self.chunks.reserve_exact(1);
            }
            self.chunks.push(Chunk::default());
            self.chunks.len() - 1
        };
        self.tail = id as u32;
        Some(id)
    }

    /// Marks the entry at `addr` (of `size` bytes) dead; frees its chunk when nothing in it
    /// lives any more.
    pub(super) fn kill(&mut self, addr: usize, size: usize) {
        let id = addr >> CHUNK_BITS;
        let Some(c) = self.chunks.get_mut(id) else {
            return;
        };
        if let Some(h) = c.bytes.get_mut(addr & OFFSET_MASK) {
            *h |= DEAD;
        }
        c.dead += size as u32;
        self.dead += size as u32;
        if c.dead as usize == c.bytes.len() {
            self.release(id);
        }
    }

    /// Gives back chunk `id`, all dead: the tail is emptied in place, any other is freed and its
    /// id put on the free list.
    fn release(&mut self, id: usize) {
        let tail = id == self.tail as usize;
        let Some(c) = self.chunks.get_mut(id) else {
            return;
        };
        self.used -= c.bytes.len() as u32;
        self.dead -= c.dead;
        if tail {
            c.bytes.clear();
            c.dead = 0;
        } else {
            self.allocated -= heap(c.bytes.capacity()) as u32;
            c.bytes = Vec::new();
            c.dead = self.free;
            self.free = id as u32 + 1;
        }
        // A pass at this chunk goes on with the next (the id may be reused as the tail).
        if let Some((at, _)) = self.compact {
            if at as usize == id {
                self.compact = Some((at + 1, 0));
            }
        }
    }

    /// Whether a compaction pass runs or should start.
    pub(super) fn compaction_due(&self) -> bool {
        self.compact.is_some()
            || (self.dead as usize >= COMPACT_MIN && self.dead as usize * 4 >= self.used as usize)
    }

    /// One bounded step of compaction: at most `budget` work units (a chunk or an entry
    /// visited costs one, an entry moved [`MOVE_COST`]; the last entry may pass the budget by
    /// that). Each entry moved is appended to the tail, then `moved` is told its old and new
    /// address and its name (the index must then point at the new one), then the old copy
    /// dies. Returns the units spent.
    pub(super) fn compact_step(
        &mut self,
        budget: usize,
        mut moved: impl FnMut(Moved, &[u8]) -> bool,
    ) -> usize {
        if self.compact.is_none() {
            if !self.compaction_due() {
                return 0;
            }
            self.compact = Some((0, 0));
        }
        let mut spent = 0;
        while spent < budget {
            let Some((id, off)) = self.compact else {
                break;
            };
            let (id, off) = (id as usize, off as usize);
            spent += 1;
            let size = match self.pass_at(id, off) {
                PassAt::Stop => break,
                PassAt::Passed => continue,
                PassAt::Live(size) => size,
            };
            match self.move_entry(id, off, size, &mut moved) {
                Move::Skipped => {}
                Move::Done => spent += MOVE_COST - 1,
                Move::Full => {
                    // No room to move into. The pass stops; it starts again later.
                    spent += MOVE_COST - 1;
                    self.compact = None;
                    break;
                }
            }
        }
        spent
    }

    /// What a compaction pass at `off` in chunk `id` finds, the pass moved on past it (to the
    /// next chunk where this one is not worth emptying or is read to its end).
    #[inline]
    fn pass_at(&mut self, id: usize, off: usize) -> PassAt {
        let Some(c) = self.chunks.get(id) else {
            // Past the last chunk: the pass is over.
            self.compact = None;
            return PassAt::Stop;
        };
        let len = c.bytes.len();
        let skip =
            len == 0 || off >= len || (off == 0 && (c.dead as usize) * COMPACT_CHUNK_SHARE < len);
        if skip {
            self.compact = Some((id as u32 + 1, 0));
            return PassAt::Passed;
        }
        if id == self.tail as usize {
            // The tail is emptied like any other chunk, into a new tail (a small map has
            // only the tail).
            if self.open_chunk().is_none() {
                self.compact = None;
                return PassAt::Stop;
            }
        }
        let Some(c) = self.chunks.get(id) else {
            return PassAt::Passed;
        };
        let Some(e) = read_entry(&c.bytes, off) else {
            self.compact = Some((id as u32 + 1, 0));
            return PassAt::Passed;
        };
        let size = e.size;
        self.compact = Some((id as u32, (off + size) as u32));
        if e.header & DEAD != 0 {
            return PassAt::Passed;
        }
        PassAt::Live(size)
    }

    /// Moves the live entry of `size` bytes at `off` in chunk `id` to the tail and tells
    /// `moved`; the copy the index does not follow dies.
    fn move_entry(
        &mut self,
        id: usize,
        off: usize,
        size: usize,
        moved: &mut impl FnMut(Moved, &[u8]) -> bool,
    ) -> Move {
        // Copied out first: the append may reallocate the tail, and the chunk borrows the arena.
        let mut buf = [0u8; MAX_ENTRY];
        let Some(dst) = buf.get_mut(..size) else {
            return Move::Skipped;
        };
        let Some(src) = self
            .chunks
            .get(id)
            .and_then(|c| c.bytes.get(off..off + size))
        else {
            return Move::Skipped;
        };
        dst.copy_from_slice(src);
        let (Some(&header), Some(&l)) = (buf.first(), buf.get(1)) else {
            return Move::Skipped;
        };
        let name_len = usize::from(l) + 1;
        let (Some(name), Some(value)) = (buf.get(2..2 + name_len), buf.get(2 + name_len..size))
        else {
            return Move::Skipped;
        };
        let Some(new) = self.append_parts(header, l, name, value, false) else {
            return Move::Full;
        };
        let old = id << CHUNK_BITS | off;
        if moved(Moved { old, new }, name) {
            self.kill(old, size);
        } else {
            // The index does not know the old copy (cannot happen): the new one dies and the
            // old one stays.
            self.kill(new, size);
            #[cfg(test)]
            {
                self.unfollowed += 1;
            }
        }
        Move::Done
    }

    /// How far a compaction pass is over the chunks, 0 to 1 (tests).
    #[cfg(test)]
    pub(super) fn compaction_progress(&self) -> Option<f64> {
        self.compact
            .map(|(id, _)| f64::from(id) / self.chunks.len().max(1) as f64)
    }

    /// Every live entry's address, chunk by chunk (tests).
    #[cfg(test)]
    pub(super) fn live_addresses(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (id, c) in self.chunks.iter().enumerate() {
            let mut off = 0;
            let mut dead = 0;
            while off < c.bytes.len() {
                let e = read_entry(&c.bytes, off).unwrap();
                if e.header & DEAD == 0 {
                    out.push(id << CHUNK_BITS | off);
                } else {
                    dead += e.size;
                }
                off += e.size;
            }
            assert_eq!(off, c.bytes.len());
            if !c.bytes.is_empty() {
                assert_eq!(dead, c.dead as usize, "chunk {id} dead bytes");
            }
            assert!(c.bytes.capacity() <= CHUNK);
        }
        out
    }

    /// Checks the arena's own bookkeeping (tests).
    #[cfg(test)]
    pub(super) fn check(&self) {
        assert_eq!(self.unfollowed, 0, "moves the index did not follow");
        let used: usize = self.chunks.iter().map(|c| c.bytes.len()).sum();
        assert_eq!(used, self.used as usize);
        let dead: usize = self
            .chunks
            .iter()
            .filter(|c| !c.bytes.is_empty())
            .map(|c| c.dead as usize)
            .sum();
        assert_eq!(dead, self.dead as usize);
        let allocated: usize = self.chunks.iter().map(|c| heap(c.bytes.capacity())).sum();
        assert_eq!(allocated, self.allocated as usize);
        // The free list holds exactly the chunks without bytes, other than the tail.
        let mut free = std::collections::HashSet::new();
        let mut f = self.free;
        while f != 0 {
            let id = f as usize - 1;
            assert!(free.insert(id), "free list loops");
            assert!(self.chunks[id].bytes.capacity() == 0);
            f = self.chunks[id].dead;
        }
        for (id, c) in self.chunks.iter().enumerate() {
            if c.bytes.capacity() == 0 && id != self.tail as usize {
                assert!(free.contains(&id), "chunk {id} lost");
            }
        }
        // A pass stands at an entry's start.
        if let Some((id, off)) = self.compact {
            if let Some(c) = self.chunks.get(id as usize) {
                let mut o = 0;
                while o < (off as usize).min(c.bytes.len()) {
                    o += read_entry(&c.bytes, o).unwrap().size;
                }
                assert!(o == off as usize || off as usize >= c.bytes.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Below WHOLE_CHUNKS_AT a chunk grows a size class at a time (a small map wastes little);
    /// from there each new chunk is allocated whole, never copied as it fills.
    #[test]
    fn chunks_are_whole_past_a_mebibyte() {
        let mut a = Arena::default();
        let s = Seq::new(3_000_000_000, false).unwrap();
        let mut i = 0u32;
        let mut append = |a: &mut Arena| {
            i += 1;
            a.append(format!("u{i:09}").as_bytes(), s, width_code(s.value()))
                .unwrap()
        };
        append(&mut a);
        let first = a.chunks[0].bytes.capacity();
        assert!(first < CHUNK, "{first}");
        while a.used() < WHOLE_CHUNKS_AT {
            append(&mut a);
        }
        let before = a.chunks.len();
        while a.chunks.len() < before + 3 {
            let at = append(&mut a);
            let c = &a.chunks[at >> CHUNK_BITS];
            assert_eq!(
                c.bytes.capacity(),
                CHUNK,
                "chunk {} at {at}",
                at >> CHUNK_BITS
            );
        }
        a.check();
    }
}
