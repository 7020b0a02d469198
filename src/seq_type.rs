//! The sequence data type (`imidseq01`), in safe Rust: what RDB save/load, AOF rewrite, digest
//! and memory usage do with a value, and the view of a key that the SEQ.* commands use. The
//! raw callbacks Redis calls are in `glue::types`.
//!
//! A key's value "pointer" is usually not a pointer: it is the word [`Seq::to_word`] encodes, so
//! a sequence costs no allocation beyond what Redis spends on any key. Only a key holding IDMP
//! tokens (or a value above 2^62-1) points to a boxed state (`glue::seq_value`). Redis never
//! dereferences module values; it only hands them back to the callbacks, which decode the word.
//!
//! The same type carries the node's time high-water marks (message IDs', UIDs') as RDB aux
//! data (`node::ids` owns them), so a node restarted from an RDB file (or a replica after a full
//! sync) starts above every ID the old process may have issued.

use crate::core::idmp::{Entry, Window, MAX_TOKEN_LEN};
use crate::core::seq::{Seq, MAX_VALUE};
use crate::error::{Error, WRONGTYPE};
use crate::glue::seq_value::{self, Tracked, Value};
use crate::glue::types::{seq_type, AofKey, Rdb, AUX_BEFORE_RDB};
use crate::glue::{Arg, Ctx, Held, Key};
use crate::node;
use std::os::raw::c_int;

/// Module type names are exactly 9 characters; the trailing digits leave room for a successor
/// type should the value ever need more than one word.
pub(crate) const TYPE_NAME: &str = "imidseq01";

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
/// ms), token lifetime (ms) and window size, all 0 when there is none.
///
/// This build writes version 3 and reads all three; an imid build reading only an earlier
/// version refuses files written by this one.
pub(crate) const ENCODING_VERSION: i32 = 3;
/// The first version, one mark for both ID families.
const ENCODING_V1: i32 = 1;
/// Two marks, no IDMP clock.
const ENCODING_V2: i32 = 2;

/// Whether this build reads encoding version `encver`.
fn known_version(encver: c_int) -> bool {
    (ENCODING_V1..=ENCODING_VERSION).contains(&encver)
}

/// Key flag: IDMP tokens follow the flags word.
const HAS_TOKENS: u64 = 1;

/// Most tokens a loaded key may hold (`imid.seq-idmp-max`'s upper bound): a larger count is a
/// corrupt payload, refused before anything is allocated for it.
pub(crate) const MAX_TOKENS: u64 = 1_000_000;

/// Loads one sequence. Every value loaded gets `needs_gap`: this process did not issue it,
/// and values issued after the save may have been lost (docs/durability.md, "Sequences: the gap"). Tokens load as
/// saved, expired ones too: only a replicated write drops them, so a replica's window stays
/// its primary's.
pub(crate) fn load(rdb: &Rdb, encver: c_int) -> Result<Tracked, String> {
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
    let seq =
        Seq::new(value, true).ok_or_else(|| format!("sequence value {value} above {MAX_VALUE}"))?;
    let mut window = Window::default();
    if flags & HAS_TOKENS != 0 {
        let count = rdb
            .load_u64()
            .ok_or_else(|| "truncated token count".to_owned())?;
        if count == 0 {
            return Err("token count 0 with tokens flagged".to_owned());
        }
        window = load_tokens(rdb, count)?;
    }
    Ok(Tracked { seq, window })
}

/// `count` tokens as [`save_tokens`] wrote them (for sequence keys and maps alike).
pub(crate) fn load_tokens(rdb: &Rdb, count: u64) -> Result<Window, String> {
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
/// request's fingerprint.
pub(crate) fn save_tokens(rdb: &Rdb, w: &Window) {
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
    Entry::new(&token, last, expires_ms, fingerprint)
        .ok_or_else(|| "IDMP token must be 1..64 bytes".to_owned())
}

/// A token's length rule (1..64 bytes), for the commands and the loader alike.
pub(crate) fn check_token(token: &[u8]) -> Result<(), &'static str> {
    if token.is_empty() || token.len() > MAX_TOKEN_LEN {
        Err("IDMP token must be 1..64 bytes")
    } else {
        Ok(())
    }
}

