//! Idempotent allocation (IDMP), Redis-free: the token window of one sequence key.
//!
//! A token is what a client sends with `SEQ.NEXT ... IDMP token` (1..64 bytes, e.g. its message
//! ID); the window remembers, per token, the first call's reply (`last`), when the token stops
//! counting (`expires_ms`, absolute unix ms) and a fingerprint of the request (its COUNT, and
//! for a map its field), so that a retry gets the first answer and a different request under
//! the same token is refused instead of answered with another request's reservation.
//!
//! Entries are kept in insertion order. The window changes in one way only, [`Window::apply`]:
//! drop the `drop` oldest entries, then append one. The command decides `drop` on the primary
//! ([`Window::plan`]: the expired entries at the front, then the oldest while more than the
//! per-key maximum would remain) and replicates it as a number, so a replica or an AOF replay
//! reaches the same window without reading its own clock or configs (see
//! `src/commands/seq.rs`). Lookups ignore entries expired by the caller's clock; expired
//! entries further back than the first live one stay until they reach the front.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Longest token, in bytes (the shortest is 1).
pub const MAX_TOKEN_LEN: usize = 64;

/// One remembered request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub token: Box<[u8]>,
    /// The first call's reply.
    pub last: u64,
    /// The token counts while the clock reads below this (unix ms).
    pub expires_ms: u64,
    /// [`fingerprint`] of the first call's request.
    pub fingerprint: u64,
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

/// The fingerprint of a request: its COUNT alone for a sequence key (`field` empty), else a
/// 64-bit FNV-1a hash of the field and the count (a map's fields are 1..256 bytes, never
/// empty). Stored with each token and persisted, so it must never change between builds.
pub fn fingerprint(field: &[u8], count: u64) -> u64 {
    if field.is_empty() {
        return count;
    }
    let mut h = Fnv::default();
    h.write(field);
    h.write(&count.to_le_bytes());
    h.finish()
}

/// FNV-1a, 64-bit: deterministic and cheap for short tokens. Not keyed, so crafted tokens can
/// collide; the cost is bounded by the window's size (`imid.seq-idmp-max`) on that one key.
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

/// The token window of one key.
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// In insertion order; `None` where an entry was replaced by a later use of its token
    /// (after it expired), skipped by everything and popped when it reaches the front.
    recs: VecDeque<Option<Entry>>,
    /// The position number of `recs[0]`: positions only grow, so an index entry stays valid
    /// while the front is popped.
    head: u64,
    /// Token -> position of its entry.
    index: HashMap<Box<[u8]>, u64, BuildHasherDefault<Fnv>>,
}

impl PartialEq for Window {
    /// The same live entries in the same order (placeholders are not state).
    fn eq(&self, other: &Window) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Window {}

impl Window {
    /// Live entries (expired or not), oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.recs.iter().flatten()
    }

    /// How many entries the window holds.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Whether the window holds the token (live or expired).
    pub fn contains(&self, token: &[u8]) -> bool {
        self.index.contains_key(token)
    }

    fn entry(&self, token: &[u8]) -> Option<&Entry> {
        let pos = *self.index.get(token)?;
        let at = usize::try_from(pos.checked_sub(self.head)?).ok()?;
        self.recs.get(at)?.as_ref()
    }

