//! Idempotent allocation (IDMP), Redis-free: the token window of one sequence key.
//!
//! A token is what a client sends with `SEQ.NEXT ... IDMP token` (1..64 bytes, e.g. its message
//! ID); the window remembers, per token, the first call's reply, when the token stops counting
//! and the request itself ([`Entry`], [`Request`]), so that a retry gets the first answer and a
//! different request under the same token is refused instead of answered with another
//! request's reservation. The window changes in one way only, [`Window::apply`], by a number
//! the primary decides ([`Window::plan`]) and replicates, so a replica or an AOF replay reaches
//! the same window without reading its own clock or configs (see `src/handout/reserve.rs`).

use std::collections::VecDeque;
use std::fmt;
use std::hash::Hasher;
use std::num::NonZeroU8;

use hashbrown::HashTable;

/// Longest token, in bytes (the shortest is 1).
pub const MAX_TOKEN_LEN: usize = 64;

/// Most tokens one window may hold (`imid.seq-idmp-max`'s upper bound): a loaded window with
/// more is a corrupt payload, refused before anything is allocated for it.
pub const MAX_TOKENS: u64 = 1_000_000;

/// A token's length rule (1..64 bytes), for the commands and the loader alike.
pub fn check_token(token: &[u8]) -> Result<(), &'static str> {
    if token.is_empty() || token.len() > MAX_TOKEN_LEN {
        Err("IDMP token must be 1..64 bytes")
    } else {
        Ok(())
    }
}

/// What an IDMP call decides by: the time, the token lifetime and the window size. On a primary
/// it is the node's IDMP clock (`node::idmp_clock`), which replicas and the AOF replay, so that a
/// replayed call decides alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Unix ms: a token counts while this reads below its expiry.
    pub now_ms: u64,
    /// A new token expires this long after `now_ms`.
    pub ttl_ms: u64,
    /// Most tokens a key keeps.
    pub max: usize,
    /// Whether the call may replicate as called (else its explicit effect).
    pub verbatim: bool,
}

/// The latest expiry (unix ms) a token may have: the AOF and the replication stream write an
/// expiry as a signed 64-bit integer (`SEQ.IDMPSET`, `SEQ.HIDMPSET`), so a later one could not
/// be written back. RDB, `RESTORE` and the IDMP clock refuse what would pass it.
pub const MAX_EXPIRES_MS: u64 = i64::MAX as u64;

impl Clock {
    /// The expiry of a token recorded now.
    pub fn expires_ms(&self) -> u64 {
        self.now_ms.saturating_add(self.ttl_ms)
    }

    /// Whether a token recorded at `now_ms` with a lifetime of `ttl_ms` expires at or before
    /// [`MAX_EXPIRES_MS`], so that its expiry can be written back.
    pub fn fits(now_ms: u64, ttl_ms: u64) -> bool {
        now_ms
            .checked_add(ttl_ms)
            .is_some_and(|e| e <= MAX_EXPIRES_MS)
    }
}

/// Windows of up to this many slots (entries and placeholders) are searched by scanning the
/// ring; above, through the index. A scan of 8 slots is at most 8 length compares and byte
/// compares, no dearer than hashing the token and probing a table, and it keeps small windows
/// (most keys) to one allocation.
const SCAN_MAX: usize = 8;

/// The ring's first capacity, one slot: the first `apply` on a key allocates exactly this. A
/// key that gets one token within the TTL (a quiet conversation; every key of the bench's
/// random-key row) holds one 96-byte slot instead of VecDeque's first growth to four; a busier
/// key grows 1, 4, 8, ... at the cost of one more reallocation.
const FIRST_CAPACITY: usize = 1;

