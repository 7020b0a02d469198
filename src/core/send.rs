//! IM.SEND's rules, Redis-free: what `examples/lua/send.lua` does with its arguments, written
//! once for the native command (`commands::im`) and its replicated form (IM.SENDSET).
//!
//! The arguments are the script's, in the script's order, without `numkeys`: the conversation's
//! tag, its sequence key, one inbox/trimmed pair per recipient, then `channel_type sender
//! client_msg_id body cap`. Each rule here is the script's own: the same member format
//! (`msgid|uid|sender|body`), the same cap syntax (1 to 15 digits, at least 1), the same IDMP token
//! (the SHA-1 of `sender|client_msg_id` as 40 lowercase hex digits, so a retry through the script
//! of a message sent natively, or the other way round, is recognised), and the same read-back of a
//! retry's IDs from an inbox member (and its check that the retry repeats the message).

use super::decimal;
use crate::error::{err, Error};

/// The arguments after the keys: channel_type, sender, client_msg_id, body, cap.
pub const TAIL: usize = 5;

/// Most recipients one IM.SEND takes (docs/commands.md gives the measured latency behind it).
pub const MAX_RECIPIENTS: usize = 1000;

/// Most digits of a cap (send.lua's rule: seqs and caps travel through doubles there).
const MAX_CAP_DIGITS: usize = 15;

/// The layout every IM.SEND takes.
const LAYOUT: &str =
    "send: expected tag, seq, then inbox/trimmed pairs, then channel_type sender client_msg_id body cap";

/// The refusal of an argument count that is not `tag seq (inbox trimmed)... + 5`.
pub(crate) fn layout_error() -> Error {
    err(LAYOUT)
}

/// The refusal of `n` arguments, saying what is wrong with them: too few for one recipient, or
/// an odd number of keys (an inbox without its trimmed key, or the other way round).
pub(crate) fn count_error(n: usize) -> Error {
    match n.checked_sub(2 + TAIL) {
        Some(k) if k >= 2 => err(format_args!(
            "{LAYOUT}: got {n} arguments, so {k} keys after the sequence, an odd number (each inbox needs its trimmed key)"
        )),
        _ => err(format_args!(
            "{LAYOUT}: got {n} arguments, at least 9 are needed (one inbox and its trimmed key)"
        )),
    }
}

/// The number of inbox/trimmed pairs of a call with `n` arguments after the command name (and
/// after IM.SENDSET's prefix): `tag seq (inbox trimmed)... channel_type sender client_msg_id
/// body cap`. At least one pair.
pub(crate) fn pairs(n: usize) -> Result<usize, Error> {
    match n.checked_sub(2 + TAIL) {
        Some(k) if k >= 2 && k % 2 == 0 => Ok(k / 2),
        _ => Err(count_error(n)),
    }
}

/// The recipient limit of IM.SEND ([`MAX_RECIPIENTS`]).
pub(crate) fn check_recipients(pairs: usize) -> Result<(), Error> {
    if pairs > MAX_RECIPIENTS {
        return Err(err(format_args!(
            "send: at most {MAX_RECIPIENTS} recipients (inbox/trimmed pairs) per call, got {pairs}"
        )));
    }
    Ok(())
}

/// The inbox cap, as send.lua reads it: 1 to 15 decimal digits (leading zeros allowed, no sign),
/// then at least 1.
pub(crate) fn cap(b: &[u8]) -> Result<u64, Error> {
    if b.is_empty() || b.len() > MAX_CAP_DIGITS || !b.iter().all(u8::is_ascii_digit) {
        return Err(err("inbox cap must be an integer in 0..999999999999999"));
    }
    let v = b
        .iter()
        .fold(0u64, |v, d| v * 10 + u64::from(d.saturating_sub(b'0')));
    if v < 1 {
        return Err(err("inbox cap must be at least 1"));
    }
    Ok(v)
}

/// The sender and the client's message id, as send.lua checks them.
pub(crate) fn check_sender(sender: &[u8], client_msg_id: &[u8]) -> Result<(), Error> {
    if sender.contains(&b'|') {
        return Err(err("sender must not contain '|'"));
    }
    if client_msg_id.is_empty() {
        return Err(err("client message id must not be empty"));
    }
    Ok(())
}

