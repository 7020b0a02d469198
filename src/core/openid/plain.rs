//! The plain format, byte-compatible with the reference Java: check = low 16 bits of
//! MurmurHash2 (seed 0x1234ABCD) of the payload, big-endian; then bytes 2.. are XORed with byte
//! `i mod 2`. Anyone who knows the scheme can undo it.

use super::framing::{from_text, join, split, to_text, OPENID_LEN};
use super::{DecodeError, OpenId};

/// Seed of the reference Java's MurmurHash2.
pub const MURMUR_SEED: u32 = 0x1234_ABCD;

/// MurmurHash2 as the reference Java computes it (32-bit, little-endian word loads).
pub fn murmur2(data: &[u8]) -> u32 {
    murmur2::murmur2(data, MURMUR_SEED)
}

fn plain_check(payload: &[u8; 12]) -> [u8; 2] {
    // Low 16 bits, big-endian, as the reference writes them.
    let h = murmur2(payload).to_be_bytes();
    [h[2], h[3]]
}

/// XOR with the check bytes, the reference's obfuscation; its own inverse.
fn plain_xor(check: [u8; 2], payload: &mut [u8; 12]) {
    // Payload index i is byte i+2 of the 14; (i+2) mod 2 == i mod 2.
    for (b, c) in payload.iter_mut().zip(check.iter().cycle()) {
        *b ^= c;
    }
}

pub fn encode_plain(id: &OpenId) -> [u8; OPENID_LEN] {
    let mut payload = id.payload();
    let check = plain_check(&payload);
    plain_xor(check, &mut payload);
    to_text(&join(check, &payload))
}

pub(super) fn open_plain(bytes: &[u8; 14]) -> Option<OpenId> {
    let (check, mut payload) = split(bytes);
    plain_xor(check, &mut payload);
    (plain_check(&payload) == check).then(|| OpenId::from_payload(&payload))
}

pub fn decode_plain(text: &[u8]) -> Result<OpenId, DecodeError> {
    open_plain(&from_text(text)?).ok_or(DecodeError::Check)
}

#[cfg(test)]
mod tests {
    use super::super::framing::from_text;
    use super::super::test_support::*;
    use super::super::MsgId;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn murmur2_matches_reference_vectors() {
        let rows = rows(include_str!("../../../tests/vectors/murmur2.tsv"));
        assert!(rows.len() > 50);
        for r in rows {
            let input = unhex(r[0]);
            let want_signed: i32 = r[1].parse().unwrap();
            assert_eq!(murmur2(&input) as i32, want_signed, "input {}", r[0]);
            assert_eq!(format!("{:08x}", murmur2(&input)), r[2], "input {}", r[0]);
        }
    }

    #[test]
    fn plain_matches_reference_vectors() {
        let rows = rows(include_str!("../../../tests/vectors/openid.tsv"));
        assert!(rows.len() > 100);
        for r in rows {
            let msgid = MsgId::parse(r[0].as_bytes()).unwrap();
            let id = OpenId {
                msgid,
                msg_type: r[1].parse().unwrap(),
                direction: r[2].parse().unwrap(),
            };
            assert_eq!(murmur2(&id.payload()) as i32, r[8].parse::<i32>().unwrap());
            let text = encode_plain(&id);
            assert_eq!(std::str::from_utf8(&text).unwrap(), r[3], "row {r:?}");
            let back = decode_plain(r[3].as_bytes()).unwrap();
            assert_eq!(back, id);
            assert_eq!(back.msgid.to_text_string(), r[4]);
            assert_eq!(back.msg_type.to_string(), r[5]);
            assert_eq!(back.msgid.fields().time.to_string(), r[6]);
            assert_eq!(back.direction.to_string(), r[7]);
            assert_eq!(from_text(r[3].as_bytes()).unwrap().to_vec(), unhex(r[10]));
            assert_eq!(ring("").decode(r[3].as_bytes()), Ok(id));
            assert_eq!(ring("plain").encode(&id), text);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn round_trip_plain(n in any::<u128>(), t in any::<u8>(), d in any::<u8>()) {
            let id = id_from(n, t, d);
            let text = encode_plain(&id);
            prop_assert!(text.iter().all(|c| ALPHABET.contains(c)));
            prop_assert_eq!(decode_plain(&text), Ok(id));
        }
    }

    #[test]
    fn tampering_is_detected_plain() {
        let r = tamper_acceptance(encode_plain, |t| decode_plain(t).is_ok());
        assert_eq!(r.1, 2000 * 19 * 63);
        assert_tamper_rate("plain", r);
    }
}
