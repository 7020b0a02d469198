//! An IDMP token window (`core::idmp::Window`) in the files and streams of both data types: RDB
//! and DUMP payloads, AOF rewrites, DEBUG DIGEST.

use crate::core::idmp::{check_token, Entry, Window, MAX_EXPIRES_MS, MAX_TOKENS};
use crate::core::seq::MAX_VALUE;
use crate::host::io::{AofKey, Digest, Rdb};

/// `count` tokens as [`save`] wrote them. Expired ones load too: only a replicated write drops
/// them, so a replica's window stays its primary's.
pub(super) fn load(rdb: &Rdb, count: u64) -> Result<Window, String> {
    if count > MAX_TOKENS {
        return Err(format!("token count {count} above {MAX_TOKENS}"));
    }
    let mut window = Window::default();
    for _ in 0..count {
        let e = load_entry(rdb)?;
        if window.contains(e.token()) {
            return Err("a token saved twice".to_owned());
        }
        window.apply(0, e);
    }
    Ok(window)
}

/// Per token, oldest first: the token, the first call's last value, its expiry (unix ms), the
/// request's fingerprint (the count is the caller's to write).
pub(super) fn save(rdb: &Rdb, w: &Window) {
    for e in w.iter() {
        rdb.save_bytes(e.token());
        rdb.save_u64(e.last);
        rdb.save_u64(e.expires_ms);
        rdb.save_u64(e.fingerprint);
    }
}

fn load_entry(rdb: &Rdb) -> Result<Entry, String> {
    let token = rdb
        .load_bytes()
        .ok_or_else(|| "truncated token".to_owned())?;
    check_token(&token).map_err(str::to_owned)?;
    let next = |what: &str| {
        rdb.load_u64()
            .ok_or_else(|| format!("truncated token {what}"))
    };
    let last = next("value")?;
    let expires_ms = next("expiry")?;
    let fingerprint = next("fingerprint")?;
    if last > MAX_VALUE {
        return Err(format!("token value {last} above {MAX_VALUE}"));
    }
    // The AOF and the replication stream write an expiry as a signed 64-bit integer: a later
    // one could not be written back (an AOF rewrite would lose the token).
    if expires_ms > MAX_EXPIRES_MS {
        return Err(format!("token expiry {expires_ms} above {MAX_EXPIRES_MS}"));
    }
    Entry::new(&token, last, expires_ms, fingerprint)
        .ok_or_else(|| "IDMP token must be 1..64 bytes".to_owned())
}

/// Per token, oldest first, `<cmd> key token last expires fingerprint 0` (`SEQ.IDMPSET`,
/// `SEQ.HIDMPSET`): the window rebuilt exactly on replay.
pub(super) fn rewrite(out: &AofKey, cmd: &std::ffi::CStr, w: Option<&Window>) {
    for e in w.into_iter().flat_map(Window::iter) {
        out.emit_key_bytes_ints(
            cmd,
            e.token(),
            [e.last as i64, e.expires_ms as i64, e.fingerprint as i64, 0],
        );
    }
}

/// Each token with its last value, expiry and fingerprint, in order (a replica's window must be
/// its primary's); the caller ends the sequence.
pub(super) fn digest(d: &Digest, w: Option<&Window>) {
    for e in w.into_iter().flat_map(Window::iter) {
        d.add_bytes(e.token());
        d.add_int(e.last as i64);
        d.add_int(e.expires_ms as i64);
        d.add_int(e.fingerprint as i64);
    }
}