/// The IDMP token of a message: `sha1hex(sender .. '|' .. client_msg_id)`, as send.lua's
/// `redis.sha1hex` makes it (40 lowercase hex digits).
pub fn token(sender: &[u8], client_msg_id: &[u8]) -> [u8; 40] {
    let mut h = sha1_smol::Sha1::new();
    h.update(sender);
    h.update(b"|");
    h.update(client_msg_id);
    let digest = h.digest().bytes();
    let mut out = [0u8; 40];
    // A nibble (0..15) as a lowercase hex digit.
    let hex = |n: u8| if n < 10 { b'0' + n } else { b'a' + (n - 10) };
    for (pair, byte) in out.chunks_exact_mut(2).zip(digest) {
        if let [hi, lo] = pair {
            *hi = hex(byte >> 4);
            *lo = hex(byte & 15);
        }
    }
    out
}

/// Whether every name differs from every other (a 64-bit FNV-1a hash of each, sorted: a
/// collision reads as a repeat, which only sends the caller down its slower, always correct
/// path).
pub fn distinct<'a>(names: impl Iterator<Item = &'a [u8]>) -> bool {
    use std::hash::Hasher;
    let mut hashes: Vec<u64> = names
        .map(|n| {
            let mut h = crate::core::idmp::Fnv::default();
            h.write(n);
            h.finish()
        })
        .collect();
    hashes.sort_unstable();
    hashes.windows(2).all(|w| w.first() != w.get(1))
}

/// What IM.SENDSET carries before IM.SEND's arguments, as one argument: `seq msgid uid
/// expires-ms dropped` (decimal integers and the 19-character message ID, one space apart).
/// One argument rather than five: each argument of a replicated command is an object Redis makes
/// and frees (server-bench/send.py measured about 450 instructions each).
pub struct Ids<'a> {
    pub seq: u64,
    pub msgid: &'a [u8],
    pub uid: u64,
    pub expires_ms: u64,
    pub dropped: u64,
}

/// Longest [`Ids`] text: four 20-digit numbers, a 19-character ID, four spaces.
pub const IDS_MAX: usize = 4 * 20 + 19 + 4;

impl<'a> Ids<'a> {
    /// The text, written into `buf`.
    pub fn text<'b>(&self, buf: &'b mut [u8; IDS_MAX]) -> &'b [u8] {
        let mut n = 0;
        let mut put = |part: &[u8], buf: &mut [u8; IDS_MAX]| {
            if let Some(dst) = buf.get_mut(n..n + part.len()) {
                dst.copy_from_slice(part);
                n += part.len();
            }
        };
        let mut d = [0u8; 20];
        put(decimal(self.seq, &mut d), buf);
        for (text, num) in [
            (Some(self.msgid), 0),
            (None, self.uid),
            (None, self.expires_ms),
            (None, self.dropped),
        ] {
            put(b" ", buf);
            match text {
                Some(t) => put(t, buf),
                None => put(decimal(num, &mut d), buf),
            }
        }
        buf.get(..n).unwrap_or_default()
    }

    /// Reads the text back; `None` unless it is exactly five fields, the numbers decimal digits
    /// within `0..=i64::MAX` (the message ID is the caller's to check).
    pub fn parse(text: &'a [u8]) -> Option<Ids<'a>> {
        let mut it = text.split(|&b| b == b' ');
        let num = |f: Option<&[u8]>| -> Option<u64> {
            let f = f?;
            if f.is_empty() || f.len() > 19 || !f.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v = f.iter().try_fold(0u64, |v, d| {
                v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })?;
            (v <= i64::MAX as u64).then_some(v)
        };
        let ids = Ids {
            seq: num(it.next())?,
            msgid: it.next()?,
            uid: num(it.next())?,
            expires_ms: num(it.next())?,
            dropped: num(it.next())?,
        };
        it.next().is_none().then_some(ids)
    }
}

/// An inbox member: `msgid|uid|sender|body`.
pub fn member(msgid: &[u8], uid: &[u8], sender: &[u8], body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(msgid.len() + uid.len() + sender.len() + body.len() + 3);
    for (i, part) in [msgid, uid, sender, body].into_iter().enumerate() {
        if i > 0 {
            m.push(b'|');
        }
        m.extend_from_slice(part);
    }
    m
}

/// An inbox member's four fields, `msgid|uid|sender|body` (the body may hold `|`); `None` when
/// the member has fewer than three `|` (a send did not write it).
pub fn fields(member: &[u8]) -> Option<[&[u8]; 4]> {
    let mut parts = member.splitn(4, |&b| b == b'|');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(msgid), Some(uid), Some(sender), Some(body)) => Some([msgid, uid, sender, body]),
        _ => None,
    }
}

