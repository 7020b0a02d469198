//! The read side's rules, Redis-free: what `examples/lua/sync.lua`, `read.lua`, `pull.lua` and
//! `change.lua` check and compute with their arguments, written once for IM.SYNC, IM.READ,
//! IM.PULL and IM.CHANGE (`commands::im_read`). Each rule and each error text is the script's.

use super::decimal;
use super::seqmap::MAX_NAME;
use crate::error::{err, Error};

/// Most digits of a seq or a limit: the scripts' rule (seqs travel through ZSET scores and Lua
/// numbers, both doubles, exact only below 2^53).
const MAX_DIGITS: usize = 15;

/// 1 to 15 decimal digits (leading zeros allowed, no sign), as the scripts' `'^%d+$'` and
/// `#s > 15` accept; `None` otherwise.
pub fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > MAX_DIGITS || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u64, |v, d| {
        v.saturating_mul(10)
            .saturating_add(u64::from(d.saturating_sub(b'0')))
    }))
}

/// sync.lua's `int_arg`: `name` must be 1 to 15 digits.
pub(crate) fn sync_int(b: &[u8], name: &str) -> Result<u64, Error> {
    digits(b).ok_or_else(|| {
        err(format_args!(
            "{name} must be an integer in 0..999999999999999"
        ))
    })
}

/// sync.lua's page size: an integer of 1 to 15 digits, at least 1.
pub(crate) fn sync_limit(b: &[u8]) -> Result<u64, Error> {
    let limit = sync_int(b, "limit")?;
    if limit < 1 {
        return Err(err("limit must be at least 1"));
    }
    Ok(limit)
}

/// sync.lua's cursor: the seq of the last message of the page (`last` when none), or, when the
/// page is complete and the inbox exists, that and the conversation's `max_seq`, whichever is
/// higher. A missing inbox (a misspelled name, or a user nothing was sent to yet) moves no
/// cursor past messages it might still get.
pub fn sync_cursor(
    last: u64,
    page_last: Option<u64>,
    complete: bool,
    max_seq: u64,
    inbox: bool,
) -> u64 {
    let cursor = page_last.unwrap_or(last);
    if complete && inbox {
        cursor.max(max_seq)
    } else {
        cursor
    }
}

/// A name argument of the read side (a user, a kind, a member): a field name of a map, 1..256
/// bytes, the error naming the argument (read.lua, pull.lua and change.lua check it first too).
pub(crate) fn name_arg<'a>(b: &'a [u8], what: &str) -> Result<&'a [u8], Error> {
    if b.is_empty() || b.len() > MAX_NAME {
        return Err(err(format_args!("{what} must be 1..{MAX_NAME} bytes")));
    }
    Ok(b)
}

/// The refusal of a call with the wrong number of arguments, naming the layout.
pub(crate) fn layout(command: &str, layout: &str) -> Error {
    err(format_args!("{command}: expected {layout}"))
}

/// The most unread messages IM.READ and IM.UNREAD look at one by one, newest first, to leave out
/// the user's own; beyond them every message above the cursor counts, whoever sent it (a badge
/// shows "999+" long before that, and no call walks a whole inbox).
pub const UNREAD_WALK: usize = 1000;

/// The unread count: `others` of the `walked` newest messages above the cursor were not the
/// user's; `above` is how many lie above it in all (`None` when the walk reached the cursor, so
/// `walked` is all of them).
pub fn unread(others: u64, walked: u64, above: Option<u64>) -> u64 {
    match above {
        None => others,
        Some(above) => others.saturating_add(above.saturating_sub(walked)),
    }
}

/// The member a change log records its kind with, at score +inf (above every change, so the cap
/// never drops it and no pull reads it): `kind|<kind>`.
pub fn kind_member(kind: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(KIND_PREFIX.len().saturating_add(kind.len()));
    m.extend_from_slice(KIND_PREFIX);
    m.extend_from_slice(kind);
    m
}

const KIND_PREFIX: &[u8] = b"kind|";

/// The kind a log's +inf member records (the whole member when it is not `kind|...`).
pub fn recorded_kind(member: &[u8]) -> &[u8] {
    member.strip_prefix(KIND_PREFIX).unwrap_or(member)
}

/// IM.CHANGE's refusal of a log that records another kind: nothing is written.
pub(crate) fn change_mismatch(recorded: &[u8], kind: &[u8]) -> Error {
    err(format_args!(
        "change: the log records the kind {}, not {} (each kind has a log of its own)",
        String::from_utf8_lossy(recorded),
        String::from_utf8_lossy(kind)
    ))
}

