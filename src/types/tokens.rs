//! An IDMP token window (`core::idmp::Window`) in the files and streams of both data types: RDB
//! and DUMP payloads, AOF rewrites, DEBUG DIGEST. What a token remembers of its request differs:
//! a sequence key's COUNT (one unsigned, "the fingerprint", as always), a map's field and COUNT
//! (see `types::map` for its two layouts).

use crate::core::idmp::{
    check_token, Entry, FieldRequest, MapTokens, Request, SeqTokens, Window, MAX_EXPIRES_MS,
    MAX_TOKENS,
};
use crate::core::seq::{MAX_BLOCK, MAX_VALUE};
use crate::core::seqmap::MAX_NAME;
use crate::host::io::{AofKey, Digest, Rdb};

/// `count` tokens as [`save`] wrote them, each request read by `request`. Expired ones load
/// too: only a replicated write drops them, so a replica's window stays its primary's.
pub(super) fn load<R: Request>(
    rdb: &Rdb,
    count: u64,
    request: impl Fn(&Rdb) -> Result<R, String>,
) -> Result<Window<R>, String> {
    if count > MAX_TOKENS {
        return Err(format!("token count {count} above {MAX_TOKENS}"));
    }
    let mut window = Window::default();
    for _ in 0..count {
        let e = load_entry(rdb, &request)?;
        if window.contains(e.token()) {
            return Err("a token saved twice".to_owned());
        }
        window.apply(0, e);
    }
    Ok(window)
}

/// Per token, oldest first: the token, the first call's last value, its expiry (unix ms), then
/// the request as `request` writes it (the count of tokens is the caller's to write).
pub(super) fn save<R: Request>(rdb: &Rdb, w: &Window<R>, request: impl Fn(&Rdb, &R)) {
    for e in w.iter() {
        rdb.save_bytes(e.token());
        rdb.save_u64(e.last);
        rdb.save_u64(e.expires_ms);
        request(rdb, &e.request);
    }
}

fn load_entry<R: Request>(
    rdb: &Rdb,
    request: &impl Fn(&Rdb) -> Result<R, String>,
) -> Result<Entry<R>, String> {
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
    let request = request(rdb)?;
    if last > MAX_VALUE {
        return Err(format!("token value {last} above {MAX_VALUE}"));
    }
    // The AOF and the replication stream write an expiry as a signed 64-bit integer: a later
    // one could not be written back (an AOF rewrite would lose the token).
    if expires_ms > MAX_EXPIRES_MS {
        return Err(format!("token expiry {expires_ms} above {MAX_EXPIRES_MS}"));
    }
    Entry::new(&token, last, expires_ms, request)
        .ok_or_else(|| "IDMP token must be 1..64 bytes".to_owned())
}

/// A sequence key's request: its COUNT, any 64-bit value (the "fingerprint" of the format).
pub(super) fn load_count(rdb: &Rdb) -> Result<u64, String> {
    rdb.load_u64()
        .ok_or_else(|| "truncated token fingerprint".to_owned())
}

pub(super) fn save_count(rdb: &Rdb, count: &u64) {
    rdb.save_u64(*count);
}

/// A map token's request in the first layout: a fingerprint of it.
pub(super) fn load_fingerprint(rdb: &Rdb) -> Result<FieldRequest, String> {
    load_count(rdb).map(FieldRequest::legacy)
}

/// A map token's request in the second layout: the COUNT, then the field (empty for a token
/// loaded from the first layout, whose COUNT slot then holds its fingerprint).
pub(super) fn load_field_request(rdb: &Rdb) -> Result<FieldRequest, String> {
    let count = rdb
        .load_u64()
        .ok_or_else(|| "truncated token count".to_owned())?;
    let field = rdb
        .load_bytes()
        .ok_or_else(|| "truncated token field".to_owned())?;
    if field.is_empty() {
        return Ok(FieldRequest::legacy(count));
    }
    if field.len() > MAX_NAME {
        return Err(format!(
            "token field of {} bytes, above {MAX_NAME}",
            field.len()
        ));
    }
    if !(1..=MAX_BLOCK).contains(&count) {
        return Err(format!("token COUNT {count} outside 1..{MAX_BLOCK}"));
    }
    Ok(FieldRequest::new(&field, count))
}

pub(super) fn save_field_request(rdb: &Rdb, r: &FieldRequest) {
    rdb.save_u64(r.count());
    rdb.save_bytes(r.field());
}

/// Per token, oldest first, `SEQ.IDMPSET key token last expires count 0`: the window rebuilt
/// exactly on replay.
pub(super) fn rewrite_seq(out: &AofKey, w: Option<&SeqTokens>) {
    for e in w.into_iter().flat_map(Window::iter) {
        out.emit_key_bytes_ints(
            c"SEQ.IDMPSET",
            e.token(),
            [e.last as i64, e.expires_ms as i64, e.request as i64, 0],
        );
    }
}

/// Per token, oldest first, `SEQ.HIDMPSET key token last expires 0 COUNT n FIELD field` (a
/// token of the first layout in the first form, `SEQ.HIDMPSET key token last expires
/// fingerprint 0`): the window rebuilt exactly on replay, no field changed.
pub(super) fn rewrite_map(out: &AofKey, w: Option<&MapTokens>) {
    for e in w.into_iter().flat_map(Window::iter) {
        let r = &e.request;
        if r.is_legacy() {
            out.emit_key_bytes_ints(
                c"SEQ.HIDMPSET",
                e.token(),
                [e.last as i64, e.expires_ms as i64, r.count() as i64, 0],
            );
        } else {
            out.emit_key_field_token(
                c"SEQ.HIDMPSET",
                e.token(),
                [e.last as i64, e.expires_ms as i64, 0],
                r.count() as i64,
                r.field(),
            );
        }
    }
}

/// Each token with its last value, expiry and request, in order (a replica's window must be
/// its primary's); the caller ends the sequence.
pub(super) fn digest<R: Request>(d: &Digest, w: Option<&Window<R>>, request: impl Fn(&Digest, &R)) {
    for e in w.into_iter().flat_map(Window::iter) {
        d.add_bytes(e.token());
        d.add_int(e.last as i64);
        d.add_int(e.expires_ms as i64);
        request(d, &e.request);
    }
}