/// Whether the inbox member was sent by `user` (read.lua's `^[^|]*|[^|]*|([^|]*)|`).
pub fn sent_by(member: &[u8], user: &[u8]) -> bool {
    // What `fields` finds, without looking at the body: the text between the second and the
    // third `|` is `user` (IM.UNREAD does this for every unread message).
    let bar = |from: usize| {
        let rest = member.get(from..)?;
        rest.iter().position(|&b| b == b'|').map(|p| p + from)
    };
    let Some(second) = bar(0).and_then(|first| bar(first + 1)) else {
        return false;
    };
    let start = second + 1;
    let end = start + user.len();
    member.get(start..end) == Some(user) && member.get(end) == Some(&b'|') && !user.contains(&b'|')
}

/// A retry's refusal: the inbox holds the token's message at `seq` with another sender or body
/// (or something a send did not write): the client message id was used for another message.
pub(crate) fn other_body(seq: u64) -> Error {
    err(format_args!(
        "send: client_msg_id already used for seq {seq} with another body (a retry repeats its message; a new message needs a new client_msg_id)"
    ))
}

/// A retry's refusal: `inbox` holds nothing at `seq` and its cap did not drop it, so the first
/// send did not name it.
pub(crate) fn other_recipients(seq: u64, inbox: &[u8]) -> Error {
    err(format_args!(
        "send: client_msg_id already used for seq {seq}, which {} did not get (a retry names the first send's inboxes, or some of them)",
        String::from_utf8_lossy(inbox)
    ))
}

/// The score an inbox holds a message at: its seq as a double, as ZADD stores send.lua's text
/// (exact below 2^53, as in the script).
pub fn score(seq: u64) -> f64 {
    seq as f64
}

