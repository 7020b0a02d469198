//! The sequence map data type (`imidsmap1`): what RDB load and save, AOF rewrite, digest, memory
//! usage and copy do with a map ([`MapType`]), and the view of a key the SEQ.H* commands use
//! (`key`). The structure itself is `core::seqmap`. A key's value word is a boxed `SeqMap`
//! (`host::value`).

pub(crate) mod idle;
pub(crate) mod key;

use super::{emit_marks, tokens, DataType, VALUE_WRAPPER};
use crate::core::idmp::MapTokens;
use crate::core::seqmap::SeqMap;
use crate::core::to_i64;
use crate::host::io::{AofKey, Digest, Rdb};
use crate::host::key::TypeSlot;
use crate::host::value::{Made, Word};
use std::os::raw::c_int;

/// The registered type.
pub(crate) static TYPE: TypeSlot<SeqMap> = TypeSlot::new("an imid sequence map");

/// The type's RDB encoding version (stored by Redis with every key). Version 1, in order:
/// - the field count (unsigned);
/// - the fields, one string buffer (`SeqMap::encode`: per field the name's length minus one,
///   the name, the value as LEB128), so a map of a million fields is one write and one read;
/// - flags (unsigned): 0, or [`FIELD_REQUESTS`];
/// - IDMP tokens (SEQ.HNEXT ... IDMP, `types::tokens`): their count (unsigned), then per token,
///   oldest first, the token (string), the first call's last value and its expiry (unix ms,
///   unsigned each), then its request: with flag [`FIELD_REQUESTS`], the COUNT (unsigned) and
///   the field (string; empty for a token first loaded from a file without the flag, whose
///   COUNT slot then holds its fingerprint); without, a 64-bit FNV-1a fingerprint of field and
///   COUNT (unsigned), as builds before the flag wrote every token.
///
/// A map without tokens is written as before the flag existed (flags 0, no token), so files
/// whose maps hold no token still load into older imid builds; those refuse a map with tokens
/// of this build ("sequence map flags 0x1 unknown") rather than load it without them. Every
/// field loaded is marked for the never-reissue gap, like a loaded SEQ key.
const ENCODING_VERSION: i32 = 1;

/// Map flag: the tokens carry their request (COUNT and field) rather than a fingerprint of it.
/// Set exactly when the map holds tokens.
const FIELD_REQUESTS: u64 = 1;

/// Fields per `SEQ.HSET` in an AOF rewrite: a big map never becomes one giant command (as Redis
/// itself chunks its collections, AOF_REWRITE_ITEMS_PER_CMD is 64; a field here is small).
const REWRITE_CHUNK: usize = 512;

/// The map's tokens, when it has any.
fn tokens(m: &SeqMap) -> Option<&MapTokens> {
    m.tokens.as_deref().filter(|w| !w.is_empty())
}

/// The sequence map's side of the callbacks.
pub(crate) struct MapType;

impl DataType for MapType {
    /// Module type names are exactly 9 characters.
    const NAME: &'static str = "imidsmap1";
    const ENCODING_VERSION: i32 = ENCODING_VERSION;
    const LABEL: &'static str = "sequence map";

    type Boxed = SeqMap;
    type View<'a> = &'a SeqMap;

    fn slot() -> &'static TypeSlot<SeqMap> {
        &TYPE
    }

    fn view(w: Word<'_, SeqMap>) -> Option<&SeqMap> {
        match w {
            Word::Boxed(m) => Some(m),
            Word::Inline(_) => None,
        }
    }

    fn load(rdb: &Rdb, encver: c_int) -> Result<Made<SeqMap>, String> {
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
        if flags & !FIELD_REQUESTS != 0 {
            return Err(format!(
                "sequence map flags {flags:#x} unknown (this build knows {FIELD_REQUESTS:#x})"
            ));
        }
        let token_count = rdb
            .load_u64()
            .ok_or_else(|| "truncated sequence map token count".to_owned())?;
        let window = match (token_count, flags & FIELD_REQUESTS != 0) {
            (0, false) => None,
            (0, true) => return Err("token count 0 with field requests flagged".to_owned()),
            (n, true) => Some(Box::new(tokens::load(rdb, n, tokens::load_field_request)?)),
            (n, false) => Some(Box::new(tokens::load(rdb, n, tokens::load_fingerprint)?)),
        };
        if count == 0 {
            return Err("sequence map with no field".to_owned());
        }
        let mut m = SeqMap::decode(&blob, count, true)?;
        m.tokens = window;
        Ok(Made::Boxed(m))
    }

    fn save(rdb: &Rdb, m: &&SeqMap) {
        rdb.save_u64(m.len() as u64);
        rdb.save_bytes(&m.encode());
        match tokens(m) {
            None => {
                rdb.save_u64(0);
                rdb.save_u64(0);
            }
            Some(w) => {
                rdb.save_u64(FIELD_REQUESTS);
                rdb.save_u64(w.len() as u64);
                tokens::save(rdb, w, tokens::save_field_request);
            }
        }
    }

    /// `SEQ.HSET key field value ...`, [`REWRITE_CHUNK`] fields per command (replayed from the
    /// AOF, every field is marked, as a replayed SEQ.HSET marks what it sets); then the tokens,
    /// oldest first, each with its request and without SET: `SEQ.HIDMPSET key token last
    /// expires 0 COUNT n FIELD field` records a token and changes no field.
    fn rewrite(out: &AofKey, m: &&SeqMap) {
        emit_marks(out);
        let fields: Vec<(&[u8], String)> =
            m.iter().map(|(n, s)| (n, s.value().to_string())).collect();
        for chunk in fields.chunks(REWRITE_CHUNK) {
            let args: Vec<&[u8]> = chunk.iter().flat_map(|(n, v)| [*n, v.as_bytes()]).collect();
            out.emit_key_args(c"SEQ.HSET", &args);
        }
        tokens::rewrite_map(out, tokens(m));
    }

    /// One sequence per field (name, value), which Redis combines order-independently: the
    /// digest is the same whatever order the fields sit in. Not the marks (a replica's fields
    /// are marked where its primary's may not be, and `DEBUG DIGEST` must still agree). Then
    /// the IDMP tokens, if any, in order, as one more sequence.
    fn digest(m: &&SeqMap, d: &Digest) {
        for (name, s) in m.iter() {
            d.add_bytes(name);
            d.add_int(to_i64(s.value()));
            d.end();
        }
        if let Some(w) = tokens(m) {
            tokens::digest(d, Some(w), |d, r| {
                d.add_int(r.count() as i64);
                d.add_bytes(r.field());
            });
            d.end();
        }
    }

    /// The map's allocations plus Redis's wrapper around every module value.
    fn mem_usage(m: &&SeqMap) -> usize {
        m.mem_usage() + VALUE_WRAPPER
    }

    /// COPY: the same fields and marks (the copy's values came from this process, as the
    /// original's did).
    fn copy(m: &&SeqMap) -> Made<SeqMap> {
        Made::Boxed(m.duplicate())
    }
}
