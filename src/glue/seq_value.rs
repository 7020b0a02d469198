//! A sequence key's value word, raw side: either the state itself ([`Seq::to_word`], low bit 1)
//! or a pointer (low bit 0) to a boxed [`Tracked`] state, used by keys holding IDMP tokens and
//! by the rare values above 2^62-1. A key that never used IDMP keeps the one-word form and
//! costs no allocation.
//!
//! Ownership: a boxed state belongs to the one key holding its word. It is made by
//! [`into_word`], freed by [`free`] (the type's free callback, or a load that failed after
//! making it), cloned by the copy callback; Redis never dereferences it. Everything here runs
//! on Redis's main thread.

use crate::core::idmp::Window;
use crate::core::seq::Seq;

/// The state of a key with tokens (or a value too large for the word).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tracked {
    pub(crate) seq: Seq,
    pub(crate) window: Window,
}

// A boxed state is aligned to at least 2, so its pointer's low bit is free for the tag.
const _: () = assert!(std::mem::align_of::<Tracked>() >= 2);

/// What a value word holds.
pub(crate) enum Value<'a> {
    Inline(Seq),
    Boxed(&'a Tracked),
}

/// Reads a value word of our type.
///
/// # Safety
/// `word` must be the current value of a live key of the sequence type (or a value Redis hands
/// to one of the type's callbacks), and the reference must not outlive that value.
pub(crate) unsafe fn read<'a>(word: u64) -> Value<'a> {
    if word & 1 == 1 {
        Value::Inline(Seq::from_word(word))
    } else {
        // SAFETY: a word with the low bit 0 came from `into_word` (the only other source of
        // words, `Seq::to_word`, sets the bit) and is still owned by the key (the caller's
        // contract), so it points to a live Tracked.
        Value::Boxed(unsafe { &*(word as usize as *const Tracked) })
    }
}

/// The boxed state of a value word, for changing it in place; `None` for an inline word.
///
/// # Safety
/// As [`read`], and no other reference to the same state may be alive while this one is.
#[inline]
pub(crate) unsafe fn boxed_mut<'a>(word: u64) -> Option<&'a mut Tracked> {
    if word & 1 == 1 {
        return None;
    }
    // SAFETY: as in `read`; exclusivity is the caller's contract.
    Some(unsafe { &mut *(word as usize as *mut Tracked) })
}

/// The value word of `t`: inline when it has no tokens and its value fits, else boxed (the
/// word then owns the box until [`free`]).
pub(crate) fn into_word(t: Tracked) -> u64 {
    if t.window.is_empty() {
        if let Some(w) = t.seq.to_word() {
            return w;
        }
    }
    Box::into_raw(Box::new(t)) as usize as u64
}

/// Frees what a value word owns (nothing for an inline word).
///
/// # Safety
/// `word` must be a value word that no key holds any more and that is freed only this once.
pub(crate) unsafe fn free(word: u64) {
    if word & 1 == 0 && word != 0 {
        // SAFETY: the word came from `into_word` (low bit 0, not null) and is freed once.
        drop(unsafe { Box::from_raw(word as usize as *mut Tracked) });
    }
}