/// The trimmed marker a dropped score raises: the score itself for the integers a send writes,
/// and for a score written by something else the smallest integer at or above it, within
/// 0..2^63-1 (send.lua would fail on such a score after writing the inboxes before it).
pub fn marker(score: f64) -> u64 {
    const MAX: f64 = 9_223_372_036_854_775_807.0;
    if score.is_nan() || score <= 0.0 {
        0
    } else if score >= MAX {
        crate::core::seq::MAX_VALUE
    } else {
        // In (0, 2^63): the conversion keeps the value.
        score.ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_layout_is_keys_then_five() {
        assert_eq!(pairs(2 + 2 + 5).unwrap(), 1);
        assert_eq!(pairs(2 + 6 + 5).unwrap(), 3);
        for n in [0, 7, 8, 2 + 1 + 5, 2 + 3 + 5] {
            assert!(
                pairs(n)
                    .unwrap_err()
                    .text()
                    .starts_with(&layout_error().text()),
                "{n}"
            );
        }
        assert!(pairs(8)
            .unwrap_err()
            .text()
            .ends_with("at least 9 are needed (one inbox and its trimmed key)"));
        assert!(pairs(10)
            .unwrap_err()
            .text()
            .contains("got 10 arguments, so 3 keys"));
        assert!(check_recipients(MAX_RECIPIENTS).is_ok());
        assert!(check_recipients(MAX_RECIPIENTS + 1)
            .unwrap_err()
            .text()
            .contains("at most 1000 recipients"));
    }

    #[test]
    fn the_cap_is_read_as_send_lua_reads_it() {
        assert_eq!(cap(b"1").unwrap(), 1);
        assert_eq!(cap(b"007").unwrap(), 7);
        assert_eq!(cap(b"999999999999999").unwrap(), 999_999_999_999_999);
        for bad in ["", "-1", "+1", "1.5", " 1", "1000000000000000", "x"] {
            assert_eq!(
                cap(bad.as_bytes()).unwrap_err().text(),
                "ERR inbox cap must be an integer in 0..999999999999999",
                "{bad:?}"
            );
        }
        for zero in [&b"0"[..], b"000"] {
            assert_eq!(
                cap(zero).unwrap_err().text(),
                "ERR inbox cap must be at least 1"
            );
        }
    }

    #[test]
    fn sender_and_client_id() {
        assert!(check_sender(b"", b"c").is_ok());
        assert_eq!(
            check_sender(b"a|b", b"c").unwrap_err().text(),
            "ERR sender must not contain '|'"
        );
        assert_eq!(
            check_sender(b"a", b"").unwrap_err().text(),
            "ERR client message id must not be empty"
        );
    }

    #[test]
    fn the_token_is_the_sha1_hex_of_sender_bar_id() {
        // sha1("alice|c1"), as `printf 'alice|c1' | sha1sum` prints it
        assert_eq!(
            &token(b"alice", b"c1"),
            b"1542fbc39d8acca600ac5246aaccae5a892ccc92"
        );
        assert_eq!(
            &token(b"", b"x"),
            b"5a56232b18044dde82436e769b5bc9f7b48db209"
        );
    }

    #[test]
    fn members() {
        let m = member(b"D1VO-8H8O-0006-D3E6", b"42", b"alice", b"hi|there");
        assert_eq!(m, b"D1VO-8H8O-0006-D3E6|42|alice|hi|there");
    }

    #[test]
    fn fields_of_a_member() {
        let m = member(b"D1VO-8H8O-0006-D3E6", b"42", b"alice", b"hi|there");
        assert_eq!(
            fields(&m),
            Some([&b"D1VO-8H8O-0006-D3E6"[..], b"42", b"alice", b"hi|there"])
        );
        assert!(sent_by(&m, b"alice") && !sent_by(&m, b"bob") && !sent_by(&m, b"alic"));
        assert_eq!(fields(b"a|b|c|"), Some([&b"a"[..], b"b", b"c", b""]));
        assert_eq!(fields(b"a|b|c"), None);
        assert!(!sent_by(b"a|b|c", b"c"));
        assert!(!sent_by(b"a|b|c|d|e", b"c|d") && sent_by(b"a|b|c|d|e", b"c"));
        for (m, u) in [
            (&b"a|b|cd|e"[..], &b"c"[..]),
            (b"a|b|c", b"c"),
            (b"a|bc", b"c"),
            (b"x|y|z|", b"z"),
        ] {
            assert_eq!(sent_by(m, u), fields(m).is_some_and(|f| f[2] == u), "{m:?}");
        }
    }

    #[test]
    fn ids_travel_as_one_argument() {
        let ids = Ids {
            seq: 7,
            msgid: b"D234-GNQT-O007-6AUU",
            uid: 119505598273290240,
            expires_ms: 1790000300000,
            dropped: 0,
        };
        let mut buf = [0; IDS_MAX];
        let text = ids.text(&mut buf).to_vec();
        assert_eq!(
            text,
            b"7 D234-GNQT-O007-6AUU 119505598273290240 1790000300000 0"
        );
        let back = Ids::parse(&text).unwrap();
        assert_eq!(
            (
                back.seq,
                back.msgid,
                back.uid,
                back.expires_ms,
                back.dropped
            ),
            (
                7,
                &b"D234-GNQT-O007-6AUU"[..],
                119505598273290240,
                1790000300000,
                0
            )
        );
        let max = Ids {
            seq: u64::MAX,
            msgid: b"VVVV-VVVV-VVVV-VVVV",
            uid: u64::MAX,
            expires_ms: u64::MAX,
            dropped: u64::MAX,
        };
        assert_eq!(max.text(&mut buf).len(), IDS_MAX);
        // A table of refused texts, shaped like core::seq's counter test: each parser has its own.
        for bad in [
            &b""[..],
            b"7 x 1 2",
            b"7 x 1 2 3 4",
            b"-7 x 1 2 3",
            b"7 x 1 2 9223372036854775808",
            b"7  1 2 3 4",
        ] {
            assert!(Ids::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn repeated_names_are_found() {
        let d = |v: &[&str]| distinct(v.iter().map(|s| s.as_bytes()));
        assert!(d(&["a", "b", "c"]));
        assert!(d(&["a"]));
        assert!(!d(&["a", "b", "a"]));
        assert!(!d(&["x", "x"]));
    }

    #[test]
    fn markers_are_the_dropped_scores() {
        assert_eq!(marker(score(5)), 5);
        assert_eq!(marker(7.5), 8);
        assert_eq!(marker(-3.0), 0);
        assert_eq!(marker(f64::NEG_INFINITY), 0);
        assert_eq!(marker(f64::INFINITY), crate::core::seq::MAX_VALUE);
        assert_eq!(marker(1e300), crate::core::seq::MAX_VALUE);
    }
}
