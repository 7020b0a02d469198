//! Sequence rules, Redis-free: NEXT with a block count, overflow and the never-reissue gap,
//! ADVANCE, and the one-word encoding the data type stores in place of a pointer.
//!
//! A sequence's whole state is a value in `0..=2^63-1` plus one bit, `needs_gap`: the value
//! came from somewhere other than this process's own writes (RDB, AOF, the primary), so some
//! values issued after it may have been lost, and the first NEXT must skip `imid.seq-gap`
//! values before it reserves any (docs/durability.md, "Sequences: the gap").

/// Largest value a sequence holds: values are RESP integers, so they stay within i64.
pub const MAX_VALUE: u64 = i64::MAX as u64;

/// Largest value the one-word encoding holds ([`Seq::to_word`]): 2^62-1.
pub const MAX_INLINE: u64 = (1 << 62) - 1;

/// Largest block SEQ.NEXT reserves at once.
pub const MAX_BLOCK: u64 = 1_000_000;

/// The value of an `INCR` counter's text, as Redis reads an integer (an optional `-`, no
/// leading zero, no sign `+`, no space, within 64 bits), for SEQ.CONVERT; `None` otherwise.
pub fn counter_value(text: &[u8]) -> Option<i64> {
    let (neg, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    match digits {
        [] => return None,
        [b'0'] if !neg => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    let mut v: i64 = 0;
    for d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

/// The state of one sequence. Always canonical: `value <= MAX_VALUE`, and `needs_gap` is
/// false at `MAX_VALUE` (every NEXT overflows there anyway, and that state is the one whose
/// word would be zero, see [`Seq::to_word`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seq {
    value: u64,
    needs_gap: bool,
}

/// Why a NEXT reserved nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextError {
    /// The block (after the gap, if due) would pass [`MAX_VALUE`].
    Overflow,
    /// A count of 0 reserves nothing; the commands reject it before this is reached.
    ZeroCount,
}

/// What one NEXT did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Next {
    /// The state to store.
    pub state: Seq,
    /// The last value of the reserved block: the reply.
    pub last: u64,
    /// Whether the gap was skipped by this call.
    pub skipped_gap: bool,
}

impl Seq {
    /// A state, or `None` when `value` is out of range. `needs_gap` at `MAX_VALUE` is dropped.
    pub const fn new(value: u64, needs_gap: bool) -> Option<Seq> {
        if value > MAX_VALUE {
            return None;
        }
        Some(Seq {
            value,
            needs_gap: needs_gap && value < MAX_VALUE,
        })
    }

    pub const fn value(self) -> u64 {
        self.value
    }

    pub const fn needs_gap(self) -> bool {
        self.needs_gap
    }

    /// The word stored as the module value "pointer", so a key costs no allocation of its own:
    /// `value << 2 | needs_gap << 1 | 1`, or `None` for a value above [`MAX_INLINE`]. The low
    /// bit 1 tells it from a pointer (aligned, so its low bit is 0) to a boxed state, which
    /// keys with IDMP tokens and the rare larger values use (`src/types/seq/value.rs`); the
    /// word is never zero, which Redis would read as no value.
    pub const fn to_word(self) -> Option<u64> {
        if self.value > MAX_INLINE {
            return None;
        }
        Some((self.value << 2) | ((self.needs_gap as u64) << 1) | 1)
    }

    /// Inverse of [`Seq::to_word`] for a word with the low bit set. Total: the value is at most
    /// 62 bits after the shift, so every word decodes to a canonical state.
    pub const fn from_word(word: u64) -> Seq {
        Seq {
            value: word >> 2,
            needs_gap: word & 2 != 0,
        }
    }

    /// Reserves `count` values (skipping `gap` first when the state is marked) and clears the
    /// mark. On error nothing changes.
    pub fn next(self, count: u64, gap: u64) -> Result<Next, NextError> {
        if count == 0 {
            return Err(NextError::ZeroCount);
        }
        let skip = if self.needs_gap { gap } else { 0 };
        let last = self
            .value
            .checked_add(skip)
            .and_then(|v| v.checked_add(count))
            .filter(|&v| v <= MAX_VALUE)
            .ok_or(NextError::Overflow)?;
        Ok(Next {
            state: Seq {
                value: last,
                needs_gap: false,
            },
            last,
            skipped_gap: skip > 0,
        })
    }

