//! The configured list, `imid.openid-keys`: which format encodes, and which formats decode
//! (tried in list order).

use super::framing::{from_text, OPENID_LEN};
use super::keyed::Key;
use super::plain::{encode_plain, open_plain};
use super::{DecodeError, OpenId};
use std::fmt;

/// Most entries `imid.openid-keys` accepts: each one costs OPENID.DEC a trial decryption.
pub const MAX_KEYS: usize = 16;

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
    use super::super::decode_plain;
    use super::super::test_support::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

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
}
