//! imid's data types, one folder each: the sequence (`seq/`, `imidseq01`) and the sequence map
//! (`map/`, `imidsmap1`). A folder holds everything of its type: the value and its word, RDB
//! load and save, AOF rewrite, digest, memory usage, copy, aux data, and the view of a key the
//! commands use. What both types share is here: the [`DataType`] trait the callbacks in
//! `entry::data_type` call, the node's ID marks an AOF rewrite writes before the first key, and
//! (in `tokens`) how an IDMP token window is saved, loaded, rewritten and digested.
//!
//! Safe Rust: the raw pointers Redis hands over become the handles of `host` in `entry`.

pub(crate) mod map;
pub(crate) mod seq;
mod tokens;

use crate::host::io::{AofKey, Digest, Rdb};
use crate::host::key::TypeSlot;
use crate::host::value::{Made, Word};
use crate::node;
use std::os::raw::c_int;

/// What one module data type does in each callback (`entry::data_type` makes the raw callbacks
/// of it once for both types).
pub(crate) trait DataType {
    /// The type's name, exactly 9 characters (Redis's rule).
    const NAME: &'static str;
    /// The RDB encoding version Redis stores with every key of the type.
    const ENCODING_VERSION: i32;
    /// How log lines name the type's callbacks, `rdb_load (<LABEL>)`; empty: `rdb_load`.
    const LABEL: &'static str;

    /// What a boxed value word holds (`host::value`).
    type Boxed: 'static;

    /// A value as the type's code reads it; it borrows the callback's frame.
    type View<'a>;

    /// Where the registered type is kept.
    fn slot() -> &'static TypeSlot<Self::Boxed>;

    /// The value of a word; `None` for a word that is not one of the type's.
    fn view(w: Word<'_, Self::Boxed>) -> Option<Self::View<'_>>;

    /// Loads a value from an RDB or DUMP payload, or says why the payload is refused.
    fn load(io: &Rdb, encver: c_int) -> Result<Made<Self::Boxed>, String>;

    fn save(io: &Rdb, v: &Self::View<'_>);

    fn rewrite(out: &AofKey, v: &Self::View<'_>);

    /// Adds the value to DEBUG DIGEST: items, each sequence of them ended.
    fn digest(v: &Self::View<'_>, d: &Digest);

    fn mem_usage(v: &Self::View<'_>) -> usize;

    /// A copy of the value, for COPY.
    fn copy(v: &Self::View<'_>) -> Made<Self::Boxed>;
}

/// The memory Redis keeps around every module value: a 16-byte wrapper (type pointer, value
/// pointer). MEMORY USAGE counts only what the type reports for module values, so reporting the
/// wrapper keeps it in line with `used_memory`.
const VALUE_WRAPPER: usize = 2 * std::mem::size_of::<*const ()>();

/// Before the first key an AOF rewrite writes (of either type): the node's ID marks, message
/// IDs' first (`MSGID.FLOOR` raises both floors), then UIDs' (at least as high), and the gap in
/// force (`SEQ.GAP`, `node::durable`). A rewrite without the RDB preamble has no aux data, and
/// the FLOOR and GAP lines of the old AOF are gone with it (see `node::ids::marks_for_rewrite`).
fn emit_marks(out: &AofKey) {
    if let Some(marks) = node::ids::marks_for_rewrite() {
        if marks.msgid > 0 {
            out.emit_int(c"MSGID.FLOOR", marks.msgid);
        }
        if marks.uid > 0 {
            out.emit_int(c"UID.FLOOR", marks.uid);
        }
        let gap = node::durable::stream_gap();
        if gap > 0 {
            out.emit_int(c"SEQ.GAP", crate::core::to_i64(gap));
        }
    }
}
