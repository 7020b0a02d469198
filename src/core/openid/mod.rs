//! Public message IDs (OPENID.*): the plain format of the reference Java, a keyed format, and
//! the `imid.openid-keys` list. Redis-free.
//!
//! Both formats are 14 bytes = a 2-byte check ‖ 12 payload bytes, written as 19 characters of
//! URL-safe base64 without padding. The payload is msgid(10) ‖ msg_type(1) ‖ direction(1).
//!
//! - Plain: check = low 16 bits of MurmurHash2 (seed 0x1234ABCD) of the payload, big-endian;
//!   then bytes 2.. are XORed with byte `i mod 2`. Anyone who knows the scheme can undo it.
//! - Keyed: payload enciphered with a 12-byte pseudorandom permutation (a balanced Feistel
//!   network with AES-128 as the round function), check = 2 bytes of AES under a second subkey
//!   over the plaintext payload. Without the key the ID reveals nothing and a forgery passes
//!   with probability 2^-16.
//!
//! One file per job: `framing` (the 14 bytes and their 19-character text, shared by both
//! formats), `plain`, `keyed`, and `keys` (the configured list that picks formats).

mod framing;
mod keyed;
mod keys;
mod plain;
#[cfg(test)]
mod test_support;

pub use framing::OPENID_LEN;
pub use keyed::Key;
pub use keys::{Format, KeyListError, KeyRing, Parsed, MAX_KEYS};
pub use plain::{decode_plain, encode_plain, murmur2, MURMUR_SEED};

use super::msgid::MsgId;
use std::fmt;

/// What a public ID carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenId {
    pub msgid: MsgId,
    pub msg_type: u8,
    pub direction: u8,
}

impl OpenId {
    fn payload(&self) -> [u8; 12] {
        let mut p = [0u8; 12];
        let (id, rest) = p.split_at_mut(10);
        id.copy_from_slice(&self.msgid.to_bytes());
        rest.copy_from_slice(&[self.msg_type, self.direction]);
        p
    }

    fn from_payload(p: &[u8; 12]) -> OpenId {
        let (id, rest) = p.split_at(10);
        let mut b = [0u8; 10];
        b.copy_from_slice(id);
        OpenId {
            msgid: MsgId::from_bytes(b),
            msg_type: rest.first().copied().unwrap_or(0),
            direction: rest.get(1).copied().unwrap_or(0),
        }
    }
}

/// Why a public ID was refused. The texts never contain the ID or any key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not 19 characters of URL-safe base64 in canonical form.
    Syntax,
    /// Well-formed, but no configured format's check matches (tampered, forged, or made
    /// under a key this server does not hold).
    Check,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DecodeError::Syntax => {
                "invalid open id: expected 19 characters of URL-safe base64 (A-Z a-z 0-9 - _) in canonical form"
            }
            DecodeError::Check => "invalid open id: check does not match (tampered, or not issued under a configured key)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    /// Every 12-byte payload (msgid, type, direction) round-trips in both formats.
    #[test]
    fn round_trip_extremes() {
        let k = Key::new([7; 16]);
        for n in [0u128, 1, (1 << 80) - 1, 1 << 79, 0x1234_5678_9abc_def0_1234] {
            for t in [0u8, 1, 2, 3, 127, 128, 255] {
                for d in [0u8, 1, 2, 255] {
                    let id = id_from(n, t, d);
                    assert_eq!(decode_plain(&encode_plain(&id)), Ok(id));
                    assert_eq!(k.decode(&k.encode(&id)), Ok(id));
                }
            }
        }
    }
}
