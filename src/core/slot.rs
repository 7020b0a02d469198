//! The `slot` target hash: the Redis Cluster hash slot of the target (CRC16-XMODEM with
//! hash-tag rules, 14 bits) above 8 bits of a murmur3 hash of the whole target.
//!
//! Two IDs with equal hash then come from the same slot, hence from the same primary, whose
//! per-node generator already makes them unique: uniqueness holds cluster-wide without node bits.

use crc::{Crc, CRC_16_XMODEM};

const CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_XMODEM);

/// The part of a key Redis Cluster hashes: the content of the first `{...}` if it is non-empty,
/// else the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    let rest = key.get(open + 1..).unwrap_or_default();
    match rest.iter().position(|&b| b == b'}') {
        Some(close) if close > 0 => rest.get(..close).unwrap_or(key),
        _ => key,
    }
}

/// The Redis Cluster hash slot of `key`, 0..16383.
pub fn key_slot(key: &[u8]) -> u16 {
    CRC16.checksum(hash_tag(key)) & 0x3FFF
}

/// Low 8 bits of murmur3 (x86, 32-bit, seed 0) of the whole target.
fn murmur3_low8(target: &[u8]) -> u32 {
    // Reading from an in-memory slice cannot fail.
    murmur3::murmur3_32(&mut std::io::Cursor::new(target), 0).unwrap_or(0) & 0xFF
}

/// The 22-bit `slot` mode hash: slot << 8 | murmur3 low 8 bits.
pub fn slot_hash22(target: &[u8]) -> u32 {
    (u32::from(key_slot(target)) << 8) | murmur3_low8(target)
}

/// The slot a `slot`-mode hash carries: its top 14 bits.
pub fn slot_of_hash22(hash: u32) -> u16 {
    ((hash >> 8) & 0x3FFF) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` in Redis.
        let cases: &[(&[u8], u16)] = &[
            (b"", 0),
            (b"foo", 12182),
            (b"bar", 5061),
            (b"123456789", 12739),
            (b"{user1000}.following", 3443),
            (b"{user1000}.followers", 3443),
            (b"user1000", 3443),
            (b"foo{}{bar}", 8363),
            (b"foo{{bar}}zap", 4015),
            (b"foo{bar}{zap}", 5061),
        ];
        for &(k, slot) in cases {
            assert_eq!(key_slot(k), slot, "{}", String::from_utf8_lossy(k));
        }
    }

    #[test]
    fn hash_layout() {
        for t in [&b"conv:42"[..], b"{conv:42}:x", b"", b"\xff\x00"] {
            let h = slot_hash22(t);
            assert!(h < (1 << 22));
            assert_eq!(slot_of_hash22(h), key_slot(t));
        }
        // same tag, same slot, (usually) different low bits
        assert_eq!(
            slot_of_hash22(slot_hash22(b"{c}a")),
            slot_of_hash22(slot_hash22(b"{c}b"))
        );
    }
}