/// The state of a value and its tokens (`None` when it has none).
fn parts<'v>(v: &'v Value) -> (Seq, Option<&'v Window>) {
    match v {
        Value::Inline(s) => (*s, None),
        Value::Boxed(t) => (t.seq, Some(&t.window).filter(|w| !w.is_empty())),
    }
}

pub(crate) fn save(rdb: &Rdb, v: &Value) {
    let (s, window) = parts(v);
    rdb.save_u64(s.value());
    match window {
        None => rdb.save_u64(0),
        Some(w) => {
            rdb.save_u64(HAS_TOKENS);
            rdb.save_u64(w.len() as u64);
            save_tokens(rdb, w);
        }
    }
}

/// Per token, oldest first, `SEQ.IDMPSET key token last expires fingerprint 0`, then `SEQ.SET
/// key value`: the window rebuilt exactly, then the value (each IDMPSET sets it to its `last`).
pub(crate) fn rewrite(out: &AofKey, v: &Value) {
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
    let (s, window) = parts(v);
    for e in window.into_iter().flat_map(Window::iter) {
        out.emit_token(c"SEQ.IDMPSET", e);
    }
    // The value is at most 2^63-1, so it fits an i64.
    let v = i64::try_from(s.value()).unwrap_or(i64::MAX);
    out.emit_key_int(c"SEQ.SET", v);
}

/// The value, then each token with its last value, expiry and fingerprint: a replica's window
/// must be its primary's. Not the gap mark: a replica's copy carries `needs_gap` where its
/// primary's may not, and `DEBUG DIGEST` must still agree between them.
pub(crate) fn digest(v: &Value, add: &mut dyn FnMut(DigestItem)) {
    let (s, window) = parts(v);
    add(DigestItem::Int(s.value() as i64));
    for e in window.into_iter().flat_map(Window::iter) {
        add(DigestItem::Bytes(e.token()));
        add(DigestItem::Int(e.last as i64));
        add(DigestItem::Int(e.expires_ms as i64));
        add(DigestItem::Int(e.fingerprint as i64));
    }
}

/// One element of a key's digest.
pub(crate) enum DigestItem<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

/// An inline value lives in the pointer, so the only memory it costs is the 16-byte wrapper
/// Redis allocates around every module value (type pointer + value pointer). MEMORY USAGE
/// counts only what this callback reports for module values, so reporting the wrapper keeps it
/// in line with `used_memory` (measured: 16 bytes more per key than an INCR counter). A boxed
/// value adds its box and its window's heap.
pub(crate) fn mem_usage(v: &Value) -> usize {
    let wrapper = 2 * std::mem::size_of::<*const ()>();
    match v {
        Value::Inline(_) => wrapper,
        Value::Boxed(t) => wrapper + std::mem::size_of::<Tracked>() + t.window.heap_bytes(),
    }
}

pub(crate) fn aux_save(rdb: &Rdb, when: c_int) {
    if when == AUX_BEFORE_RDB {
        rdb.save_u64(node::ids::high_water());
        rdb.save_u64(node::ids::uid_high_water());
        let (now, ttl, max) = node::idmp_clock::saved().unwrap_or((0, 0, 0));
        rdb.save_u64(now);
        rdb.save_u64(ttl);
        rdb.save_u64(max);
    }
}

/// Redis 7.2+ and Valkey: the aux data only when there is something to keep (a mark, or an IDMP
/// clock). Saving nothing leaves the aux record out of the RDB altogether, so a snapshot of a
/// server that never issued an ID nor used IDMP (and holds no sequence key) loads without imid.
pub(crate) fn aux_save2(rdb: &Rdb, when: c_int) {
    if node::ids::has_mark() || node::idmp_clock::saved().is_some() {
        aux_save(rdb, when);
    }
}

pub(crate) fn aux_load(rdb: &Rdb, encver: c_int, when: c_int) -> Result<(), String> {
    if !known_version(encver) {
        Err(format!("aux encoding version {encver} unknown"))
    } else if when != AUX_BEFORE_RDB {
        Err(format!("aux data at position {when} unknown"))
    } else {
        load_marks(rdb, encver)?;
        if encver > ENCODING_V2 {
            load_idmp_clock(rdb)?;
        }
        Ok(())
    }
}

