//! The sequence data type (`imidseq01`), in safe Rust: what RDB save/load, AOF rewrite, digest
//! and memory usage do with a value, and the view of a key that the SEQ.* commands use. The
//! raw callbacks Redis calls are in `glue::types`.
//!
//! A key's value "pointer" is not a pointer: it is the word [`Seq::to_word`] encodes, so a
//! sequence costs no allocation beyond what Redis spends on any key. Redis never dereferences
//! module values; it only hands them back to the callbacks, which decode the word. Hence
//! `free` has nothing to free, `copy` returns the same word and `mem_usage` is the wrapper.
//!
//! The same type carries the node's time high-water marks (message IDs', UIDs') as RDB aux
//! data (`node::ids` owns them), so a node restarted from an RDB file (or a replica after a full
//! sync) starts above every ID the old process may have issued.

use crate::core::seq::{Seq, MAX_VALUE};
use crate::error::{Error, WRONGTYPE};
use crate::glue::types::{seq_type, AofKey, Rdb, AUX_BEFORE_RDB};
use crate::glue::{Arg, Ctx, Held, Key};
use crate::node;
use std::os::raw::c_int;

/// Module type names are exactly 9 characters; the trailing digits leave room for a successor
/// type should the value ever need more than one word.
pub(crate) const TYPE_NAME: &str = "imidseq01";

/// The type's RDB encoding version, which Redis stores with every key and with the aux data.
///
/// Keys, in versions 1 and 2 alike: value (unsigned) then a reserved flags word that must be
/// 0, so a later flag can be added without a new version.
/// Aux data (before the keyspace): version 1, one time high-water mark (unsigned) covering
/// message IDs and UIDs; version 2, two marks (unsigned): message IDs', then UIDs'.
///
/// This build writes version 2 and reads both; an imid build reading only version 1 refuses
/// files written by this one.
pub(crate) const ENCODING_VERSION: i32 = 2;
/// The first version, one mark for both ID families.
const ENCODING_V1: i32 = 1;

/// Loads one sequence. Every value loaded gets `needs_gap`: this process did not issue it,
/// and values issued after the save may have been lost (docs/durability.md, "Sequences: the gap").
pub(crate) fn load(rdb: &Rdb, encver: c_int) -> Result<Seq, String> {
    if encver != ENCODING_VERSION && encver != ENCODING_V1 {
        return Err(format!(
            "sequence encoding version {encver} unknown (this build reads {ENCODING_V1} and {ENCODING_VERSION})"
        ));
    }
    let value = rdb
        .load_u64()
        .ok_or_else(|| "truncated sequence value".to_owned())?;
    let flags = rdb
        .load_u64()
        .ok_or_else(|| "truncated sequence flags".to_owned())?;
    if flags != 0 {
        return Err(format!(
            "sequence flags {flags:#x} unknown (reserved, must be 0)"
        ));
    }
    Seq::new(value, true).ok_or_else(|| format!("sequence value {value} above {MAX_VALUE}"))
}

pub(crate) fn save(rdb: &Rdb, s: Seq) {
    rdb.save_u64(s.value());
    rdb.save_u64(0);
}

pub(crate) fn rewrite(out: &AofKey, s: Seq) {
    // A rewrite without the RDB preamble has no aux data: the first key carries the marks,
    // message IDs' first (MSGID.FLOOR raises both floors), then UIDs' (at least as high).
    if let Some(marks) = node::ids::marks_for_rewrite() {
        if marks.msgid > 0 {
            out.emit_int(c"MSGID.FLOOR", marks.msgid);
        }
        if marks.uid > 0 {
            out.emit_int(c"UID.FLOOR", marks.uid);
        }
    }
    // The value is at most 2^63-1, so it fits an i64.
    let v = i64::try_from(s.value()).unwrap_or(i64::MAX);
    out.emit_key_int(c"SEQ.SET", v);
}

/// Only the value: a replica's copy carries `needs_gap` where its primary's may not, and
/// `DEBUG DIGEST` must still agree between them.
pub(crate) fn digest(s: Seq) -> i64 {
    s.value() as i64
}

/// The value lives in the pointer, so the only memory it costs is the 16-byte wrapper Redis
/// allocates around every module value (type pointer + value pointer). MEMORY USAGE counts
/// only what this callback reports for module values, so reporting the wrapper keeps it in
/// line with `used_memory` (measured: 16 bytes more per key than an INCR counter).
pub(crate) fn mem_usage() -> usize {
    2 * std::mem::size_of::<*const ()>()
}

pub(crate) fn aux_save(rdb: &Rdb, when: c_int) {
    if when == AUX_BEFORE_RDB {
        rdb.save_u64(node::ids::high_water());
        rdb.save_u64(node::ids::uid_high_water());
    }
}

/// Redis 7.2+ and Valkey: the marks only when there is one to keep. Saving nothing leaves the
/// aux record out of the RDB altogether, so a snapshot of a server that never issued an ID
/// (and holds no sequence key) loads without imid.
pub(crate) fn aux_save2(rdb: &Rdb, when: c_int) {
    if node::ids::has_mark() {
        aux_save(rdb, when);
    }
}

pub(crate) fn aux_load(rdb: &Rdb, encver: c_int, when: c_int) -> Result<(), String> {
    if encver != ENCODING_VERSION && encver != ENCODING_V1 {
        Err(format!("aux encoding version {encver} unknown"))
    } else if when != AUX_BEFORE_RDB {
        Err(format!("aux data at position {when} unknown"))
    } else {
        load_marks(rdb, encver)
    }
}

/// Version 1: one mark for both families; version 2: message IDs', then UIDs'.
fn load_marks(rdb: &Rdb, encver: c_int) -> Result<(), String> {
    let msgid = rdb
        .load_u64()
        .ok_or_else(|| "truncated message-id high-water mark".to_owned())?;
    let uid = if encver == ENCODING_V1 {
        None
    } else {
        Some(
            rdb.load_u64()
                .ok_or_else(|| "truncated uid high-water mark".to_owned())?,
        )
    };
    node::ids::load_marks(msgid, uid)
}

/// A key as the SEQ commands see it: missing, a sequence, or (WRONGTYPE) anything else. Like
/// the [`Key`] it wraps, it borrows the call's context (`'a`) and cannot outlive the call.
pub(crate) struct SeqKey<'a> {
    key: Key<'a>,
    held: Held,
}

impl<'a> SeqKey<'a> {
    /// Opens `name` for reading, or for writing; WRONGTYPE for a key of another type.
    pub(crate) fn open(ctx: &'a Ctx, name: &Arg, write: bool) -> Result<SeqKey<'a>, Error> {
        let key = ctx.open_key(name, write)?;
        let held = key.get(seq_type());
        if held == Held::Other {
            return Err(WRONGTYPE);
        }
        Ok(SeqKey { key, held })
    }

    /// The sequence, or `None` for a missing key.
    pub(crate) fn get(&self) -> Option<Seq> {
        match self.held {
            Held::Word(w) => Some(Seq::from_word(w)),
            _ => None,
        }
    }

    /// Stores `s` (the key must have been opened for writing), keeping its TTL.
    pub(crate) fn set(&self, s: Seq) -> Result<(), Error> {
        self.key.set(seq_type(), self.held, s.to_word())
    }
}