/// What an entry remembers of its first call's request, to tell a retry (the same request)
/// from another request under the same token: a sequence key's COUNT (`u64`), a map's field
/// and COUNT ([`FieldRequest`]). Compared exactly: no fingerprint stands in for the request, so
/// no crafted field can pass for another (a 64-bit hash of a known function falls to a birthday
/// search). The one exception is a token loaded from a file of the first layout, until it
/// leaves the window ([`FieldRequest::legacy`]).
pub trait Request: Clone + PartialEq + fmt::Debug {
    /// A call's request as the command holds it (borrowed from its arguments).
    type Ask<'a>: Copy;
    /// What a reused token's request may differ in, as a refusal names it.
    const NAME: &'static str;
    /// Whether `ask` is the request remembered.
    fn is(&self, ask: Self::Ask<'_>) -> bool;
    /// The request to remember for `ask`.
    fn of(ask: Self::Ask<'_>) -> Self;
    /// Heap bytes the request holds (for MEMORY USAGE).
    fn heap_bytes(&self) -> usize;
}

/// A sequence key's request: its COUNT.
impl Request for u64 {
    type Ask<'a> = u64;
    const NAME: &'static str = "COUNT";

    #[inline(always)]
    fn is(&self, count: u64) -> bool {
        *self == count
    }

    #[inline(always)]
    fn of(count: u64) -> u64 {
        count
    }

    fn heap_bytes(&self) -> usize {
        0
    }
}

/// A map's request: the field (1..256 bytes) and the COUNT. A field of up to
/// [`INLINE_FIELD`] bytes (most: `friendship`, `u123456789`) is held in the request itself, a
/// longer one on the heap, so that the common token costs no allocation. A token loaded from a
/// file of the first layout kept only a 64-bit FNV-1a fingerprint of them
/// ([`FieldRequest::legacy`]); it is compared by that fingerprint until it leaves the window (a
/// token lifetime at most).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FieldRequest(Req);

/// Longest field a [`FieldRequest`] holds inline: what fits beside the COUNT in the 24 bytes a
/// heap field's pointer, length and COUNT take.
pub const INLINE_FIELD: usize = 18;

#[derive(Clone, PartialEq, Eq, Debug)]
enum Req {
    /// The field's bytes (zero past `len`) and the COUNT (at most 1,000,000: 32 bits).
    Inline {
        count: u32,
        len: u8,
        bytes: [u8; INLINE_FIELD],
    },
    Heap {
        count: u32,
        field: Box<[u8]>,
    },
    /// A fingerprint ([`legacy_fingerprint`]).
    Legacy(u64),
}

impl FieldRequest {
    /// The request of `field` (1..256 bytes) and `count` (a COUNT, 1..1,000,000). A count past
    /// 32 bits (none is) would be kept as a fingerprint.
    pub fn new(field: &[u8], count: u64) -> FieldRequest {
        let Ok(count) = u32::try_from(count) else {
            return FieldRequest::legacy(legacy_fingerprint(field, count));
        };
        let mut bytes = [0; INLINE_FIELD];
        match (u8::try_from(field.len()), bytes.get_mut(..field.len())) {
            (Ok(len), Some(b)) => {
                b.copy_from_slice(field);
                FieldRequest(Req::Inline { count, len, bytes })
            }
            _ => FieldRequest(Req::Heap {
                count,
                field: field.into(),
            }),
        }
    }

    /// A token of a first-layout file: only its request's fingerprint
    /// ([`legacy_fingerprint`]) is known.
    pub fn legacy(fingerprint: u64) -> FieldRequest {
        FieldRequest(Req::Legacy(fingerprint))
    }

    /// The COUNT, or a legacy token's fingerprint.
    pub fn count(&self) -> u64 {
        match &self.0 {
            Req::Inline { count, .. } | Req::Heap { count, .. } => u64::from(*count),
            Req::Legacy(fp) => *fp,
        }
    }

    /// The field; empty for a legacy token.
    pub fn field(&self) -> &[u8] {
        match &self.0 {
            Req::Inline { len, bytes, .. } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            Req::Heap { field, .. } => field,
            Req::Legacy(_) => &[],
        }
    }

    pub fn is_legacy(&self) -> bool {
        matches!(self.0, Req::Legacy(_))
    }
}

impl Request for FieldRequest {
    /// (field, COUNT).
    type Ask<'a> = (&'a [u8], u64);
    const NAME: &'static str = "field or COUNT";

    #[inline]
    fn is(&self, (field, count): (&[u8], u64)) -> bool {
        match &self.0 {
            Req::Legacy(fp) => *fp == legacy_fingerprint(field, count),
            _ => self.count() == count && self.field() == field,
        }
    }

    #[inline]
    fn of((field, count): (&[u8], u64)) -> FieldRequest {
        FieldRequest::new(field, count)
    }

    /// A heap field's allocation at the allocator's size class (jemalloc: 8, then steps of 16
    /// up to 128, of 32 up to 256); nothing for an inline one.
    fn heap_bytes(&self) -> usize {
        match &self.0 {
            Req::Heap { field, .. } => match field.len() {
                n @ 0..=8 => n.next_multiple_of(8),
                n @ 9..=128 => n.next_multiple_of(16),
                n => n.next_multiple_of(32),
            },
            _ => 0,
        }
    }
}

/// One remembered request. The token is held inline (no allocation per token); build one with
/// [`Entry::new`].
#[derive(Clone)]
pub struct Entry<R> {
    token: [u8; MAX_TOKEN_LEN],
    /// The token's length, 1..=MAX_TOKEN_LEN (non-zero: `Option<Entry>` costs no more than
    /// `Entry`). The bytes past it are zero.
    len: NonZeroU8,
    /// The window's business, not the entry's value: the token's keyed hash, valid while the
    /// entry sits in a window that has an index (see [`Window`]), so that the index grows and
    /// rehashes without hashing token bytes again. 32 bits fit in the entry's padding.
    hash: u32,
    /// The first call's reply.
    pub last: u64,
    /// The token counts while the clock reads below this (unix ms).
    pub expires_ms: u64,
    /// The first call's request.
    pub request: R,
}

impl<R: Request> Entry<R> {
    /// An entry for `token`, or `None` when the token breaks the 1..=MAX_TOKEN_LEN rule.
    pub fn new(token: &[u8], last: u64, expires_ms: u64, request: R) -> Option<Entry<R>> {
        let len = NonZeroU8::new(u8::try_from(token.len()).ok()?)?;
        let mut bytes = [0; MAX_TOKEN_LEN];
        bytes.get_mut(..token.len())?.copy_from_slice(token);
        Some(Entry {
            token: bytes,
            len,
            hash: 0,
            last,
            expires_ms,
            request,
        })
    }
}

impl<R> Entry<R> {
    /// The token's bytes.
    pub fn token(&self) -> &[u8] {
        // `len` never exceeds the array (Entry::new), so the default is unreachable.
        self.token
            .get(..usize::from(self.len.get()))
            .unwrap_or_default()
    }
}

impl<R: PartialEq> PartialEq for Entry<R> {
    /// The same request remembered the same way (`hash` is the window's bookkeeping).
    fn eq(&self, other: &Entry<R>) -> bool {
        self.token() == other.token()
            && self.last == other.last
            && self.expires_ms == other.expires_ms
            && self.request == other.request
    }
}

impl<R: Eq> Eq for Entry<R> {}

impl<R: fmt::Debug> fmt::Debug for Entry<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("token", &self.token())
            .field("last", &self.last)
            .field("expires_ms", &self.expires_ms)
            .field("request", &self.request)
            .finish()
    }
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// No live entry for the token: the call reserves.
    Miss,
    /// The token's first call, with the same request, replied `last`.
    Hit(u64),
    /// The token was used for another request (another COUNT or field).
    Conflict,
}

