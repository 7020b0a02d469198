//! A module value as Redis stores it: one pointer-sized word that Redis never dereferences, only
//! hands back to the type's callbacks. imid's words are of two kinds:
//! - inline (low bit 1): the value itself, packed by its type (`Seq::to_word`); owns nothing;
//! - boxed (low bit 0, not null): a `Box<B>` given away with `Box::into_raw` (through the
//!   module's allocator, Redis's own, so `used_memory` sees it) and taken back once, by [`free`].
//!
//! A registered type (`key::TypeSlot<B>`) holds only words made here for its `B`, by the type's
//! callbacks (load, copy) and by its key handles; that is what makes reading one back sound.
//! Everything here runs on Redis's main thread.

use std::marker::PhantomData;

// Values travel as pointer-sized words; a 32-bit target would truncate them.
const _: () = assert!(usize::BITS == 64);

/// A value word, read: the inline payload, or a reference to the boxed value.
pub(crate) enum Word<'a, B> {
    Inline(u64),
    Boxed(&'a B),
}

/// A value made for a key (loaded, copied, created): not yet a word.
pub(crate) enum Made<B> {
    /// An inline word (low bit 1).
    Inline(u64),
    Boxed(B),
}

impl<B> Made<B> {
    /// The word Redis stores; a boxed value is given away (owned by the word until [`free`]).
    pub(crate) fn into_word(self) -> u64 {
        match self {
            Made::Inline(w) => w | 1,
            Made::Boxed(b) => {
                // A box is aligned to at least 2, so its low bit is free for the tag.
                const { assert!(std::mem::align_of::<B>() >= 2) };
                Box::into_raw(Box::new(b)) as usize as u64
            }
        }
    }
}

/// Reads a value word (`None` for null, which is no value).
///
/// # Safety
/// `word` must be null, inline, or a word made by [`Made::into_word`] for this `B` that is still
/// owned by a live key (or handed to one of the type's callbacks), and the reference must not
/// outlive that.
pub(crate) unsafe fn read<'a, B>(word: u64) -> Option<Word<'a, B>> {
    if word == 0 {
        None
    } else if word & 1 == 1 {
        Some(Word::Inline(word))
    } else {
        // SAFETY: a word with the low bit 0, not null, came from `Made::into_word` for `B` (the
        // caller's contract) and is still owned, so it points to a live B.
        Some(Word::Boxed(unsafe { &*(word as usize as *const B) }))
    }
}

/// The boxed value of a word, to change in place; `None` for an inline word or null.
///
/// # Safety
/// As [`read`], and no other reference to the same value may be alive while this one is.
pub(crate) unsafe fn read_mut<'a, B>(word: u64) -> Option<&'a mut B> {
    if word == 0 || word & 1 == 1 {
        return None;
    }
    // SAFETY: as in `read`; exclusivity is the caller's contract.
    Some(unsafe { &mut *(word as usize as *mut B) })
}

/// Frees what a word owns (nothing for an inline word or null).
///
/// # Safety
/// `word` must be a word of this `B` that no key holds any more and that is freed only this once.
pub(crate) unsafe fn free<B>(word: u64) {
    if word & 1 == 0 && word != 0 {
        // SAFETY: the word came from `Made::into_word` for `B` and is freed once.
        drop(unsafe { Box::from_raw(word as usize as *mut B) });
    }
}

/// Marks a type whose words hold `B` (see `key::TypeSlot`).
pub(crate) struct Holds<B>(PhantomData<fn() -> B>);

impl<B> Holds<B> {
    pub(crate) const fn new() -> Holds<B> {
        Holds(PhantomData)
    }
}
