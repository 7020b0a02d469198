//! The one keyed hash of byte strings shared by the sequence map (field names) and the IDMP
//! token window (tokens).
//!
//! std's SipHash-1-3 with one random key per process: no crate to add, and a client cannot
//! choose names that collide (it would turn every probe into a long scan). Anything ordered by
//! it (the map's scan cursor) therefore holds within one process only.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

fn hasher() -> &'static RandomState {
    static H: OnceLock<RandomState> = OnceLock::new();
    H.get_or_init(RandomState::new)
}

/// The 64-bit keyed hash of `bytes`.
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h = hasher().build_hasher();
    h.write(bytes);
    h.finish()
}
