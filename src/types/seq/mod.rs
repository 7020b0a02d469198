//! The sequence data type (`imidseq01`): what RDB load and save, AOF rewrite, digest, memory
//! usage and copy do with a value ([`SeqType`]); the value and its word (`value`); the view of a
//! key the SEQ.* commands use (`key`); the node's marks and IDMP clock as aux data (`aux`).
//!
//! A key's value "pointer" is usually not a pointer: it is the word [`Seq::to_word`] encodes, so
//! a sequence costs no allocation beyond what Redis spends on any key. Only a key holding IDMP
//! tokens (or a value above 2^62-1) points to a boxed state. Redis never dereferences module
//! values; it only hands them back to the callbacks (`entry::data_type`).

pub(crate) mod aux;
pub(crate) mod key;
pub(crate) mod value;

use super::{emit_marks, tokens, DataType, VALUE_WRAPPER};
use crate::core::seq::{Seq, MAX_VALUE};
use crate::core::to_i64;
use crate::host::io::{AofKey, Digest, Rdb};
use crate::host::key::TypeSlot;
use crate::host::value::{Made, Word};
use std::os::raw::c_int;
use value::{BoxedSeq, Value};

/// The registered type.
pub(crate) static TYPE: TypeSlot<BoxedSeq> = TypeSlot::new("an imid sequence");

/// The type's RDB encoding version, which Redis stores with every key and with the aux data.
///
/// Keys, in versions 1 to 3 alike: value (unsigned) then a flags word. Flag [`HAS_TOKENS`]
/// (this build's only one) says IDMP tokens follow: their count, then per token, oldest first,
/// the token (string), the first call's last value, its expiry (unix ms) and the request's
/// fingerprint (unsigned each). A key without tokens is written exactly as before, so files
/// without tokens still load into older imid builds (of the same or a later encoding version);
/// those refuse a key with tokens ("flags 0x1 unknown") rather than load it without them.
/// Aux data (before the keyspace): version 1, one time high-water mark (unsigned) covering
/// message IDs and UIDs; version 2, two marks (unsigned): message IDs', then UIDs'; version 3,
/// the two marks, then the IDMP clock (`node::idmp_clock`) as three unsigned: its time (unix
/// ms), token lifetime (ms) and window size, all 0 when there is none; version 4, those and the
/// gap in force (`node::durable`, unsigned, 0 when none: `imid.seq-gap` alone).
///
/// This build writes version 4 and reads all four; an imid build reading only an earlier
/// version refuses files written by this one.
const ENCODING_VERSION: i32 = 4;
/// The first version, one mark for both ID families.
const ENCODING_V1: i32 = 1;
/// Two marks, no IDMP clock.
const ENCODING_V2: i32 = 2;
/// Two marks and the IDMP clock, no gap.
const ENCODING_V3: i32 = 3;

/// Whether this build reads encoding version `encver`.
fn known_version(encver: c_int) -> bool {
    (ENCODING_V1..=ENCODING_VERSION).contains(&encver)
}

/// Key flag: IDMP tokens follow the flags word.
const HAS_TOKENS: u64 = 1;

/// The sequence type's side of the callbacks.
pub(crate) struct SeqType;

impl DataType for SeqType {
    /// Module type names are exactly 9 characters; the trailing digits leave room for a
    /// successor type should the value ever need more than one word.
    const NAME: &'static str = "imidseq01";
    const ENCODING_VERSION: i32 = ENCODING_VERSION;
    const LABEL: &'static str = "";

    type Boxed = BoxedSeq;
    type View<'a> = Value<'a>;

    fn slot() -> &'static TypeSlot<BoxedSeq> {
        &TYPE
    }

    fn view(w: Word<'_, BoxedSeq>) -> Option<Value<'_>> {
        Some(Value::of(w))
    }

    /// Loads one sequence. Every value loaded gets `needs_gap`: this process did not issue
    /// it, and values issued after the save may have been lost (docs/durability.md, "Sequences:
    /// the gap"). Tokens load as saved, expired ones too (see `tokens::load`).
    fn load(rdb: &Rdb, encver: c_int) -> Result<Made<BoxedSeq>, String> {
        if !known_version(encver) {
            return Err(format!(
                "sequence encoding version {encver} unknown (this build reads {ENCODING_V1} to {ENCODING_VERSION})"
            ));
        }
        let value = rdb
            .load_u64()
            .ok_or_else(|| "truncated sequence value".to_owned())?;
        let flags = rdb
            .load_u64()
            .ok_or_else(|| "truncated sequence flags".to_owned())?;
        if flags & !HAS_TOKENS != 0 {
            return Err(format!(
                "sequence flags {flags:#x} unknown (this build knows {HAS_TOKENS:#x})"
            ));
        }
        let seq = Seq::new(value, true)
            .ok_or_else(|| format!("sequence value {value} above {MAX_VALUE}"))?;
        let mut window = Default::default();
        if flags & HAS_TOKENS != 0 {
            let count = rdb
                .load_u64()
                .ok_or_else(|| "truncated token count".to_owned())?;
            if count == 0 {
                return Err("token count 0 with tokens flagged".to_owned());
            }
            window = tokens::load(rdb, count, tokens::load_count)?;
        }
        Ok(BoxedSeq { seq, window }.made())
    }

    fn save(rdb: &Rdb, v: &Value) {
        let (s, window) = v.parts();
        rdb.save_u64(s.value());
        match window {
            None => rdb.save_u64(0),
            Some(w) => {
                rdb.save_u64(HAS_TOKENS);
                rdb.save_u64(w.len() as u64);
                tokens::save(rdb, w, tokens::save_count);
            }
        }
    }

    /// Per token, oldest first, `SEQ.IDMPSET key token last expires fingerprint 0`, then
    /// `SEQ.SET key value`: the window rebuilt exactly, then the value (each IDMPSET sets it to
    /// its `last`).
    fn rewrite(out: &AofKey, v: &Value) {
        emit_marks(out);
        let (s, window) = v.parts();
        tokens::rewrite_seq(out, window);
        out.emit_key_int(c"SEQ.SET", to_i64(s.value()));
    }

    /// The value, then each token (one sequence). Not the gap mark: a replica's copy carries
    /// `needs_gap` where its primary's may not, and `DEBUG DIGEST` must still agree between
    /// them.
    fn digest(v: &Value, d: &Digest) {
        let (s, window) = v.parts();
        d.add_int(s.value() as i64);
        tokens::digest(d, window, |d, count| d.add_int(*count as i64));
        d.end();
    }

    /// An inline value lives in the pointer, so the only memory it costs is Redis's wrapper
    /// (measured: 16 bytes more per key than an INCR counter). A boxed value adds its box and
    /// its window's heap.
    fn mem_usage(v: &Value) -> usize {
        match v {
            Value::Inline(_) => VALUE_WRAPPER,
            Value::Boxed(t) => {
                VALUE_WRAPPER + std::mem::size_of::<BoxedSeq>() + t.window.heap_bytes()
            }
        }
    }

    /// An inline word is the whole value, so the copy is the same word; a boxed state is
    /// cloned.
    fn copy(v: &Value) -> Made<BoxedSeq> {
        match v {
            Value::Inline(s) => BoxedSeq {
                seq: *s,
                window: Default::default(),
            }
            .made(),
            Value::Boxed(t) => Made::Boxed((*t).clone()),
        }
    }
}