/// The fingerprint a map's token kept in encoding version 1 (and `SEQ.HIDMPSET`'s first form):
/// a 64-bit FNV-1a hash of the field and the count. Unkeyed, so two fields can be crafted to
/// collide; only tokens loaded from such a file are still compared by it ([`FieldRequest`]).
pub fn legacy_fingerprint(field: &[u8], count: u64) -> u64 {
    let mut h = Fnv::default();
    h.write(field);
    h.write(&count.to_le_bytes());
    h.finish()
}

/// FNV-1a, 64-bit: deterministic and cheap. Not keyed, so crafted inputs collide: used only
/// for [`legacy_fingerprint`].
#[derive(Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The token window of one key: a sequence key's remembers COUNTs ([`SeqTokens`]), a map's
/// fields and COUNTs ([`MapTokens`]). `Window` alone names the map's (`core::seqmap::Tokens`).
///
/// Entries are kept in insertion order. The window changes in one way only, [`Window::apply`]:
/// drop the `drop` oldest entries, then append one (replacing an older entry of its token). The
/// command decides `drop` on the primary ([`Window::plan`]: the expired entries at the front,
/// then the oldest while more than the per-key maximum would remain) and replicates it as a
/// number, so a replica or an AOF replay reaches the same window without reading its own clock
/// or configs (see `src/handout/reserve.rs`). Lookups ignore entries expired by the caller's
/// clock; expired entries further back than the first live one stay until they reach the front.
///
/// A ring of slots in insertion order. While it has at most [`SCAN_MAX`] slots a lookup scans
/// them; above, `index` maps each live entry's token hash to its position. The index is built
/// when an `apply` leaves more than `SCAN_MAX` slots and dropped when one leaves `SCAN_MAX` or
/// fewer: small windows (most keys) then hold nothing but the ring, and a window hovering at
/// the boundary rebuilds at most once per `apply`, hashing at most `SCAN_MAX + 1` tokens.
/// Tokens are hashed with a per-process keyed SipHash ([`crate::core::hash::hash`]), so a
/// client cannot craft colliding tokens; if hashes did collide, a probe compares at most every
/// entry of this one window.
#[derive(Clone, Debug)]
pub struct Window<R = FieldRequest> {
    /// In insertion order; `None` where an entry was replaced by a later use of its token
    /// (after it expired), skipped by everything and popped when it reaches the front.
    recs: VecDeque<Option<Entry<R>>>,
    /// The position number of `recs[0]`: positions only grow, so an index entry stays valid
    /// while the front is popped.
    head: u64,
    /// How many slots of `recs` hold an entry.
    live: usize,
    /// Token hash -> position of its entry, for every live entry; present exactly while
    /// `recs` has more than [`SCAN_MAX`] slots. The hash of each indexed entry is its `hash`.
    index: Option<HashTable<u64>>,
    /// Heap bytes the entries' requests hold (their sum, kept as entries come and go).
    request_heap: usize,
}

/// A sequence key's tokens: each remembers its request's COUNT.
pub type SeqTokens = Window<u64>;
/// A map's tokens: each remembers its request's field and COUNT.
pub type MapTokens = Window<FieldRequest>;

impl<R> Default for Window<R> {
    fn default() -> Window<R> {
        Window {
            recs: VecDeque::new(),
            head: 0,
            live: 0,
            index: None,
            request_heap: 0,
        }
    }
}

