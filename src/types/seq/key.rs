//! A key as the SEQ.* commands see it: missing, a sequence, or (WRONGTYPE, when opened) anything
//! else.

use super::value::{BoxedSeq, Value};
use super::TYPE;
use crate::core::idmp::{Entry, SeqTokens};
use crate::core::seq::Seq;
use crate::error::Error;
use crate::host::key::TypedKey;
use crate::host::value::Made;
use crate::host::{Arg, Ctx};

/// A sequence key, open for reading or writing; like the [`TypedKey`] it wraps, it borrows the
/// call's context (`'a`) and cannot outlive the call.
pub(crate) struct SeqKey<'a>(TypedKey<'a, BoxedSeq>);

impl<'a> SeqKey<'a> {
    /// Opens `name` for reading; WRONGTYPE for a key of another type.
    #[inline]
    pub(crate) fn open_read(ctx: &'a Ctx, name: &Arg) -> Result<SeqKey<'a>, Error> {
        Self::open(ctx, name, false)
    }

    /// Opens `name` for writing; WRONGTYPE for a key of another type.
    #[inline]
    pub(crate) fn open_write(ctx: &'a Ctx, name: &Arg) -> Result<SeqKey<'a>, Error> {
        Self::open(ctx, name, true)
    }

    #[inline]
    fn open(ctx: &'a Ctx, name: &Arg, write: bool) -> Result<SeqKey<'a>, Error> {
        TypedKey::open(ctx, &TYPE, name, write).map(SeqKey)
    }

    /// The sequence, or `None` for a missing key.
    #[inline]
    pub(crate) fn get(&self) -> Option<Seq> {
        match self.0.word() {
            // The hot path: an inline word decodes without a call.
            Some(w) if w & 1 == 1 => Some(Seq::from_word(w)),
            _ => self.0.value().map(|w| Value::of(w).parts().0),
        }
    }

    /// The key's tokens (`None` when it has none or is missing).
    pub(crate) fn window(&self) -> Option<&SeqTokens> {
        match Value::of(self.0.value()?) {
            Value::Boxed(t) => Some(&t.window),
            Value::Inline(_) => None,
        }
    }

    /// Stores `s` (the key must have been opened for writing), keeping its TTL and tokens.
    /// The hot path (a key without tokens, a value that fits the word) is one word stored, as
    /// before tokens existed.
    #[inline(always)]
    pub(crate) fn set(&mut self, s: Seq) -> Result<(), Error> {
        if let Some(t) = self.0.value_mut() {
            t.seq = s;
            return Ok(());
        }
        match s.to_word() {
            Some(word) => self.0.put(Made::Inline(word)),
            None => self.put_boxed(BoxedSeq {
                seq: s,
                window: SeqTokens::default(),
            }),
        }
    }

    /// Stores `s` and records a token: the `drop` oldest tokens go, `e` is appended.
    pub(crate) fn set_with_token(
        &mut self,
        s: Seq,
        drop: usize,
        e: Entry<u64>,
    ) -> Result<(), Error> {
        if let Some(t) = self.0.value_mut() {
            t.seq = s;
            t.window.apply(drop, e);
            return Ok(());
        }
        let mut window = SeqTokens::default();
        window.apply(drop, e);
        self.put_boxed(BoxedSeq { seq: s, window })
    }

    /// Sets the key's absolute expiry (Unix ms; the key must exist, opened for writing).
    pub(crate) fn expire_at(&mut self, at: i64) {
        self.0.expire_at(at);
    }

    #[inline(never)]
    fn put_boxed(&mut self, t: BoxedSeq) -> Result<(), Error> {
        self.0.put(Made::Boxed(t))
    }
}
