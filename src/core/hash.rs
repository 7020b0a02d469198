//! The one keyed hash of byte strings shared by the sequence map (field names) and the IDMP
//! token window (tokens).
//!
//! SipHash-1-3 (the function of std's `HashMap`) with one random key per process, so a client
//! cannot choose names that collide (it would turn every probe into a long scan), even though
//! `SEQ.HSCAN`'s cursors show it hash values: SipHash is a keyed pseudo-random function, its
//! outputs tell nothing of the key. Written here as one pass over the bytes with the keyed state
//! set up once, because a map's insert hashes several names (its own, and the entries a resize
//! moves or a probe passes): std's streaming hasher costs about 1.4 times as many instructions
//! for a 10-byte name. Anything ordered by it (the map's scan cursor) holds within one process.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// SipHash's state right after keying (`k0`, `k1` xored into its constants).
#[derive(Clone, Copy, Debug)]
struct State {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
}

impl State {
    const fn keyed(k0: u64, k1: u64) -> State {
        State {
            v0: k0 ^ 0x736f_6d65_7073_6575,
            v1: k1 ^ 0x646f_7261_6e64_6f6d,
            v2: k0 ^ 0x6c79_6765_6e65_7261,
            v3: k1 ^ 0x7465_6462_7974_6573,
        }
    }

    #[inline(always)]
    fn round(&mut self) {
        self.v0 = self.v0.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(13) ^ self.v0;
        self.v0 = self.v0.rotate_left(32);
        self.v2 = self.v2.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(16) ^ self.v2;
        self.v0 = self.v0.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(21) ^ self.v0;
        self.v2 = self.v2.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(17) ^ self.v2;
        self.v2 = self.v2.rotate_left(32);
    }

    #[inline(always)]
    fn compress<const C: usize>(&mut self, m: u64) {
        self.v3 ^= m;
        for _ in 0..C {
            self.round();
        }
        self.v0 ^= m;
    }
}

/// The little-endian word of up to 8 bytes (zeros above).
#[inline(always)]
fn word(b: &[u8]) -> u64 {
    if let Ok(w) = <[u8; 8]>::try_from(b) {
        return u64::from_le_bytes(w);
    }
    let mut out = 0u64;
    let mut shift = 0u32;
    let mut rest = b;
    if let Some((four, tail)) = rest.split_first_chunk::<4>() {
        out = u64::from(u32::from_le_bytes(*four));
        shift = 32;
        rest = tail;
    }
    if let Some((two, tail)) = rest.split_first_chunk::<2>() {
        out |= u64::from(u16::from_le_bytes(*two)) << shift;
        shift += 16;
        rest = tail;
    }
    if let Some(&one) = rest.first() {
        out |= u64::from(one) << shift;
    }
    out
}

/// SipHash-C-D of `bytes` from the keyed state `s`.
#[inline(always)]
fn siphash<const C: usize, const D: usize>(mut s: State, bytes: &[u8]) -> u64 {
    let mut blocks = bytes.chunks_exact(8);
    for b in &mut blocks {
        s.compress::<C>(word(b));
    }
    let rest = blocks.remainder();
    let last = ((bytes.len() as u64) << 56) | word(rest);
    s.compress::<C>(last);
    s.v2 ^= 0xff;
    for _ in 0..D {
        s.round();
    }
    s.v0 ^ s.v1 ^ s.v2 ^ s.v3
}

/// This process's keyed state: a 128-bit key drawn from the randomness std seeds its hash maps
/// with (each half the SipHash of a constant under a fresh `RandomState`'s random key).
fn keyed() -> State {
    static KEYED: OnceLock<State> = OnceLock::new();
    *KEYED.get_or_init(|| {
        let r = RandomState::new();
        State::keyed(
            r.hash_one(0x6b30_u64), // "k0"
            r.hash_one(0x6b31_u64), // "k1"
        )
    })
}

/// The 64-bit keyed hash of `bytes`.
#[inline]
pub fn hash(bytes: &[u8]) -> u64 {
    siphash::<1, 3>(keyed(), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same code with SipHash-2-4's rounds against std's SipHash-2-4 (the reference, which
    /// takes explicit keys), for every length a field name or a token can have and more:
    /// the block loop, each tail length and the length byte.
    #[test]
    #[allow(deprecated)]
    fn matches_the_reference_siphash() {
        use std::hash::Hasher;
        let keys = [
            (0u64, 0u64),
            (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908),
            (u64::MAX, 0x1234_5678_9abc_def0),
        ];
        let data: Vec<u8> = (0..400u32).map(|i| (i * 131 + 7) as u8).collect();
        for (k0, k1) in keys {
            for len in 0..=300 {
                let b = &data[len / 3..len / 3 + len];
                let mut r = std::hash::SipHasher::new_with_keys(k0, k1);
                r.write(b);
                assert_eq!(
                    siphash::<2, 4>(State::keyed(k0, k1), b),
                    r.finish(),
                    "len {len}"
                );
            }
        }
    }

    /// SipHash-2-4's published test vector (Aumasson and Bernstein, appendix A): key 00..0f,
    /// message 00..0e.
    #[test]
    fn the_papers_vector() {
        let msg: Vec<u8> = (0..15).collect();
        let s = State::keyed(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        assert_eq!(siphash::<2, 4>(s, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn keyed_per_process_and_stable_within_it() {
        assert_eq!(hash(b"f:00000001"), hash(b"f:00000001"));
        assert_ne!(hash(b"f:00000001"), hash(b"f:00000002"));
        assert_ne!(hash(b""), hash(b"\0"));
        // Not the unkeyed function.
        assert_ne!(hash(b"abc"), siphash::<1, 3>(State::keyed(0, 0), b"abc"));
    }
}
