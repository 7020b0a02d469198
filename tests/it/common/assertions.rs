//! What must hold: errors as Redis sent them, the error texts many tests expect, error tables
//! run call by call, and orders of IDs.

use super::*;

/// The server's error reply as Redis sent it, `CODE detail` (e.g. `ERR invalid ...`).
pub fn err_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => e.to_string(),
    }
}

/// Runs a command that must fail and returns its error text.
pub fn expect_err(con: &mut Connection, args: &[&[u8]]) -> String {
    match cmd::<Value>(con, args) {
        Ok(v) => panic!(
            "expected an error for {:?}, got {v:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        ),
        Err(e) => err_text(&e),
    }
}

/// String arguments as the byte strings [`expect_err`] takes.
pub fn bytes<'a>(args: &[&'a str]) -> Vec<&'a [u8]> {
    args.iter().map(|a| a.as_bytes()).collect()
}

/// The start of every arity error.
pub const ARITY: &str = "ERR wrong number of arguments";
/// An unknown option, or one without its value.
pub const SYNTAX: &str = "ERR syntax error";
/// SEQ.NEXT's and SEQ.HNEXT's COUNT out of range.
pub const COUNT: &str = "ERR COUNT must be an integer in 1..1000000";
/// A sequence value out of range.
pub const VALUE: &str = "ERR value must be an integer in 0..9223372036854775807";
/// The error of a command on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A row of an error table: a call (its arguments split at spaces), run once per value with
/// its `_` replaced by the value (once as it is when there are no values), and the start of the
/// error every run must get.
pub type Refused<'a> = (&'a str, &'a [&'a str], &'a str);

/// The calls of an error table ([`Refused`] rows), each with the error it must get.
pub fn refusals<'a>(rows: &[Refused<'a>]) -> Vec<(Vec<&'a str>, &'a str)> {
    let mut calls = Vec::new();
    for &(call, values, want) in rows {
        if values.is_empty() {
            calls.push((call.split(' ').collect(), want));
        }
        for &v in values {
            let args = call.split(' ').map(|a| if a == "_" { v } else { a });
            calls.push((args.collect(), want));
        }
    }
    calls
}

/// Runs an error table ([`Refused`] rows): every call must fail with an error that starts with
/// its row's text; `after` runs after each call (to check that it changed nothing).
pub fn assert_refusals(
    con: &mut Connection,
    rows: &[Refused],
    mut after: impl FnMut(&mut Connection, &[&str]),
) {
    for (args, want) in refusals(rows) {
        let got = expect_err(con, &bytes(&args));
        assert!(
            got.starts_with(want),
            "{args:?}: got {got:?}, want {want:?}"
        );
        after(con, &args);
    }
}

/// Every sequence write on `key` (SEQ.NEXT, SEQ.SET, SEQ.ADVANCE) is refused with an error
/// starting with `code` (NOPERM for a read-only user, READONLY on a replica).
pub fn assert_seq_writes_refused(con: &mut Connection, key: &str, code: &str) {
    for args in [
        &["SEQ.NEXT", key][..],
        &["SEQ.SET", key, "5"],
        &["SEQ.ADVANCE", key, "9"],
    ] {
        let e = cmd::<Value>(con, args).unwrap_err();
        assert!(err_text(&e).starts_with(code), "{args:?}: {e}");
    }
}

/// Runs the calls in order (arguments split at spaces), each of which must reply the integer
/// beside it.
pub fn assert_int_replies(con: &mut Connection, steps: &[(&str, i64)]) {
    for &(call, want) in steps {
        let args: Vec<&str> = call.split(' ').collect();
        assert_eq!(int_reply(con, &args), want, "{call}");
    }
}

/// Fails unless `ids` strictly increase, naming `what` (the IDs, a connection, a slot) and the
/// first pair that does not.
pub fn assert_increasing<T: PartialOrd + std::fmt::Display>(
    what: impl std::fmt::Display,
    ids: &[T],
) {
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "{what}: {} then {}", w[0], w[1]);
    }
}
