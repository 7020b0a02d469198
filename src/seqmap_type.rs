//! The sequence map data type (`imidsmap1`), in safe Rust: what RDB save/load, AOF rewrite,
//! digest, memory usage and copy do with a map. The raw callbacks and the key view the SEQ.H*
//! commands use are in `glue::map_type`; the structure itself is `core::seqmap`.

use crate::core::idmp::Window;
use crate::core::seqmap::SeqMap;
use crate::glue::types::{AofKey, Rdb};
use crate::node;
use crate::seq_type::{load_tokens, save_tokens, DigestItem};
use std::os::raw::c_int;

/// Module type names are exactly 9 characters.
pub(crate) const TYPE_NAME: &str = "imidsmap1";

/// The type's RDB encoding version (stored by Redis with every key). Version 1, in order:
/// - the field count (unsigned);
/// - the fields, one string buffer (`SeqMap::encode`: per field the name's length minus one,
///   the name, the value as LEB128), so a map of a million fields is one write and one read;
/// - reserved flags (unsigned), 0;
/// - IDMP tokens: their count (unsigned), then the tokens as `seq_type::save_tokens` writes
///   them for a sequence key (SEQ.HNEXT ... IDMP).
///
/// Every field loaded is marked for the never-reissue gap, like a loaded SEQ key.
pub(crate) const ENCODING_VERSION: i32 = 1;

/// Fields per `SEQ.HSET` in an AOF rewrite: a big map never becomes one giant command (as Redis
/// itself chunks its collections, AOF_REWRITE_ITEMS_PER_CMD is 64; a field here is small).
const REWRITE_CHUNK: usize = 512;

pub(crate) fn load(rdb: &Rdb, encver: c_int) -> Result<SeqMap, String> {
    if encver != ENCODING_VERSION {
        return Err(format!(
            "sequence map encoding version {encver} unknown (this build reads {ENCODING_VERSION})"
        ));
    }
    let count = rdb
        .load_u64()
        .ok_or_else(|| "truncated sequence map count".to_owned())?;
    let blob = rdb
        .load_bytes()
        .ok_or_else(|| "truncated sequence map fields".to_owned())?;
    let flags = rdb
        .load_u64()
        .ok_or_else(|| "truncated sequence map flags".to_owned())?;
    if flags != 0 {
        return Err(format!(
            "sequence map flags {flags:#x} unknown (reserved, must be 0)"
        ));
    }
    let tokens = rdb
        .load_u64()
        .ok_or_else(|| "truncated sequence map token count".to_owned())?;
    let tokens = if tokens == 0 {
        None
    } else {
        Some(Box::new(load_tokens(rdb, tokens)?))
    };
    if count == 0 {
        return Err("sequence map with no field".to_owned());
    }
    let mut m = SeqMap::decode(&blob, count, true)?;
    m.tokens = tokens;
    Ok(m)
}

/// The map's tokens, when it has any.
fn tokens(m: &SeqMap) -> Option<&Window> {
    m.tokens.as_deref().filter(|w| !w.is_empty())
}

pub(crate) fn save(rdb: &Rdb, m: &SeqMap) {
    rdb.save_u64(m.len() as u64);
    rdb.save_bytes(&m.encode());
    rdb.save_u64(0);
    match tokens(m) {
        None => rdb.save_u64(0),
        Some(w) => {
            rdb.save_u64(w.len() as u64);
            save_tokens(rdb, w);
        }
    }
}

/// `SEQ.HSET key field value ...`, [`REWRITE_CHUNK`] fields per command. Replayed from the AOF,
/// every field is marked (a replayed SEQ.HSET marks what it sets).
pub(crate) fn rewrite(out: &AofKey, m: &SeqMap) {
    // A rewrite without the RDB preamble has no aux data: the first key written carries the
    // node's ID marks (as a sequence key does, see `seq_type::rewrite`).
    if let Some(marks) = node::ids::marks_for_rewrite() {
        if marks.msgid > 0 {
            out.emit_int(c"MSGID.FLOOR", marks.msgid);
        }
        if marks.uid > 0 {
            out.emit_int(c"UID.FLOOR", marks.uid);
        }
    }
    let fields: Vec<(&[u8], String)> = m.iter().map(|(n, s)| (n, s.value().to_string())).collect();
    for chunk in fields.chunks(REWRITE_CHUNK) {
        let args: Vec<&[u8]> = chunk.iter().flat_map(|(n, v)| [*n, v.as_bytes()]).collect();
        out.emit_key_args(c"SEQ.HSET", &args);
    }
    // Then the tokens, oldest first, without a field: `SEQ.HIDMPSET key token last expires
    // fingerprint 0` records a token and changes no field.
    for e in tokens(m).into_iter().flat_map(Window::iter) {
        out.emit_token(c"SEQ.HIDMPSET", e);
    }
}

/// The tokens, in order, as one digest sequence (their order decides which go first).
pub(crate) fn digest_tokens(m: &SeqMap, add: &mut dyn FnMut(DigestItem)) {
    for e in tokens(m).into_iter().flat_map(Window::iter) {
        add(DigestItem::Bytes(e.token()));
        add(DigestItem::Int(e.last as i64));
        add(DigestItem::Int(e.expires_ms as i64));
        add(DigestItem::Int(e.fingerprint as i64));
    }
}

/// Per field: the name and the value, not the mark (a replica's fields are marked where its
/// primary's may not be, and `DEBUG DIGEST` must still agree).
pub(crate) fn digest_fields(m: &SeqMap) -> impl Iterator<Item = (&[u8], i64)> + '_ {
    m.iter()
        .map(|(n, s)| (n, i64::try_from(s.value()).unwrap_or(i64::MAX)))
}

/// The map's allocations plus the 16-byte wrapper Redis keeps around every module value (see
/// `seq_type::mem_usage`).
pub(crate) fn mem_usage(m: &SeqMap) -> usize {
    m.mem_usage() + 2 * std::mem::size_of::<*const ()>()
}

/// COPY: the same fields and marks (the copy's values came from this process, as the
/// original's did).
pub(crate) fn copy(m: &SeqMap) -> SeqMap {
    m.duplicate()
}