/// IM.PULL's refusal of the `i`-th log of `n` when it records another kind than the `i`-th.
pub(crate) fn pull_mismatch(i: usize, n: usize, recorded: &[u8], kind: &[u8]) -> Error {
    err(format_args!(
        "pull: log {i} of {n} records the kind {}, not {} (give the logs in the order of the kinds)",
        String::from_utf8_lossy(recorded),
        String::from_utf8_lossy(kind)
    ))
}

/// The number of kinds of an IM.PULL call with `n` arguments after the command name: `seqs
/// trimmed`, one log per kind, then `kind seq` per kind. At least one kind.
pub(crate) fn pull_kinds(n: usize) -> Result<usize, Error> {
    match n.checked_sub(2) {
        Some(k) if k >= 3 && k % 3 == 0 => Ok(k / 3),
        _ => Err(err(
            "pull: expected KEYS seqs, trimmed, one log per kind, and ARGV kind, seq per kind",
        )),
    }
}

/// pull.lua's check of a held seq.
pub(crate) fn pull_seq(b: &[u8]) -> Result<u64, Error> {
    digits(b).ok_or_else(|| err("pull seq must be an integer in 0..999999999999999"))
}

/// The change a log member `seq|change` carries: what follows the seq's decimal digits and the
/// separator (pull.lua's `string.sub(member, #string.format('%d', seq) + 2)`: empty when the
/// member is shorter).
pub fn change_of(member: &[u8], seq: u64) -> &[u8] {
    let mut buf = [0u8; 20];
    let skip = decimal(seq, &mut buf).len().saturating_add(1);
    member.get(skip..).unwrap_or_default()
}

/// change.lua's log cap: 1 to 15 digits, at least 1.
pub(crate) fn change_cap(b: &[u8]) -> Result<u64, Error> {
    match digits(b) {
        Some(cap) if cap >= 1 => Ok(cap),
        _ => Err(err("log cap must be an integer in 1..999999999999999")),
    }
}

/// A change's log member: `seq|change`.
pub fn change_member(seq: u64, change: &[u8]) -> Vec<u8> {
    let mut buf = [0u8; 20];
    let seq = decimal(seq, &mut buf);
    let mut m = Vec::with_capacity(seq.len().saturating_add(1).saturating_add(change.len()));
    m.extend_from_slice(seq);
    m.push(b'|');
    m.extend_from_slice(change);
    m
}

/// A score as the scripts turn it into a reply: Lua's `tonumber` of the score, then the
/// integer Redis makes of a Lua number (truncated toward zero; saturated here).
pub fn score_int(score: f64) -> i64 {
    score as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_take_what_the_scripts_take() {
        assert_eq!(digits(b"0"), Some(0));
        assert_eq!(digits(b"007"), Some(7));
        assert_eq!(digits(b"999999999999999"), Some(999_999_999_999_999));
        for bad in [&b""[..], b"-1", b"+1", b"1.0", b" 1", b"1000000000000000"] {
            assert_eq!(digits(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_cursor_of_a_page() {
        assert_eq!(sync_cursor(3, None, true, 9, true), 9);
        assert_eq!(sync_cursor(3, Some(5), false, 9, true), 5);
        assert_eq!(sync_cursor(12, None, true, 9, true), 12);
        assert_eq!(sync_cursor(3, Some(9), true, 9, true), 9);
        // a missing inbox moves nothing
        assert_eq!(sync_cursor(3, None, true, 9, false), 3);
    }

    #[test]
    fn a_change_and_its_member() {
        let m = change_member(42, b"friend|x");
        assert_eq!(m, b"42|friend|x");
        assert_eq!(change_of(&m, 42), b"friend|x");
        assert_eq!(change_of(b"42", 42), b"");
        assert_eq!(change_of(b"", 42), b"");
    }

    #[test]
    fn unread_counts_and_kind_records() {
        assert_eq!(unread(3, 5, None), 3);
        assert_eq!(unread(990, 1000, Some(1500)), 1490);
        assert_eq!(kind_member(b"group"), b"kind|group");
        assert_eq!(recorded_kind(b"kind|group"), b"group");
        assert_eq!(recorded_kind(b"other"), b"other");
        assert!(name_arg(b"", "user")
            .unwrap_err()
            .text()
            .contains("user must be 1..256"));
        assert!(name_arg(&[b'x'; 257], "kind").is_err() && name_arg(b"k", "kind").is_ok());
    }

    #[test]
    fn the_layouts() {
        assert_eq!(pull_kinds(5).ok(), Some(1));
        assert_eq!(pull_kinds(8).ok(), Some(2));
        assert!(pull_kinds(2).is_err() && pull_kinds(4).is_err() && pull_kinds(6).is_err());
        assert!(change_cap(b"0").is_err() && change_cap(b"1").is_ok());
        assert!(sync_limit(b"0").is_err() && sync_limit(b"1").is_ok());
    }
}
