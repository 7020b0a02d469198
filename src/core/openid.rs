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

use super::msgid::MsgId;
use aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes::Aes128;
use base64::alphabet::URL_SAFE;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use std::fmt;

/// Characters in a public ID.
pub const OPENID_LEN: usize = 19;
/// Seed of the reference Java's MurmurHash2.
pub const MURMUR_SEED: u32 = 0x1234_ABCD;
/// Most entries `imid.openid-keys` accepts: each one costs OPENID.DEC a trial decryption.
pub const MAX_KEYS: usize = 16;
/// Feistel rounds. 4 rounds already give a strong PRP (Luby-Rackoff); 10 leave a wide margin
/// at a cost (10 AES blocks) that is still far below a network round trip.
const ROUNDS: u8 = 10;

/// Decoding engine that refuses everything but the canonical form: no padding and no set
/// spare bits (so exactly one text per 14 bytes, and a changed last character is never
/// silently the same ID).
const STRICT: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

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

/// MurmurHash2 as the reference Java computes it (32-bit, little-endian word loads).
pub fn murmur2(data: &[u8]) -> u32 {
    murmur2::murmur2(data, MURMUR_SEED)
}

fn to_text(bytes: &[u8; 14]) -> [u8; OPENID_LEN] {
    let mut out = [0u8; OPENID_LEN];
    // 14 bytes always encode to exactly 19 characters, so this cannot fail; were it ever to,
    // the zeroed buffer would fail every decode rather than alias another ID.
    let _ = URL_SAFE_NO_PAD.encode_slice(bytes, &mut out);
    out
}

