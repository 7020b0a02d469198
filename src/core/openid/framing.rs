//! The frame both formats share: 14 bytes = a 2-byte check ‖ 12 payload bytes, written as 19
//! characters of URL-safe base64 without padding, and read back only in canonical form.

use super::DecodeError;
use base64::alphabet::URL_SAFE;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::Engine;

/// Characters in a public ID.
pub const OPENID_LEN: usize = 19;

/// Decoding engine that refuses everything but the canonical form: no padding and no set
/// spare bits (so exactly one text per 14 bytes, and a changed last character is never
/// silently the same ID).
const STRICT: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

/// The 19-character text of 14 bytes.
pub(super) fn to_text(bytes: &[u8; 14]) -> [u8; OPENID_LEN] {
    let mut out = [0u8; OPENID_LEN];
    // 14 bytes always encode to exactly 19 characters, so this cannot fail; were it ever to,
    // the zeroed buffer would fail every decode rather than alias another ID.
    let _ = URL_SAFE_NO_PAD.encode_slice(bytes, &mut out);
    out
}

/// The 14 bytes of a canonical 19-character text, or `Syntax`.
pub(super) fn from_text(text: &[u8]) -> Result<[u8; 14], DecodeError> {
    if text.len() != OPENID_LEN {
        return Err(DecodeError::Syntax);
    }
    // 19 characters hold at most 14 bytes; the spare room only guards against a decoder that
    // writes more than it reports, which then shows up as a wrong length.
    let mut buf = [0u8; 16];
    match STRICT.decode_slice(text, &mut buf) {
        Ok(14) => {
            let mut out = [0u8; 14];
            out.copy_from_slice(&buf[..14]);
            Ok(out)
        }
        _ => Err(DecodeError::Syntax),
    }
}

/// check ‖ payload, apart.
pub(super) fn split(bytes: &[u8; 14]) -> ([u8; 2], [u8; 12]) {
    let mut check = [0u8; 2];
    let mut payload = [0u8; 12];
    check.copy_from_slice(&bytes[..2]);
    payload.copy_from_slice(&bytes[2..]);
    (check, payload)
}

/// check ‖ payload, together.
pub(super) fn join(check: [u8; 2], payload: &[u8; 12]) -> [u8; 14] {
    let mut b = [0u8; 14];
    b[..2].copy_from_slice(&check);
    b[2..].copy_from_slice(payload);
    b
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{decode_plain, encode_plain};
    use super::*;

    #[test]
    fn reject_vectors_are_rejected() {
        let rows = rows(include_str!("../../../tests/vectors/reject.tsv"));
        let mut n = 0;
        for r in rows.iter().filter(|r| r[0] == "OPENID.DEC") {
            // `\n` in the file is an escaped LF.
            let arg = r.get(1).copied().unwrap_or("").replace("\\n", "\n");
            assert!(decode_plain(arg.as_bytes()).is_err(), "{r:?}");
            n += 1;
        }
        assert!(n > 30);
    }

    #[test]
    fn noncanonical_and_padded_forms_rejected() {
        let good = encode_plain(&id_from(12345, 1, 2));
        assert!(decode_plain(&good).is_ok());
        let mut padded = good.to_vec();
        padded.push(b'=');
        assert_eq!(decode_plain(&padded), Err(DecodeError::Syntax));
        // The last character carries 4 bits of data and 2 spare bits: every other value with
        // the same data bits is non-canonical.
        let last = good[18];
        let idx = ALPHABET.iter().position(|&c| c == last).unwrap();
        for spare in 1..4 {
            let mut t = good;
            t[18] = ALPHABET[(idx & !3) | spare];
            assert_eq!(decode_plain(&t), Err(DecodeError::Syntax));
        }
    }
}
