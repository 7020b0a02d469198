//! The message-ID generator state machine, Redis-free; the caller passes the clock reading and
//! the node's time floor (see `core::lease`), so tests drive it with any clock they like.
//!
//! Rules (docs/commands.md, MSGID.GEN):
//! - every ID is strictly greater than every ID issued before it by this generator;
//! - time is `max(now, last, floor)`: a clock that runs backwards never makes IDs go back;
//! - within one millisecond `seq` counts up; after 4096 IDs in one millisecond the generator
//!   borrows the next millisecond instead of waiting (nothing ever sleeps or spins).
//!
//! The time lease that keeps a restarted or promoted node above every ID issued before is not
//! the generator's: it is the node's (`core::lease`), shared with every ID family.

use super::msgid::{MAX_SEQ, MAX_TIME};

/// Counters reported by `INFO imid`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenStats {
    pub generated: u64,
    pub borrowed_ms: u64,
    pub clock_regressions: u64,
}

/// One issued ID's time and seq.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issued {
    pub time: u64,
    pub seq: u16,
}

/// The 42-bit time field is used up (year 2109, or a floor pushed there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgidExhausted;

#[derive(Debug)]
pub struct Generator {
    /// Time and seq of the last issued ID, if any.
    last: Option<(u64, u16)>,
    /// The previous clock reading, to count regressions.
    last_wall: u64,
    stats: GenStats,
}

impl Default for Generator {
    fn default() -> Self {
        Generator::new()
    }
}

impl Generator {
    pub const fn new() -> Generator {
        Generator {
            last: None,
            last_wall: 0,
            stats: GenStats {
                generated: 0,
                borrowed_ms: 0,
                clock_regressions: 0,
            },
        }
    }

    /// Issues the next (time, seq) given the clock reading `now` and the node's time `floor`
    /// (IDs issued from now on have time >= floor).
    pub fn next(&mut self, now: u64, floor: u64) -> Result<Issued, MsgidExhausted> {
        if now < self.last_wall {
            self.stats.clock_regressions = self.stats.clock_regressions.saturating_add(1);
        }
        self.last_wall = now;

        let mut time = now.max(floor);
        let mut seq = 0u16;
        let mut borrowed = false;
        if let Some((last_time, last_seq)) = self.last {
            if time <= last_time {
                time = last_time;
                if last_seq >= MAX_SEQ {
                    time = time.checked_add(1).ok_or(MsgidExhausted)?;
                    borrowed = true;
                } else {
                    seq = last_seq + 1;
                }
            }
        }
        if time > MAX_TIME {
            return Err(MsgidExhausted);
        }
        if borrowed {
            self.stats.borrowed_ms = self.stats.borrowed_ms.saturating_add(1);
        }
        self.stats.generated = self.stats.generated.saturating_add(1);
        self.last = Some((time, seq));
        Ok(Issued { time, seq })
    }

    pub fn stats(&self) -> GenStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::msgid::Fields;
    use std::cell::Cell;

    /// A clock the test moves by hand.
    struct FakeClock(Cell<u64>);
    impl FakeClock {
        fn now_ms(&self) -> u64 {
            self.0.get()
        }
    }

    fn key(i: &Issued) -> (u64, u16) {
        (i.time, i.seq)
    }

    #[test]
    fn clock_standing_still_counts_seq_then_borrows() {
        let clock = FakeClock(Cell::new(1_700_000_000_000));
        let mut g = Generator::new();
        let mut prev = None;
        for i in 0..10_000u64 {
            let got = g.next(clock.now_ms(), 0).unwrap();
            if let Some(p) = prev {
                assert!(key(&got) > p, "not increasing at {i}");
            }
            prev = Some(key(&got));
        }
        // 10,000 IDs in one frozen millisecond: 4096 per ms, so two borrowed milliseconds.
        assert_eq!(
            prev,
            Some((1_700_000_000_002, (10_000 - 2 * 4096 - 1) as u16))
        );
        let s = g.stats();
        assert_eq!(s.generated, 10_000);
        assert_eq!(s.borrowed_ms, 2);
        assert_eq!(s.clock_regressions, 0);
    }

    #[test]
    fn ten_thousand_in_one_ms_are_distinct_ids() {
        let mut g = Generator::new();
        let mut ids: Vec<_> = (0..10_000)
            .map(|_| {
                let i = g.next(5, 0).unwrap();
                Fields::new(i.time, u64::from(i.seq), 3, 77)
                    .unwrap()
                    .to_id()
            })
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        ids.dedup();
        assert_eq!(ids.len(), 10_000);
    }

    #[test]
    fn clock_running_backwards_by_seconds() {
        let clock = FakeClock(Cell::new(1_000_000));
        let mut g = Generator::new();
        let a = g.next(clock.now_ms(), 0).unwrap();
        clock.0.set(1_000_000 - 5_000); // five seconds back
        let b = g.next(clock.now_ms(), 0).unwrap();
        let c = g.next(clock.now_ms(), 0).unwrap();
        assert!(key(&b) > key(&a) && key(&c) > key(&b));
        assert_eq!(
            b.time, a.time,
            "held at the last time while the clock is behind"
        );
        assert_eq!(
            g.stats().clock_regressions,
            1,
            "one regression event, not one per call"
        );
        clock.0.set(1_000_010); // clock catches up and passes
        let d = g.next(clock.now_ms(), 0).unwrap();
        assert_eq!((d.time, d.seq), (1_000_010, 0));
        // A long backwards run never issues a duplicate even across a borrow.
        clock.0.set(10);
        let mut prev = key(&d);
        for _ in 0..9000 {
            let x = g.next(clock.now_ms(), 0).unwrap();
            assert!(key(&x) > prev);
            prev = key(&x);
        }
        assert_eq!(g.stats().clock_regressions, 2);
        assert_eq!(g.stats().borrowed_ms, 2);
    }

    #[test]
    fn floor_lifts_time_and_never_lowers_order() {
        let mut g = Generator::new();
        let a = g.next(1_000, 0).unwrap();
        // A floor a minute ahead (a lease loaded from an old process) lifts the time.
        let b = g.next(1_000, 61_000).unwrap();
        assert_eq!((b.time, b.seq), (61_000, 0));
        // A lower floor later changes nothing: still after b.
        let c = g.next(2_000, 5).unwrap();
        assert!(key(&c) > key(&b) && key(&b) > key(&a));
    }

    #[test]
    fn time_exhaustion_is_an_error_not_a_wrap() {
        let mut g = Generator::new();
        assert!(g.next(MAX_TIME, 0).is_ok());
        for _ in 0..MAX_SEQ {
            assert!(g.next(MAX_TIME, 0).is_ok());
        }
        assert_eq!(g.next(MAX_TIME, 0), Err(MsgidExhausted));
        assert_eq!(g.next(u64::MAX, 0), Err(MsgidExhausted));
    }
}