/// The 14 bytes of a canonical 19-character text, or `Syntax`.
fn from_text(text: &[u8]) -> Result<[u8; 14], DecodeError> {
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

fn split(bytes: &[u8; 14]) -> ([u8; 2], [u8; 12]) {
    let mut check = [0u8; 2];
    let mut payload = [0u8; 12];
    check.copy_from_slice(&bytes[..2]);
    payload.copy_from_slice(&bytes[2..]);
    (check, payload)
}

fn join(check: [u8; 2], payload: &[u8; 12]) -> [u8; 14] {
    let mut b = [0u8; 14];
    b[..2].copy_from_slice(&check);
    b[2..].copy_from_slice(payload);
    b
}

// ---------------------------------------------------------------------------------------------
// Plain format

fn plain_check(payload: &[u8; 12]) -> [u8; 2] {
    // Low 16 bits, big-endian, as the reference writes them.
    let h = murmur2(payload).to_be_bytes();
    [h[2], h[3]]
}

/// XOR with the check bytes, the reference's obfuscation; its own inverse.
fn plain_xor(check: [u8; 2], payload: &mut [u8; 12]) {
    for (i, b) in payload.iter_mut().enumerate() {
        // Payload index i is byte i+2 of the 14; (i+2) mod 2 == i mod 2.
        *b ^= check[i % 2];
    }
}

pub fn encode_plain(id: &OpenId) -> [u8; OPENID_LEN] {
    let mut payload = id.payload();
    let check = plain_check(&payload);
    plain_xor(check, &mut payload);
    to_text(&join(check, &payload))
}

fn open_plain(bytes: &[u8; 14]) -> Option<OpenId> {
    let (check, mut payload) = split(bytes);
    plain_xor(check, &mut payload);
    (plain_check(&payload) == check).then(|| OpenId::from_payload(&payload))
}

pub fn decode_plain(text: &[u8]) -> Result<OpenId, DecodeError> {
    open_plain(&from_text(text)?).ok_or(DecodeError::Check)
}

// ---------------------------------------------------------------------------------------------
// Keyed format

/// One 128-bit key, expanded once into the two AES key schedules it derives. No `Debug`, so a
/// key can never reach a log line through `{:?}`.
#[derive(Clone)]
pub struct Key {
    /// Round function of the Feistel permutation.
    perm: Aes128,
    /// Keyed check.
    mac: Aes128,
}

/// Subkey derivation constants: AES_k(constant) gives independent subkeys for the two uses,
/// so the permutation and the check never share a key schedule.
const DERIVE_PERM: [u8; 16] = *b"imid.openid.perm";
const DERIVE_MAC: [u8; 16] = *b"imid.openid.mac\0";
/// First byte of every check input, apart from the round inputs (which start with a round
/// number below ROUNDS); with separate subkeys this is belt and braces.
const MAC_DOMAIN: u8 = 0xC5;

fn aes(cipher: &Aes128, block: [u8; 16]) -> [u8; 16] {
    let mut b = GenericArray::from(block);
    cipher.encrypt_block(&mut b);
    b.into()
}

impl Key {
    pub fn new(key: [u8; 16]) -> Key {
        let master = Aes128::new(&GenericArray::from(key));
        let perm = aes(&master, DERIVE_PERM);
        let mac = aes(&master, DERIVE_MAC);
        Key {
            perm: Aes128::new(&GenericArray::from(perm)),
            mac: Aes128::new(&GenericArray::from(mac)),
        }
    }

    /// Round function: first 6 bytes of AES_perm(round ‖ half ‖ zero padding).
    fn round(&self, round: u8, half: &[u8; 6]) -> [u8; 6] {
        let mut block = [0u8; 16];
        block[0] = round;
        block[1..7].copy_from_slice(half);
        let out = aes(&self.perm, block);
        let mut f = [0u8; 6];
        f.copy_from_slice(&out[..6]);
        f
    }

    fn encipher(&self, payload: &[u8; 12]) -> [u8; 12] {
        let (mut l, mut r) = halves(payload);
        for i in 0..ROUNDS {
            let f = self.round(i, &r);
            let next_r = xor6(&l, &f);
            l = r;
            r = next_r;
        }
        unhalves(&l, &r)
    }

    fn decipher(&self, ct: &[u8; 12]) -> [u8; 12] {
        let (mut l, mut r) = halves(ct);
        for i in (0..ROUNDS).rev() {
            let f = self.round(i, &l);
            let prev_l = xor6(&r, &f);
            r = l;
            l = prev_l;
        }
        unhalves(&l, &r)
    }

    fn check(&self, payload: &[u8; 12]) -> [u8; 2] {
        let mut block = [0u8; 16];
        block[0] = MAC_DOMAIN;
        block[1..13].copy_from_slice(payload);
        let out = aes(&self.mac, block);
        [out[0], out[1]]
    }

    pub fn encode(&self, id: &OpenId) -> [u8; OPENID_LEN] {
        let payload = id.payload();
        to_text(&join(self.check(&payload), &self.encipher(&payload)))
    }

    fn open(&self, bytes: &[u8; 14]) -> Option<OpenId> {
        let (check, ct) = split(bytes);
        let payload = self.decipher(&ct);
        // Not constant-time: a timing oracle on a 16-bit check over the network would save an
        // attacker at most the 2^16 guesses that brute force costs anyway.
        (self.check(&payload) == check).then(|| OpenId::from_payload(&payload))
    }

    pub fn decode(&self, text: &[u8]) -> Result<OpenId, DecodeError> {
        self.open(&from_text(text)?).ok_or(DecodeError::Check)
    }
}

fn halves(b: &[u8; 12]) -> ([u8; 6], [u8; 6]) {
    let mut l = [0u8; 6];
    let mut r = [0u8; 6];
    l.copy_from_slice(&b[..6]);
    r.copy_from_slice(&b[6..]);
    (l, r)
}

fn unhalves(l: &[u8; 6], r: &[u8; 6]) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..6].copy_from_slice(l);
    b[6..].copy_from_slice(r);
    b
}

fn xor6(a: &[u8; 6], b: &[u8; 6]) -> [u8; 6] {
    let mut o = *a;
    for (x, y) in o.iter_mut().zip(b) {
        *x ^= *y;
    }
    o
}

// ---------------------------------------------------------------------------------------------
// The configured list

/// One entry of `imid.openid-keys`.
#[derive(Clone)]
pub enum Format {
    Plain,
    /// Boxed: two expanded AES key schedules dwarf the `Plain` variant.
    Keyed(Box<Key>),
}

/// The parsed `imid.openid-keys`: the first entry encodes, every entry decodes, in order.
/// Never empty (the empty config means `[Plain]`).
#[derive(Clone)]
pub struct KeyRing {
    formats: Vec<Format>,
}

/// Why a key list was refused. Names the entry by position only: the text must never echo
/// key material into a reply or a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyListError {
    /// Entry n (1-based) is neither `plain` nor 32 hex digits.
    Entry(usize),
    /// Entry n is empty (a doubled or trailing comma).
    Empty(usize),
    /// Entry n repeats an earlier one.
    Duplicate(usize),
    TooMany,
}