impl<R: Request> PartialEq for Window<R> {
    /// The same live entries in the same order (placeholders are not state).
    fn eq(&self, other: &Window<R>) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<R: Request + Eq> Eq for Window<R> {}

/// The token's hash as the entries keep it.
fn token_hash(token: &[u8]) -> u32 {
    // The high half of the 64-bit SipHash.
    let h = (crate::core::hash::hash(token) >> 32) as u32;
    #[cfg(test)]
    let h = h & tests::HASH_MASK.with(std::cell::Cell::get);
    h
}

/// The 64-bit hash the index is given: hashbrown picks the bucket with the low bits and the
/// control byte with the top seven, so both halves carry the 32 bits.
fn wide(h: u32) -> u64 {
    let h = u64::from(h);
    h | (h << 32)
}

/// The indexed hash of the entry at `pos` (for the index's growth: no token bytes are
/// hashed). A position with no entry cannot be in the index; it would hash to 0.
fn hash_at<R>(recs: &VecDeque<Option<Entry<R>>>, head: u64, pos: u64) -> u64 {
    pos.checked_sub(head)
        .and_then(|d| usize::try_from(d).ok())
        .and_then(|at| recs.get(at))
        .and_then(Option::as_ref)
        .map_or(0, |e| wide(e.hash))
}

impl<R: Request> Window<R> {
    /// Live entries (expired or not), oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Entry<R>> {
        self.recs.iter().flatten()
    }

    /// How many entries the window holds.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Whether the window holds the token (live or expired).
    pub fn contains(&self, token: &[u8]) -> bool {
        self.entry(token).is_some()
    }

    fn at(&self, pos: u64) -> Option<&Entry<R>> {
        let at = usize::try_from(pos.checked_sub(self.head)?).ok()?;
        self.recs.get(at)?.as_ref()
    }

    /// The position of the token's entry. `hash` gives the token's hash, asked for only when
    /// the window has an index.
    fn position(&self, token: &[u8], hash: impl FnOnce() -> u32) -> Option<u64> {
        match &self.index {
            Some(index) => {
                let h = hash();
                index
                    .find(wide(h), |&pos| {
                        self.at(pos)
                            .is_some_and(|e| e.hash == h && e.token() == token)
                    })
                    .copied()
            }
            None => self
                .recs
                .iter()
                .position(|slot| slot.as_ref().is_some_and(|e| e.token() == token))
                .map(|at| self.head.wrapping_add(at as u64)),
        }
    }

    fn entry(&self, token: &[u8]) -> Option<&Entry<R>> {
        self.at(self.position(token, || token_hash(token))?)
    }

    /// The token's entry if it is live at `now_ms`, compared with the call's request.
    pub fn lookup(&self, token: &[u8], ask: R::Ask<'_>, now_ms: u64) -> Lookup {
        match self.entry(token) {
            Some(e) if e.expires_ms > now_ms => {
                if e.request.is(ask) {
                    Lookup::Hit(e.last)
                } else {
                    Lookup::Conflict
                }
            }
            _ => Lookup::Miss,
        }
    }

    /// How many of the oldest entries to drop before appending one at `now_ms`: those expired
    /// at the front, then as many as keep the window at `max` entries after the append.
    pub fn plan(&self, now_ms: u64, max: usize) -> usize {
        let expired = self.iter().take_while(|e| e.expires_ms <= now_ms).count();
        let keep = self.len().saturating_sub(expired);
        expired + (keep + 1).saturating_sub(max.max(1))
    }

    /// Drops the `drop` oldest entries (all of them when fewer), removes an older entry of the
    /// same token, and appends `e`.
    pub fn apply(&mut self, drop: usize, e: Entry<R>) {
        let mut e = e;
        let mut left = drop;
        while left > 0 {
            let Some(front) = self.recs.pop_front() else {
                break;
            };
            let pos = self.head;
            self.head = self.head.wrapping_add(1);
            if let Some(old) = front {
                self.unindex(&old, pos);
                left -= 1;
            }
        }
        self.trim_front();
        if self.index.is_some() {
            e.hash = token_hash(e.token());
        }
        let hash = e.hash;
        if let Some(pos) = self.position(e.token(), || hash) {
            let old = pos
                .checked_sub(self.head)
                .and_then(|d| usize::try_from(d).ok())
                .and_then(|at| self.recs.get_mut(at))
                .and_then(Option::take);
            if let Some(old) = old {
                self.unindex(&old, pos);
            }
            self.trim_front();
        }
        if self.recs.is_empty() {
            self.head = 0;
        }
        if self.recs.capacity() == 0 {
            self.recs.reserve_exact(FIRST_CAPACITY);
        }
        let pos = self.head.wrapping_add(self.recs.len() as u64);
        self.request_heap = self.request_heap.saturating_add(e.request.heap_bytes());
        self.recs.push_back(Some(e));
        self.live = self.live.saturating_add(1);
        self.fit_index(pos, hash);
    }

    /// Forgets the entry `old` that was at `pos` (it left the ring).
    fn unindex(&mut self, old: &Entry<R>, pos: u64) {
        self.live = self.live.saturating_sub(1);
        self.request_heap = self.request_heap.saturating_sub(old.request.heap_bytes());
        if let Some(index) = &mut self.index {
            if let Ok(found) = index.find_entry(wide(old.hash), |&p| p == pos) {
                found.remove();
            }
        }
    }

