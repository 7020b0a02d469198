//! A sequence key's value: the state itself in the word (`Seq::to_word`, low bit 1), or a boxed
//! [`BoxedSeq`] state (`host::value`), used by keys holding IDMP tokens and by the rare values
//! above 2^62-1. A key that never used IDMP keeps the one-word form and costs no allocation.

use crate::core::idmp::SeqTokens;
use crate::core::seq::Seq;
use crate::host::value::{Made, Word};

/// The state of a key with tokens (or a value too large for the word).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BoxedSeq {
    pub(crate) seq: Seq,
    pub(crate) window: SeqTokens,
}

/// A sequence key's value, read.
pub(crate) enum Value<'a> {
    Inline(Seq),
    Boxed(&'a BoxedSeq),
}

impl<'a> Value<'a> {
    /// The value of a word of the sequence type.
    pub(super) fn of(w: Word<'a, BoxedSeq>) -> Value<'a> {
        match w {
            Word::Inline(w) => Value::Inline(Seq::from_word(w)),
            Word::Boxed(t) => Value::Boxed(t),
        }
    }

    /// The state, and the tokens (`None` when there are none).
    pub(crate) fn parts(&self) -> (Seq, Option<&'a SeqTokens>) {
        match *self {
            Value::Inline(s) => (s, None),
            Value::Boxed(t) => (t.seq, Some(&t.window).filter(|w| !w.is_empty())),
        }
    }
}

impl BoxedSeq {
    /// The value to store: inline when it has no tokens and its value fits the word, else boxed.
    pub(crate) fn made(self) -> Made<BoxedSeq> {
        if self.window.is_empty() {
            if let Some(w) = self.seq.to_word() {
                return Made::Inline(w);
            }
        }
        Made::Boxed(self)
    }
}