impl fmt::Display for KeyListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyListError::Entry(n) => write!(
                f,
                "imid.openid-keys entry {n} is neither 'plain' nor a key of exactly 32 hex digits"
            ),
            KeyListError::Empty(n) => write!(f, "imid.openid-keys entry {n} is empty"),
            KeyListError::Duplicate(n) => {
                write!(f, "imid.openid-keys entry {n} repeats an earlier entry")
            }
            KeyListError::TooMany => {
                write!(f, "imid.openid-keys holds more than {MAX_KEYS} entries")
            }
        }
    }
}

fn parse_hex_key(s: &[u8]) -> Option<[u8; 16]> {
    if s.len() != 32 {
        return None;
    }
    let mut key = [0u8; 16];
    for (k, pair) in key.iter_mut().zip(s.chunks_exact(2)) {
        let hi = char::from(*pair.first()?).to_digit(16)?;
        let lo = char::from(*pair.get(1)?).to_digit(16)?;
        // Two hex digits: at most 255.
        *k = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(key)
}

/// A parsed list, and its normalised text (lowercase, no spaces) for `CONFIG GET`.
pub struct Parsed {
    pub ring: KeyRing,
    pub text: String,
}

impl KeyRing {
    /// The default: plain format only.
    pub const fn plain() -> KeyRing {
        KeyRing {
            formats: Vec::new(),
        }
    }

    fn formats(&self) -> &[Format] {
        const PLAIN: &[Format] = &[Format::Plain];
        if self.formats.is_empty() {
            PLAIN
        } else {
            &self.formats
        }
    }

    /// Parses `imid.openid-keys`: empty (or only spaces) means plain; otherwise entries
    /// separated by commas, each `plain` (any case) or 32 hex digits, spaces around entries
    /// ignored.
    pub fn parse(list: &str) -> Result<Parsed, KeyListError> {
        let list = list.trim();
        if list.is_empty() {
            return Ok(Parsed {
                ring: KeyRing::plain(),
                text: String::new(),
            });
        }
        let mut formats = Vec::new();
        let mut seen: Vec<[u8; 16]> = Vec::new();
        let mut plain_seen = false;
        let mut text = Vec::new();
        for (i, entry) in list.split(',').enumerate() {
            let n = i.saturating_add(1);
            if n > MAX_KEYS {
                return Err(KeyListError::TooMany);
            }
            let entry = entry.trim();
            if entry.is_empty() {
                return Err(KeyListError::Empty(n));
            }
            if entry.eq_ignore_ascii_case("plain") {
                if plain_seen {
                    return Err(KeyListError::Duplicate(n));
                }
                plain_seen = true;
                formats.push(Format::Plain);
                text.push("plain".to_owned());
                continue;
            }
            let key = parse_hex_key(entry.as_bytes()).ok_or(KeyListError::Entry(n))?;
            if seen.contains(&key) {
                return Err(KeyListError::Duplicate(n));
            }
            seen.push(key);
            formats.push(Format::Keyed(Box::new(Key::new(key))));
            text.push(entry.to_ascii_lowercase());
        }
        Ok(Parsed {
            ring: KeyRing { formats },
            text: text.join(","),
        })
    }

    /// Whether the encoding format is keyed.
    pub fn encodes_keyed(&self) -> bool {
        matches!(self.formats().first(), Some(Format::Keyed(_)))
    }

    pub fn encode(&self, id: &OpenId) -> [u8; OPENID_LEN] {
        match self.formats().first() {
            Some(Format::Keyed(k)) => k.encode(id),
            _ => encode_plain(id),
        }
    }

    /// Tries every configured format in order; the first whose check verifies wins.
    pub fn decode(&self, text: &[u8]) -> Result<OpenId, DecodeError> {
        let bytes = from_text(text)?;
        self.formats()
            .iter()
            .find_map(|f| match f {
                Format::Plain => open_plain(&bytes),
                Format::Keyed(k) => k.open(&bytes),
            })
            .ok_or(DecodeError::Check)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const KEY_A: &str = "000102030405060708090a0b0c0d0e0f";
    const KEY_B: &str = "f0e1d2c3b4a5968778695a4b3c2d1e0f";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    fn rows(tsv: &str) -> Vec<Vec<&str>> {
        tsv.lines()
            .skip(1)
            .filter(|l| !l.is_empty())
            .map(|l| l.split('\t').collect())
            .collect()
    }

    fn ring(list: &str) -> KeyRing {
        match KeyRing::parse(list) {
            Ok(p) => p.ring,
            Err(e) => panic!("{e}"),
        }
    }

    fn id_from(n: u128, msg_type: u8, direction: u8) -> OpenId {
        let b = (n & ((1 << 80) - 1)).to_be_bytes();
        let mut m = [0u8; 10];
        m.copy_from_slice(&b[6..]);
        OpenId {
            msgid: MsgId::from_bytes(m),
            msg_type,
            direction,
        }
    }

    #[test]
    fn murmur2_matches_reference_vectors() {
        let rows = rows(include_str!("../../tests/vectors/murmur2.tsv"));
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
        let rows = rows(include_str!("../../tests/vectors/openid.tsv"));
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

    #[test]
    fn reject_vectors_are_rejected() {
        let rows = rows(include_str!("../../tests/vectors/reject.tsv"));
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn round_trip_plain(n in any::<u128>(), t in any::<u8>(), d in any::<u8>()) {
            let id = id_from(n, t, d);
            let text = encode_plain(&id);
            prop_assert!(text.iter().all(|c| ALPHABET.contains(c)));
            prop_assert_eq!(decode_plain(&text), Ok(id));
        }

        #[test]
        fn round_trip_keyed(key in any::<[u8; 16]>(), n in any::<u128>(), t in any::<u8>(), d in any::<u8>()) {
            let k = Key::new(key);
            let id = id_from(n, t, d);
            let text = k.encode(&id);
            prop_assert!(text.iter().all(|c| ALPHABET.contains(c)));
            prop_assert_eq!(k.decode(&text), Ok(id));
        }

        #[test]
        fn feistel_is_a_permutation(key in any::<[u8; 16]>(), p in any::<[u8; 12]>()) {
            let k = Key::new(key);
            prop_assert_eq!(k.decipher(&k.encipher(&p)), p);
            prop_assert_eq!(k.encipher(&k.decipher(&p)), p);
        }

        #[test]
        fn decode_arbitrary_bytes_never_panics(s in proptest::collection::vec(any::<u8>(), 0..40)) {
            let r = ring(&format!("{KEY_A},plain,{KEY_B}"));
            let _ = r.decode(&s);
            let _ = decode_plain(&s);
        }

        #[test]
        fn decode_arbitrary_19_char_strings_never_panics(s in "[A-Za-z0-9_=+/-]{19}") {
            let r = ring(&format!("{KEY_A},plain"));
            let _ = r.decode(s.as_bytes());
        }

        #[test]
        fn key_list_parse_never_panics(s in "\\PC{0,80}") {
            let _ = KeyRing::parse(&s);
        }
    }

    /// Counts single-character substitutions of valid IDs that still decode. Each of the 18
    /// first characters carries 6 data bits; the last one 4 data bits (its other 12
    /// substitutions only change spare bits and are refused as non-canonical).
    fn tamper_acceptance(
        encode: impl Fn(&OpenId) -> [u8; 19],
        decode: impl Fn(&[u8]) -> bool,
    ) -> (u64, u64) {
        let mut tried = 0u64;
        let mut accepted = 0u64;
        let mut x: u128 = 0x9E37_79B9_7F4A_7C15_F39C;
        for i in 0..2000u32 {
            // A cheap deterministic spread of msgids, types and directions.
            x = x
                .wrapping_mul(0x2545_F491_4F6C_DD1D)
                .wrapping_add(0x1405_7B7E_F767_814F);
            let id = id_from(x >> 20, (i % 256) as u8, (i / 7 % 256) as u8);
            let good = encode(&id);
            assert!(decode(&good));
            for pos in 0..OPENID_LEN {
                for &c in ALPHABET {
                    if c == good[pos] {
                        continue;
                    }
                    let mut t = good;
                    t[pos] = c;
                    tried += 1;
                    if decode(&t) {
                        accepted += 1;
                    }
                }
            }
        }
        (accepted, tried)
    }

    fn assert_tamper_rate(name: &str, (accepted, tried): (u64, u64)) {
        let rate = accepted as f64 / tried as f64;
        let bound = 4.0 / 65536.0;
        println!(
            "{name}: {accepted} of {tried} single-character changes accepted, rate {rate:.3e} (2^-16 = {:.3e})",
            1.0 / 65536.0
        );
        // 4x the expected rate plus 3 absolute, so a lucky run cannot fail but a check that
        // misses whole positions (1/19 of all changes) certainly does.
        assert!(
            (accepted as f64) < bound * tried as f64 + 3.0,
            "{name}: {accepted} of {tried} accepted"
        );
    }

    #[test]
    fn tampering_is_detected_plain() {
        let r = tamper_acceptance(encode_plain, |t| decode_plain(t).is_ok());
        assert_eq!(r.1, 2000 * 19 * 63);
        assert_tamper_rate("plain", r);
    }

    #[test]
    fn tampering_is_detected_keyed() {
        let k = Key::new(unhex(KEY_A).try_into().unwrap());
        let r = tamper_acceptance(|id| k.encode(id), |t| k.decode(t).is_ok());
        assert_tamper_rate("keyed", r);
    }

    fn common_prefix(a: &[u8], b: &[u8]) -> usize {
        a.iter().zip(b).take_while(|(x, y)| x == y).count()
    }

    /// 10,000 consecutive msgids (time steps of 1 ms, same conversation, type and
    /// direction), as a generator issues them.
    fn consecutive(encode: impl Fn(&OpenId) -> [u8; 19]) -> Vec<[u8; 19]> {
        let base = MsgId::parse(b"CE5H-STK6-0006-D3E6").unwrap().as_u128();
        (0..10_000u128)
            .map(|i| encode(&id_from(base + (i << 34), 1, 1)))
            .collect()
    }

    /// (longest, mean) common prefix of consecutive IDs. For independent uniform 64-symbol
    /// strings P(lcp >= 5) = 2^-30 per pair, so over 10^4 pairs a longest prefix of 5 or more
    /// is a failure; the mean is 1/63 = 0.016.
    fn prefix_stats(ids: &[[u8; 19]]) -> (usize, f64) {
        let l: Vec<usize> = ids
            .windows(2)
            .map(|w| common_prefix(&w[0], &w[1]))
            .collect();
        let max = l.iter().copied().max().unwrap_or(0);
        (max, l.iter().sum::<usize>() as f64 / l.len() as f64)
    }

    /// Mean number of byte positions i in 2..12 where the XOR difference of two consecutive
    /// IDs repeats two bytes later (d[i] == d[i+2]). The plain format's check cancels in
    /// exactly this statistic wherever the payloads agree, so it is large there; for
    /// unrelated IDs each position matches with probability 1/256, mean 10/256 = 0.039.
    fn xor_period_stat(ids: &[[u8; 19]]) -> f64 {
        let total: usize = ids
            .windows(2)
            .map(|w| {
                let x = from_text(&w[0]).unwrap();
                let y = from_text(&w[1]).unwrap();
                let d: Vec<u8> = x.iter().zip(&y).map(|(a, b)| a ^ b).collect();
                (2..12).filter(|&i| d[i] == d[i + 2]).count()
            })
            .sum();
        total as f64 / (ids.len() - 1) as f64
    }

    #[test]
    fn keyed_consecutive_ids_share_no_structure() {
        let k = Key::new(unhex(KEY_A).try_into().unwrap());
        let keyed = consecutive(|id| k.encode(id));
        let plain = consecutive(encode_plain);
        let (kmax, kmean) = prefix_stats(&keyed);
        let (pmax, pmean) = prefix_stats(&plain);
        let kx = xor_period_stat(&keyed);
        let px = xor_period_stat(&plain);
        println!("keyed: longest common prefix {kmax}, mean {kmean:.4}, xor-period {kx:.4}");
        println!("plain: longest common prefix {pmax}, mean {pmean:.4}, xor-period {px:.4}");
        assert!(kmax <= 4, "keyed longest common prefix {kmax}");
        assert!(kmean < 0.05, "keyed mean common prefix {kmean}");
        // Bound: 3x chance; the std deviation of the mean over 10^4 pairs is about 0.002.
        assert!(kx < 0.12, "keyed xor-period {kx}");
        // The same bound must expose the plain format, or the statistic proves nothing.
        assert!(px >= 0.12, "plain xor-period {px}");
    }

    #[test]
    fn keys_do_not_cross() {
        let a = ring(KEY_A);
        let b = ring(KEY_B);
        let id = id_from(0xABCDEF, 1, 2);
        let ta = a.encode(&id);
        assert_eq!(a.decode(&ta), Ok(id));
        assert_eq!(b.decode(&ta), Err(DecodeError::Check));
        assert_eq!(decode_plain(&ta).ok(), None);
        assert!(a.encodes_keyed());
        assert!(!ring("").encodes_keyed());
    }

    #[test]
    fn rotation_and_plain_migration() {
        let id = id_from(42 << 22, 3, 1);
        let old = ring(KEY_A).encode(&id);
        let plain = encode_plain(&id);
        let rotated = ring(&format!("{KEY_B},{KEY_A}"));
        assert_eq!(rotated.decode(&old), Ok(id));
        assert_eq!(rotated.encode(&id), ring(KEY_B).encode(&id));
        assert_eq!(rotated.decode(&plain), Err(DecodeError::Check));
        let migrating = ring(&format!("{KEY_A}, PLAIN"));
        assert_eq!(migrating.decode(&plain), Ok(id));
        assert_eq!(migrating.decode(&old), Ok(id));
        assert_eq!(migrating.encode(&id), old);
        let plain_first = ring(&format!("plain,{KEY_A}"));
        assert_eq!(plain_first.encode(&id), plain);
        assert_eq!(plain_first.decode(&old), Ok(id));
    }

    #[test]
    fn key_list_syntax() {
        let upper = KEY_A.to_uppercase();
        let p = KeyRing::parse(&format!(" {upper} ,plain")).unwrap();
        assert_eq!(p.text, format!("{KEY_A},plain"));
        assert_eq!(KeyRing::parse("").unwrap().text, "");
        assert_eq!(KeyRing::parse("  ").unwrap().text, "");
        let short = &KEY_A[..31];
        let bad = [
            (short.to_owned(), KeyListError::Entry(1)),
            (format!("{KEY_A}0"), KeyListError::Entry(1)),
            (format!("{KEY_B},{}g", &KEY_A[..31]), KeyListError::Entry(2)),
            (format!("{KEY_A},"), KeyListError::Empty(2)),
            (format!("{KEY_A},,{KEY_B}"), KeyListError::Empty(2)),
            (format!("{KEY_A},{upper}"), KeyListError::Duplicate(2)),
            ("plain,plain".to_owned(), KeyListError::Duplicate(2)),
            (format!("0x{}", &KEY_A[..30]), KeyListError::Entry(1)),
            ("plaintext".to_owned(), KeyListError::Entry(1)),
            (
                (0..=MAX_KEYS)
                    .map(|i| format!("{i:032x}"))
                    .collect::<Vec<_>>()
                    .join(","),
                KeyListError::TooMany,
            ),
        ];
        for (list, want) in bad {
            match KeyRing::parse(&list) {
                Ok(_) => panic!("accepted {list}"),
                Err(e) => {
                    assert_eq!(e, want, "{list}");
                    let msg = e.to_string();
                    // No fragment of the key may reach the message.
                    assert!(
                        !msg.contains(&KEY_A[..8]) && !msg.contains(&KEY_B[..8]),
                        "{msg}"
                    );
                }
            }
        }
    }

    #[test]
    fn keyed_known_answer() {
        // Pins the keyed format: a change here breaks every keyed ID already handed out.
        let k = Key::new(unhex(KEY_A).try_into().unwrap());
        let id = OpenId {
            msgid: MsgId::parse(b"CE5H-STK6-0006-D3E6").unwrap(),
            msg_type: 1,
            direction: 2,
        };
        let text = k.encode(&id);
        let s = std::str::from_utf8(&text).unwrap();
        println!("keyed known answer: {s}");
        assert_eq!(s, KEYED_KAT);
    }

    /// Vectors from scripts/openid_keyed_ref.py, an independent Python implementation of the
    /// keyed format on top of the `cryptography` package's AES.
    #[test]
    fn keyed_matches_independent_reference() {
        let rows = rows(include_str!("../../tests/vectors/openid-keyed.tsv"));
        assert!(rows.len() >= 32);
        for r in rows {
            let k = ring(r[0]);
            let id = OpenId {
                msgid: MsgId::parse(r[1].as_bytes()).unwrap(),
                msg_type: r[2].parse().unwrap(),
                direction: r[3].parse().unwrap(),
            };
            assert_eq!(std::str::from_utf8(&k.encode(&id)).unwrap(), r[4], "{r:?}");
            assert_eq!(k.decode(r[4].as_bytes()), Ok(id));
        }
    }

    const KEYED_KAT: &str = "vKOv2ur8pwNQCHoKAzc";
}