    /// After appending the entry at `pos` with `hash` (valid if there is an index): indexes it,
    /// builds the index when the ring has grown past [`SCAN_MAX`] slots, or drops it when the
    /// ring has shrunk to `SCAN_MAX` or fewer.
    fn fit_index(&mut self, pos: u64, hash: u32) {
        if self.recs.len() <= SCAN_MAX {
            self.index = None;
            return;
        }
        let (recs, head) = (&self.recs, self.head);
        if let Some(index) = &mut self.index {
            index.insert_unique(wide(hash), pos, |&p| hash_at(recs, head, p));
            return;
        }
        for e in self.recs.iter_mut().flatten() {
            e.hash = token_hash(e.token());
        }
        let (recs, head) = (&self.recs, self.head);
        let mut index = HashTable::with_capacity(self.live);
        for (at, slot) in recs.iter().enumerate() {
            if let Some(e) = slot {
                let p = head.wrapping_add(at as u64);
                index.insert_unique(wide(e.hash), p, |&q| hash_at(recs, head, q));
            }
        }
        self.index = Some(index);
    }

    /// Pops placeholders off the front, so the front is always an entry.
    fn trim_front(&mut self) {
        while let Some(None) = self.recs.front() {
            self.recs.pop_front();
            self.head = self.head.wrapping_add(1);
        }
    }

