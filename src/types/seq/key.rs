//! A key as the SEQ.* commands see it: missing, a sequence, or (WRONGTYPE, when opened) anything
//! else.

use super::value::{BoxedSeq, Value};
use super::TYPE;
use crate::core::idmp::{Entry, SeqTokens};
use crate::core::seq::Seq;
use crate::error::{err, Error};
use crate::host::key::TypedKey;
use crate::host::value::Made;
use crate::host::{Arg, Ctx};
use crate::node::{self, fence};

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

    /// Sets the sequence to `s` (SEQ.SET, SEQ.CONVERT): a raise is charged to the gate
    /// (`node::fence::charge_raise`), as every write that is not a reservation is: a replica that
    /// missed it would, promoted, hand out again the values above the old one.
    pub(crate) fn set(&mut self, s: Seq) -> Result<(), Error> {
        let old = self.get().map_or(0, Seq::value);
        self.store(s)?;
        fence::charge_raise(s.value().saturating_sub(old));
        Ok(())
    }

    /// Raises the sequence to `value` (SEQ.ADVANCE, IM.SEND's trimmed marker), never lowers it,
    /// its gap mark kept; a raise is charged to the gate, as [`SeqKey::set`]'s. The value now,
    /// and whether it moved.
    pub(crate) fn raise(&mut self, value: u64) -> Result<(u64, bool), Error> {
        let old = self.get().unwrap_or_else(node::missing);
        let new = old
            .advance(value)
            .ok_or_else(|| err("value out of range"))?;
        let raised = new.value().saturating_sub(old.value());
        if raised > 0 {
            self.store(new)?;
            fence::charge_raise(raised);
        }
        Ok((new.value(), raised > 0))
    }

    /// Sets the sequence to `s` and records a token (SEQ.IDMPSET, IM.SENDSET): the `drop`
    /// oldest tokens go, `e` is appended; a raise is charged to the gate, as [`SeqKey::set`]'s.
    pub(crate) fn set_with_token(
        &mut self,
        s: Seq,
        drop: usize,
        e: Entry<u64>,
    ) -> Result<(), Error> {
        let old = self.get().map_or(0, Seq::value);
        self.store_with_token(s, drop, e)?;
        fence::charge_raise(s.value().saturating_sub(old));
        Ok(())
    }

    /// Stores `s` (the key must have been opened for writing), keeping its TTL and tokens,
    /// without charging the gate: a reservation's write, whose values the call's `Outgoing`
    /// charges (`handout::reserve`). The hot path (a key without tokens, a value that fits the
    /// word) is one word stored, as before tokens existed.
    #[inline(always)]
    pub(crate) fn store(&mut self, s: Seq) -> Result<(), Error> {
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

    /// Stores `s` and records a token: the `drop` oldest tokens go, `e` is appended. Not
    /// charged, as [`SeqKey::store`].
    pub(crate) fn store_with_token(
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