    /// The token's entry if it is live at `now_ms`, compared with the request's fingerprint.
    pub fn lookup(&self, token: &[u8], fingerprint: u64, now_ms: u64) -> Lookup {
        match self.entry(token) {
            Some(e) if e.expires_ms > now_ms => {
                if e.fingerprint == fingerprint {
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
    pub fn apply(&mut self, drop: usize, e: Entry) {
        let mut left = drop;
        while left > 0 {
            let Some(front) = self.recs.pop_front() else {
                break;
            };
            self.head = self.head.wrapping_add(1);
            if let Some(old) = front {
                self.index.remove(&old.token);
                left -= 1;
            }
        }
        self.trim_front();
        if let Some(pos) = self.index.remove(&e.token) {
            let at = pos
                .checked_sub(self.head)
                .and_then(|d| usize::try_from(d).ok());
            if let Some(slot) = at.and_then(|at| self.recs.get_mut(at)) {
                *slot = None;
            }
            self.trim_front();
        }
        if self.recs.is_empty() {
            self.head = 0;
        }
        let pos = self.head.wrapping_add(self.recs.len() as u64);
        self.index.insert(e.token.clone(), pos);
        self.recs.push_back(Some(e));
    }

    /// Pops placeholders off the front, so the front is always an entry.
    fn trim_front(&mut self) {
        while let Some(None) = self.recs.front() {
            self.recs.pop_front();
            self.head = self.head.wrapping_add(1);
        }
    }

    /// Bytes the window holds on the heap (an estimate for MEMORY USAGE: both copies of each
    /// token, the entry slots and the index's buckets).
    pub fn heap_bytes(&self) -> usize {
        let tokens: usize = self.iter().map(|e| 2 * e.token.len()).sum();
        let slot = std::mem::size_of::<Option<Entry>>();
        let bucket = std::mem::size_of::<(Box<[u8]>, u64)>() + 1;
        tokens + self.recs.capacity() * slot + self.index.capacity() * bucket
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(token: &str, last: u64, expires_ms: u64) -> Entry {
        Entry {
            token: token.as_bytes().into(),
            last,
            expires_ms,
            fingerprint: 1,
        }
    }

    fn tokens(w: &Window) -> Vec<&[u8]> {
        w.iter().map(|e| &*e.token).collect()
    }

    #[test]
    fn lookup_hits_misses_and_conflicts() {
        let mut w = Window::default();
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
        let mut w = Window::default();
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
        let mut w = Window::default();
        w.apply(0, e("a", 1, 100));
        w.apply(0, e("b", 2, 10));
        assert_eq!(w.plan(50, 10), 0);
        assert_eq!(w.lookup(b"b", 1, 50), Lookup::Miss);
    }

    #[test]
    fn reusing_an_expired_token_moves_it_to_the_back() {
        let mut w = Window::default();
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
    fn fingerprint_is_count_without_field_and_stable_with_one() {
        assert_eq!(fingerprint(b"", 7), 7);
        assert_ne!(fingerprint(b"f", 1), fingerprint(b"f", 2));
        assert_ne!(fingerprint(b"f", 1), fingerprint(b"g", 1));
        // Persisted with every token, so the hash must stay FNV-1a: the published test vectors.
        for (input, want) in [
            (&b"a"[..], 0xaf63_dc4c_8601_ec8c_u64),
            (b"foobar", 0x8594_4171_f739_67e8),
        ] {
            let mut h = Fnv::default();
            h.write(input);
            assert_eq!(h.finish(), want);
        }
    }

    /// What MEMORY USAGE reports per token of a full default window (1,000 tokens of 36 bytes,
    /// a UUID's text): printed for the record (`--nocapture`), and never below the tokens'
    /// own bytes.
    #[test]
    fn heap_bytes_per_token_at_a_thousand_tokens() {
        let mut w = Window::default();
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
        Call {
            token: u8,
            fp: u64,
            now: u64,
            ttl: u64,
            max: usize,
        },
        Apply {
            token: u8,
            drop: usize,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..12, 0u64..3, 0u64..200, 1u64..60, 0usize..8).prop_map(
                |(token, fp, now, ttl, max)| Op::Call {
                    token,
                    fp,
                    now,
                    ttl,
                    max
                }
            ),
            (0u8..12, 0usize..4).prop_map(|(token, drop)| Op::Apply { token, drop }),
        ]
    }

    proptest! {
        #[test]
        fn window_matches_a_list_model(ops in proptest::collection::vec(op(), 1..80)) {
            let mut w = Window::default();
            let mut model: Vec<Entry> = Vec::new();
            let mut clock = 0u64;
            for (i, op) in ops.into_iter().enumerate() {
                let i = i as u64;
                match op {
                    Op::Call { token, fp, now, ttl, max } => {
                        clock = clock.max(now);
                        let t = [token];
                        let want = match model.iter().find(|e| *e.token == t && e.expires_ms > clock) {
                            None => Lookup::Miss,
                            Some(e) if e.fingerprint == fp => Lookup::Hit(e.last),
                            Some(_) => Lookup::Conflict,
                        };
                        prop_assert_eq!(w.lookup(&t, fp, clock), want);
                        if want == Lookup::Miss {
                            let expired = model.iter().take_while(|e| e.expires_ms <= clock).count();
                            let keep = model.len() - expired;
                            let drop = expired + (keep + 1).saturating_sub(max.max(1));
                            prop_assert_eq!(w.plan(clock, max), drop);
                            let new = Entry { token: t.into(), last: i, expires_ms: clock + ttl, fingerprint: fp };
                            model.drain(..drop.min(model.len()));
                            model.retain(|e| *e.token != t);
                            model.push(new.clone());
                            w.apply(drop, new);
                            prop_assert!(w.len() <= max.max(1));
                        }
                    }
                    Op::Apply { token, drop } => {
                        let t = [token];
                        let new = Entry { token: t.into(), last: i, expires_ms: clock + 5, fingerprint: 0 };
                        model.drain(..drop.min(model.len()));
                        model.retain(|e| *e.token != t);
                        model.push(new.clone());
                        w.apply(drop, new);
                    }
                }
                prop_assert_eq!(w.iter().cloned().collect::<Vec<_>>(), model.clone());
                prop_assert_eq!(w.len(), model.len());
                prop_assert!(!matches!(w.recs.front(), Some(None)));
            }
        }
    }
}