/// Version 1: one mark for both families; version 2 and later: message IDs', then UIDs'.
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

/// Version 3: the IDMP clock (all 0: none), checked as SEQ.IDMPCLOCK checks it.
fn load_idmp_clock(rdb: &Rdb) -> Result<(), String> {
    let next = || {
        rdb.load_u64()
            .ok_or_else(|| "truncated IDMP clock".to_owned())
    };
    let (now, ttl, max) = (next()?, next()?, next()?);
    if (now, ttl, max) == (0, 0, 0) {
        return Ok(());
    }
    let (ttl, max) = node::idmp_clock::bounds(ttl, max)
        .map_err(|e| format!("IDMP clock: {e}; refusing the RDB file"))?;
    if now > i64::MAX as u64 {
        return Err(format!(
            "IDMP clock time {now} past 2^63-1; refusing the RDB file"
        ));
    }
    node::idmp_clock::replayed(now, ttl, max, false);
    Ok(())
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

    fn value(&self) -> Option<Value<'_>> {
        match self.held {
            // SAFETY: the word is the key's current value, and the borrow of `self` keeps the
            // key open (and, within this call, unchanged) while the reference lives.
            Held::Word(w) => Some(unsafe { seq_value::read(w) }),
            _ => None,
        }
    }

    /// The sequence, or `None` for a missing key.
    #[inline]
    pub(crate) fn get(&self) -> Option<Seq> {
        match self.held {
            // The hot path: an inline word decodes without a call.
            Held::Word(w) if w & 1 == 1 => Some(Seq::from_word(w)),
            _ => self.value().map(|v| parts(&v).0),
        }
    }

    /// The key's tokens (`None` when it has none or is missing).
    pub(crate) fn window(&self) -> Option<&Window> {
        match self.value()? {
            Value::Boxed(t) => Some(&t.window),
            Value::Inline(_) => None,
        }
    }

    /// Stores `s` (the key must have been opened for writing), keeping its TTL and tokens.
    /// The hot path (a key without tokens, a value that fits the word) is one word stored, as
    /// before tokens existed.
    #[inline(always)]
    pub(crate) fn set(&mut self, s: Seq) -> Result<(), Error> {
        if let Some(t) = self.boxed_mut() {
            t.seq = s;
            return Ok(());
        }
        match s.to_word() {
            // Stored in place of an inline word or a missing key: nothing to free.
            Some(word) => self.key.set(seq_type(), self.held, word),
            None => self.store(seq_value::into_word(Tracked {
                seq: s,
                window: Window::default(),
            })),
        }
    }

    /// Stores `s` and records a token: the `drop` oldest tokens go, `e` is appended.
    pub(crate) fn set_with_token(&mut self, s: Seq, drop: usize, e: Entry) -> Result<(), Error> {
        if let Some(t) = self.boxed_mut() {
            t.seq = s;
            t.window.apply(drop, e);
            return Ok(());
        }
        let mut window = Window::default();
        window.apply(drop, e);
        self.store(seq_value::into_word(Tracked { seq: s, window }))
    }

    #[inline]
    fn boxed_mut(&mut self) -> Option<&mut Tracked> {
        match self.held {
            // SAFETY: the word is the key's current value; `&mut self` makes this the only
            // reference handed out through this handle, and a command opens one handle per key
            // at a time for writing.
            Held::Word(w) => unsafe { seq_value::boxed_mut(w) },
            _ => None,
        }
    }

    /// Stores a new word in place of a missing key's or an inline word's (neither owns
    /// anything, so nothing is freed).
    #[inline(never)]
    fn store(&mut self, word: u64) -> Result<(), Error> {
        let r = self.key.set(seq_type(), self.held, word);
        match r {
            Ok(()) => self.held = Held::Word(word),
            // SAFETY: the key did not take the word, so nothing else holds it.
            Err(_) => unsafe { seq_value::free(word) },
        }
        r
    }
}