    /// NEXT as replayed from the primary or the AOF: the recorded call never skipped the gap
    /// (a primary that skipped it replicated the resulting value instead), so the replay adds
    /// `count` and nothing else. The mark stays: this process still did not choose the value.
    pub fn replay_next(self, count: u64) -> Result<Next, NextError> {
        if count == 0 {
            return Err(NextError::ZeroCount);
        }
        let last = self
            .value
            .checked_add(count)
            .filter(|&v| v <= MAX_VALUE)
            .ok_or(NextError::Overflow)?;
        Ok(Next {
            state: Seq {
                value: last,
                needs_gap: self.needs_gap && last < MAX_VALUE,
            },
            last,
            skipped_gap: false,
        })
    }

    /// `max(current, to)`, keeping the mark: an acknowledgement says nothing about values lost
    /// in a crash, so the gap is still due. `None` when `to` is out of range.
    pub fn advance(self, to: u64) -> Option<Seq> {
        Seq::new(self.value.max(to), self.needs_gap)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counters_read_as_redis_reads_integers() {
        use super::counter_value as c;
        assert_eq!(c(b"0"), Some(0));
        assert_eq!(c(b"42"), Some(42));
        assert_eq!(c(b"-7"), Some(-7));
        assert_eq!(c(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(c(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"007",
            b"+1",
            b" 1",
            b"1.5",
            b"9223372036854775808",
            b"x",
        ] {
            assert_eq!(c(bad), None, "{bad:?}");
        }
    }

    use super::*;
    use proptest::prelude::*;

    /// (value, needs_gap, count, gap) and the expected (last, skipped_gap) or error.
    type NextCase = (u64, bool, u64, u64, Result<(u64, bool), NextError>);
    /// (value, needs_gap, to) and the expected (value, needs_gap).
    type AdvanceCase = (u64, bool, u64, Option<(u64, bool)>);

    fn seq(value: u64, needs_gap: bool) -> Seq {
        Seq::new(value, needs_gap).unwrap()
    }

    #[test]
    fn replay_next_adds_count_keeps_mark_and_never_skips() {
        let n = seq(41, true).replay_next(3).unwrap();
        assert_eq!((n.last, n.state, n.skipped_gap), (44, seq(44, true), false));
        let n = seq(41, false).replay_next(1).unwrap();
        assert_eq!((n.last, n.state), (42, seq(42, false)));
        let n = seq(MAX_VALUE - 1, true).replay_next(1).unwrap();
        assert_eq!(n.state, seq(MAX_VALUE, false), "canonical at MAX_VALUE");
        assert_eq!(
            seq(MAX_VALUE, false).replay_next(1),
            Err(NextError::Overflow)
        );
        assert_eq!(seq(5, true).replay_next(0), Err(NextError::ZeroCount));
    }

    proptest! {
        /// Without a gap due, replaying a NEXT is the NEXT: the property verbatim replication
        /// rests on.
        #[test]
        fn replay_equals_next_when_no_gap_is_skipped(v in 0..=MAX_VALUE, mark: bool, count in 1..=MAX_BLOCK, gap in 0u64..2000) {
            let s = seq(v, mark);
            if let Ok(n) = s.next(count, gap) {
                if !n.skipped_gap {
                    let r = s.replay_next(count).unwrap();
                    prop_assert_eq!(r.last, n.last);
                    prop_assert_eq!(r.state.value(), n.state.value());
                }
            }
        }
    }

    #[test]
    fn next_table() {
        let cases: &[NextCase] = &[
            (0, false, 1, 1000, Ok((1, false))),
            (0, false, 10, 1000, Ok((10, false))),
            (5, false, MAX_BLOCK, 0, Ok((5 + MAX_BLOCK, false))),
            (0, true, 1, 1000, Ok((1001, true))),
            (41, true, 1, 1000, Ok((1042, true))),
            (41, true, 3, 0, Ok((44, false))),
            (MAX_VALUE - 1, false, 1, 1000, Ok((MAX_VALUE, false))),
            (MAX_VALUE - 1, false, 2, 1000, Err(NextError::Overflow)),
            (MAX_VALUE, false, 1, 0, Err(NextError::Overflow)),
            (MAX_VALUE - 1000, true, 1, 1000, Err(NextError::Overflow)),
            (MAX_VALUE - 1001, true, 1, 1000, Ok((MAX_VALUE, true))),
            (MAX_VALUE - 5, false, u64::MAX, 0, Err(NextError::Overflow)),
            (MAX_VALUE - 5, true, 1, u64::MAX, Err(NextError::Overflow)),
            (3, false, 0, 0, Err(NextError::ZeroCount)),
        ];
        for &(value, gap_due, count, gap, want) in cases {
            let got = seq(value, gap_due)
                .next(count, gap)
                .map(|n| (n.last, n.skipped_gap));
            assert_eq!(
                got, want,
                "value {value} gap_due {gap_due} count {count} gap {gap}"
            );
            if let Ok(n) = seq(value, gap_due).next(count, gap) {
                assert_eq!(n.state, seq(n.last, false));
            }
        }
    }

    #[test]
    fn gap_is_skipped_once() {
        let s = seq(7, true);
        let a = s.next(1, 1000).unwrap();
        let b = a.state.next(1, 1000).unwrap();
        assert_eq!((a.last, a.skipped_gap), (1008, true));
        assert_eq!((b.last, b.skipped_gap), (1009, false));
    }

    #[test]
    fn advance_table() {
        let cases: &[AdvanceCase] = &[
            (0, false, 0, Some((0, false))),
            (0, false, 9, Some((9, false))),
            (9, false, 3, Some((9, false))),
            (9, true, 3, Some((9, true))),
            (9, true, 30, Some((30, true))),
            (9, true, MAX_VALUE, Some((MAX_VALUE, false))),
            (9, false, MAX_VALUE + 1, None),
        ];
        for &(value, gap_due, to, want) in cases {
            let got = seq(value, gap_due)
                .advance(to)
                .map(|s| (s.value(), s.needs_gap()));
            assert_eq!(got, want, "value {value} gap_due {gap_due} to {to}");
        }
    }

    #[test]
    fn word_table() {
        let cases: &[(u64, bool, Option<u64>)] = &[
            (0, false, Some(1)),
            (0, true, Some(3)),
            (1, false, Some(5)),
            (MAX_INLINE, true, Some(u64::MAX)),
            (MAX_INLINE, false, Some(u64::MAX - 2)),
            (MAX_INLINE + 1, false, None),
            (MAX_VALUE, false, None),
        ];
        for &(value, gap_due, word) in cases {
            assert_eq!(seq(value, gap_due).to_word(), word, "{value} {gap_due}");
            if let Some(w) = word {
                assert_eq!(Seq::from_word(w), seq(value, gap_due));
            }
        }
        // The one non-canonical state is folded away.
        assert_eq!(seq(MAX_VALUE, true), seq(MAX_VALUE, false));
        assert_eq!(Seq::new(MAX_VALUE + 1, false), None);
    }

    proptest! {
        #[test]
        fn word_roundtrips_is_tagged_and_never_null(value in 0..=MAX_VALUE, gap_due: bool) {
            let s = seq(value, gap_due);
            match s.to_word() {
                Some(w) => {
                    prop_assert_eq!(w & 1, 1);
                    prop_assert_eq!(Seq::from_word(w), s);
                }
                None => prop_assert!(value > MAX_INLINE),
            }
        }

        #[test]
        fn any_tagged_word_decodes_canonically(word: u64) {
            let s = Seq::from_word(word | 1);
            prop_assert!(s.value() <= MAX_INLINE);
            prop_assert_eq!(Seq::new(s.value(), s.needs_gap()), Some(s));
        }

        #[test]
        fn next_reserves_exactly_count(
            value in 0..=MAX_VALUE, gap_due: bool, count in 1..=MAX_BLOCK, gap in 0u64..=1_000_000_000,
        ) {
            let s = seq(value, gap_due);
            match s.next(count, gap) {
                Ok(n) => {
                    let skip = if gap_due { gap } else { 0 };
                    prop_assert_eq!(n.last, value + skip + count);
                    prop_assert!(n.last <= MAX_VALUE);
                    prop_assert!(!n.state.needs_gap());
                    prop_assert_eq!(n.skipped_gap, gap_due && gap > 0);
                }
                Err(e) => {
                    prop_assert_eq!(e, NextError::Overflow);
                    let skip = if gap_due { gap } else { 0 };
                    prop_assert!(u128::from(value) + u128::from(skip) + u128::from(count) > u128::from(MAX_VALUE));
                }
            }
        }

        #[test]
        fn advance_never_goes_back(value in 0..=MAX_VALUE, gap_due: bool, to in 0..=MAX_VALUE) {
            let a = seq(value, gap_due).advance(to).unwrap();
            prop_assert_eq!(a.value(), value.max(to));
            prop_assert!(a.value() >= value);
        }
    }
}