    /// Bytes the window holds on the heap (an estimate for MEMORY USAGE): the ring's buffer,
    /// which holds the tokens inline, the index's table when there is one, as allocated, and
    /// what the requests hold (a map's fields).
    pub fn heap_bytes(&self) -> usize {
        let ring = self
            .recs
            .capacity()
            .saturating_mul(std::mem::size_of::<Option<Entry<R>>>());
        ring.saturating_add(self.index.as_ref().map_or(0, HashTable::allocation_size))
            .saturating_add(self.request_heap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    thread_local! {
        /// ANDed into every token hash made on this thread (tests run one per thread): 0 makes
        /// all tokens collide, 1 sorts them into two classes.
        pub(super) static HASH_MASK: std::cell::Cell<u32> = const { std::cell::Cell::new(u32::MAX) };
    }

    fn e(token: &str, last: u64, expires_ms: u64) -> Entry<u64> {
        Entry::new(token.as_bytes(), last, expires_ms, 1).unwrap()
    }

    fn tokens(w: &SeqTokens) -> Vec<&[u8]> {
        w.iter().map(Entry::token).collect()
    }

    /// The window's own bookkeeping agrees with its ring: the front is an entry, `live` counts
    /// the entries, the index exists exactly above SCAN_MAX slots and finds every entry at its
    /// position under its token's hash.
    fn check_invariants<R: Request>(w: &Window<R>) {
        assert!(!matches!(w.recs.front(), Some(None)));
        assert_eq!(w.live, w.iter().count());
        assert_eq!(w.index.is_some(), w.recs.len() > SCAN_MAX);
        if let Some(index) = &w.index {
            assert_eq!(index.len(), w.live);
            for (at, slot) in w.recs.iter().enumerate() {
                if let Some(e) = slot {
                    assert_eq!(e.hash, token_hash(e.token()));
                    let pos = w.head + at as u64;
                    assert_eq!(index.find(wide(e.hash), |&p| p == pos), Some(&pos));
                }
            }
        }
    }

    #[test]
    fn entry_holds_1_to_64_bytes_inline() {
        assert_eq!(Entry::new(b"", 1, 2, 3u64), None);
        assert_eq!(Entry::new(&[7; MAX_TOKEN_LEN + 1], 1, 2, 3u64), None);
        for len in [1, 36, MAX_TOKEN_LEN] {
            let token: Vec<u8> = (1..=len as u8).collect();
            let e = Entry::new(&token, 1, 2, 3u64).unwrap();
            assert_eq!(e.token(), &token[..]);
            assert_eq!((e.last, e.expires_ms, e.request), (1, 2, 3u64));
        }
        // A prefix is another token.
        assert_ne!(Entry::new(b"ab", 1, 2, 3u64), Entry::new(b"a", 1, 2, 3u64));
        // The slot of a window is the entry itself: no heap, no tag. A sequence key's entry is
        // 96 bytes, as before requests were kept whole; a map's holds 16 more (the field's
        // pointer and length: the field itself is on the heap).
        assert_eq!(
            std::mem::size_of::<Option<Entry<u64>>>(),
            std::mem::size_of::<Entry<u64>>()
        );
        assert_eq!(
            std::mem::size_of::<Option<Entry<FieldRequest>>>(),
            std::mem::size_of::<Entry<FieldRequest>>()
        );
        assert_eq!(std::mem::size_of::<Entry<u64>>(), MAX_TOKEN_LEN + 32);
        assert_eq!(
            std::mem::size_of::<Entry<FieldRequest>>(),
            MAX_TOKEN_LEN + 48
        );
    }

    #[test]
    fn the_first_apply_allocates_the_ring_only() {
        let mut w = SeqTokens::default();
        assert_eq!(w.heap_bytes(), 0);
        w.apply(0, e("a", 1, 100));
        assert_eq!(w.recs.capacity(), FIRST_CAPACITY);
        assert!(w.index.is_none());
        assert_eq!(
            w.heap_bytes(),
            FIRST_CAPACITY * std::mem::size_of::<Option<Entry<u64>>>()
        );
    }

    /// Lookups of every probe, at `now`.
    fn answers(w: &SeqTokens, probes: &[String], now: u64) -> Vec<Lookup> {
        probes
            .iter()
            .map(|t| w.lookup(t.as_bytes(), 1, now))
            .collect()
    }

    #[test]
    fn the_index_answers_as_the_scan_does_built_dropped_and_rebuilt() {
        let probes: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
        for mask in [u32::MAX, 1, 0] {
            HASH_MASK.with(|m| m.set(mask));
            let mut w = SeqTokens::default();
            for (i, t) in (0..12).zip(&probes) {
                w.apply(0, e(t, i, 100 + i));
                check_invariants(&w);
            }
            assert!(w.index.is_some(), "built past {SCAN_MAX}");
            // At 105, t0..t5 have expired; t6..t11 answer their `last`.
            let hits = |live: &[(usize, u64)]| -> Vec<Lookup> {
                let mut v = vec![Lookup::Miss; probes.len()];
                for &(i, last) in live {
                    v[i] = Lookup::Hit(last);
                }
                v
            };
            let mut live: Vec<(usize, u64)> = (6..12).map(|i| (i, i as u64)).collect();
            assert_eq!(answers(&w, &probes, 105), hits(&live), "mask {mask:#x}");
            assert_eq!(w.lookup(b"t7", 2, 105), Lookup::Conflict);
            // A scan-only window with its newest SCAN_MAX entries.
            let mut scanned = SeqTokens::default();
            for e in w.iter().skip(12 - SCAN_MAX) {
                scanned.apply(0, e.clone());
            }
            assert!(scanned.index.is_none());
            // Down to SCAN_MAX slots (t0..t5 dropped): the index goes, the answers stay.
            w.apply(12 - SCAN_MAX + 1, e("t12", 12, 200));
            check_invariants(&w);
            assert!(w.index.is_none(), "dropped at {SCAN_MAX}");
            w.apply(1, e("t13", 13, 200));
            check_invariants(&w);
            assert!(w.index.is_none());
            live.extend([(12, 12), (13, 13)]);
            assert_eq!(answers(&w, &probes, 105), hits(&live), "mask {mask:#x}");
            scanned.apply(1, e("t12", 12, 200));
            scanned.apply(1, e("t13", 13, 200));
            assert_eq!(scanned, w);
            assert_eq!(answers(&scanned, &probes, 105), hits(&live));
            // Past SCAN_MAX again (a reused token leaves a placeholder): rebuilt, same answers.
            w.apply(0, e("t14", 14, 200));
            w.apply(0, e("t12", 15, 300));
            check_invariants(&w);
            assert!(w.index.is_some(), "rebuilt past {SCAN_MAX}");
            live.retain(|&(i, _)| i != 12);
            live.extend([(12, 15), (14, 14)]);
            assert_eq!(answers(&w, &probes, 105), hits(&live), "mask {mask:#x}");
        }
    }

    #[test]
    fn lookup_hits_misses_and_conflicts() {
        let mut w = SeqTokens::default();
        w.apply(0, e("a", 5, 100));
        assert_eq!(w.lookup(b"a", 1, 99), Lookup::Hit(5));
        assert_eq!(w.lookup(b"a", 2, 99), Lookup::Conflict);
        assert_eq!(
            w.lookup(b"a", 1, 100),
            Lookup::Miss,
            "expired at its expiry"
        );
        assert_eq!(w.lookup(b"b", 1, 0), Lookup::Miss);
    }

    #[test]
    fn plan_drops_expired_front_then_oldest_over_max() {
        let mut w = SeqTokens::default();
        for (i, t) in ["a", "b", "c", "d"].iter().enumerate() {
            w.apply(0, e(t, i as u64, 10 * (i as u64 + 1)));
        }
        // expiries 10, 20, 30, 40
        assert_eq!(w.plan(0, 100), 0);
        assert_eq!(w.plan(20, 100), 2, "a and b expired");
        assert_eq!(w.plan(0, 4), 1, "4 kept + 1 new over a max of 4");
        assert_eq!(w.plan(20, 2), 3, "2 expired, then 2 kept + 1 new over 2");
        assert_eq!(w.plan(0, 0), 4, "a max of 0 acts as 1");
        w.apply(3, e("e", 9, 50));
        assert_eq!(tokens(&w), [b"d", b"e"]);
    }

    #[test]
    fn expired_entries_behind_a_live_one_stay() {
        let mut w = SeqTokens::default();
        w.apply(0, e("a", 1, 100));
        w.apply(0, e("b", 2, 10));
        assert_eq!(w.plan(50, 10), 0);
        assert_eq!(w.lookup(b"b", 1, 50), Lookup::Miss);
    }

    #[test]
    fn reusing_an_expired_token_moves_it_to_the_back() {
        let mut w = SeqTokens::default();
        w.apply(0, e("a", 1, 100));
        w.apply(0, e("b", 2, 10));
        w.apply(0, e("c", 3, 100));
        w.apply(0, e("b", 4, 200));
        assert_eq!(tokens(&w), [b"a", b"c", b"b"]);
        assert_eq!(w.lookup(b"b", 1, 150), Lookup::Hit(4));
        assert_eq!(w.len(), 3);
        // Reusing the front token leaves no placeholder at the front.
        w.apply(0, e("a", 5, 300));
        assert_eq!(tokens(&w), [b"c", b"b", b"a"]);
        w.apply(1, e("d", 6, 300));
        assert_eq!(tokens(&w), [b"b", b"a", b"d"]);
        assert_eq!(w.lookup(b"c", 1, 0), Lookup::Miss);
        assert_eq!(w.lookup(b"a", 1, 0), Lookup::Hit(5));
    }

    #[test]
    fn a_map_request_is_its_field_and_count_and_a_legacy_one_its_fingerprint() {
        let r = FieldRequest::of((b"f", 1));
        assert!(r.is((b"f", 1)));
        assert!(!r.is((b"f", 2)));
        assert!(!r.is((b"g", 1)));
        assert!(!r.is((b"ff", 1)), "a longer field is another field");
        assert!(!r.is((b"f\0", 1)), "so is one with a zero byte more");
        // Inline up to INLINE_FIELD bytes, then on the heap; the same rules either way.
        for len in [1, INLINE_FIELD, INLINE_FIELD + 1, 256] {
            let f: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let r = FieldRequest::new(&f, 1_000_000);
            assert_eq!((r.field(), r.count()), (&f[..], 1_000_000));
            assert!(r.is((&f, 1_000_000)) && !r.is((&f, 999_999)));
            let mut g = f.clone();
            *g.last_mut().unwrap() ^= 1;
            assert!(!r.is((&g, 1_000_000)));
            let heap = if len <= INLINE_FIELD {
                0
            } else {
                len.next_multiple_of(if len <= 128 { 16 } else { 32 })
            };
            assert_eq!(r.heap_bytes(), heap, "{len}");
        }
        // Encoding version 1's fingerprint: FNV-1a of field and count, so two crafted fields
        // (issue 28) collide, and only a legacy token is fooled by them.
        let a: &[u8] = &[0x46, 0xe9, 0xc7, 0x40, 0x61, 0x37, 0x7e, 0xf1, 0xa7];
        let b: &[u8] = &[0x46, 0xbc, 0x73, 0x36, 0x8d, 0xbe, 0x2e, 0xea, 0xd0];
        assert_eq!(legacy_fingerprint(a, 3), legacy_fingerprint(b, 3));
        let legacy = FieldRequest::legacy(legacy_fingerprint(a, 3));
        assert!(legacy.is_legacy() && legacy.is((a, 3)) && !legacy.is((a, 4)));
        assert_eq!(legacy.heap_bytes(), 0);
        assert!(FieldRequest::of((a, 3)).is((a, 3)));
        assert!(!FieldRequest::of((a, 3)).is((b, 3)));
        // Persisted with every token of those files, so the hash must stay FNV-1a: the
        // published test vectors.
        for (input, want) in [
            (&b"a"[..], 0xaf63_dc4c_8601_ec8c_u64),
            (b"foobar", 0x8594_4171_f739_67e8),
        ] {
            let mut h = Fnv::default();
            h.write(input);
            assert_eq!(h.finish(), want);
        }
    }

    /// A map's window counts the fields it holds, as tokens come and go.
    #[test]
    fn a_map_window_counts_its_fields_heap() {
        let mut w = MapTokens::default();
        // fields of 20 bytes: on the heap, 32 bytes each
        let base = |w: &MapTokens| {
            w.recs.capacity() * std::mem::size_of::<Option<Entry<FieldRequest>>>()
                + w.index.as_ref().map_or(0, HashTable::allocation_size)
        };
        for i in 0..20u64 {
            let f = format!("field-{i:014}");
            let en = Entry::new(
                format!("t{i}").as_bytes(),
                i,
                100,
                FieldRequest::new(f.as_bytes(), 1),
            );
            w.apply(usize::from(i >= 10), en.unwrap());
            check_invariants(&w);
        }
        assert_eq!(w.len(), 10);
        assert_eq!(w.heap_bytes(), base(&w) + 10 * 32);
        // reusing a token replaces its entry (and its field)
        let en = Entry::new(b"t15", 99, 200, FieldRequest::new(&[b'x'; 40], 1)).unwrap();
        w.apply(0, en);
        assert_eq!(w.heap_bytes(), base(&w) + 9 * 32 + 48);
        w.apply(
            100,
            Entry::new(b"z", 1, 1, FieldRequest::legacy(7)).unwrap(),
        );
        assert_eq!(w.heap_bytes(), base(&w));
    }

    /// What MEMORY USAGE reports per token of a full default window (1,000 tokens of 36 bytes,
    /// a UUID's text): printed for the record (`--nocapture`), and never below the tokens'
    /// own bytes.
    #[test]
    fn heap_bytes_per_token_at_a_thousand_tokens() {
        let mut w = SeqTokens::default();
        for i in 0..1000u64 {
            let token = format!("{i:036}");
            w.apply(0, e(&token, i, 100));
        }
        assert_eq!(w.len(), 1000);
        let per_token = w.heap_bytes() / w.len();
        println!("heap bytes per token at 1,000 tokens of 36 bytes: {per_token}");
        assert!(per_token >= 36, "{per_token}");
    }

    /// One step against the model: a plain list of entries, oldest first.
    #[derive(Clone, Debug)]
    enum Op {
        /// SEQ.NEXT ... IDMP on the primary: the clock moves `tick` ms, a lookup, and on a miss
        /// the planned drop and the append.
        Call {
            token: u8,
            fp: u64,
            tick: u64,
            ttl: u64,
            max: usize,
        },
        /// A replayed record (SEQ.IDMPSET): any drop, no lookup.
        Apply { token: u8, drop: usize },
    }

    /// Distinct tokens of the model: enough for windows well past SCAN_MAX.
    const TOKENS: u8 = 20;

    /// Mostly growing (maxes above SCAN_MAX, replays that drop nothing), sometimes shrinking
    /// (small maxes, large drops, expiry as the clock moves), so that the ring crosses
    /// SCAN_MAX both ways in about 3 runs of 4 (counted once with a throwaway counter: about 2
    /// index builds and 2 drops per run on average).
    fn op() -> impl Strategy<Value = Op> {
        let max = prop_oneof![3 => 9usize..16, 1 => 0usize..9];
        let drop = prop_oneof![3 => Just(0usize), 1 => 1usize..12];
        // now and then a jump that expires much of the window at once
        let tick = prop_oneof![8 => 0u64..4, 1 => 0u64..80];
        prop_oneof![
            (0u8..TOKENS, 0u64..3, tick, 1u64..60, max).prop_map(|(token, fp, tick, ttl, max)| {
                Op::Call {
                    token,
                    fp,
                    tick,
                    ttl,
                    max,
                }
            }),
            (0u8..TOKENS, drop).prop_map(|(token, drop)| Op::Apply { token, drop }),
        ]
    }

    proptest! {
        // 1,024 runs: about 2,000 index builds and as many drops.
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Windows of up to 15 entries by the plan (COUNT-style calls) and up to 20 by replayed
        /// records, so the ring crosses SCAN_MAX both ways; with real hashes, all colliding,
        /// or two classes of them.
        #[test]
        fn window_matches_a_list_model(
            mask in prop_oneof![Just(u32::MAX), Just(0), Just(1)],
            ops in proptest::collection::vec(op(), 1..160),
        ) {
            HASH_MASK.with(|m| m.set(mask));
            let mut w = SeqTokens::default();
            let mut model: Vec<Entry<u64>> = Vec::new();
            let mut clock = 0u64;
            for (i, op) in ops.into_iter().enumerate() {
                let i = i as u64;
                match op {
                    Op::Call { token, fp, tick, ttl, max } => {
                        clock += tick;
                        let t = [token];
                        let want = match model.iter().find(|e| e.token() == t && e.expires_ms > clock) {
                            None => Lookup::Miss,
                            Some(e) if e.request == fp => Lookup::Hit(e.last),
                            Some(_) => Lookup::Conflict,
                        };
                        prop_assert_eq!(w.lookup(&t, fp, clock), want);
                        if want == Lookup::Miss {
                            let expired = model.iter().take_while(|e| e.expires_ms <= clock).count();
                            let keep = model.len() - expired;
                            let drop = expired + (keep + 1).saturating_sub(max.max(1));
                            prop_assert_eq!(w.plan(clock, max), drop);
                            let new = Entry::new(&t, i, clock + ttl, fp).unwrap();
                            model.drain(..drop.min(model.len()));
                            model.retain(|e| e.token() != t);
                            model.push(new.clone());
                            w.apply(drop, new);
                            prop_assert!(w.len() <= max.max(1));
                        }
                    }
                    Op::Apply { token, drop } => {
                        let t = [token];
                        let new = Entry::new(&t, i, clock + 5, 0).unwrap();
                        model.drain(..drop.min(model.len()));
                        model.retain(|e| e.token() != t);
                        model.push(new.clone());
                        w.apply(drop, new);
                    }
                }
                prop_assert_eq!(w.iter().cloned().collect::<Vec<_>>(), model.clone());
                prop_assert_eq!(w.len(), model.len());
                check_invariants(&w);
                for t in 0..TOKENS {
                    prop_assert_eq!(w.contains(&[t]), model.iter().any(|e| e.token() == [t]));
                }
            }
        }
    }
}
