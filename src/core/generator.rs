//! The message-ID generator state machine, Redis-free, driven by an injectable clock.
//!
//! Rules (SPEC, MSGID.GEN):
//! - every ID is strictly greater than every ID issued before it by this generator;
//! - time is `max(now, last, floor)`: a clock that runs backwards never makes IDs go back;
//! - within one millisecond `seq` counts up; after 4096 IDs in one millisecond the generator
//!   borrows the next millisecond instead of waiting (nothing ever sleeps or spins);
//! - a time lease (high-water mark) stays ahead of every ID issued: every issued time is
//!   `< lease_until`. The glue persists and replicates the lease when it is renewed, and a
//!   restarted or promoted node raises its `floor` to it, so it starts above every ID the old
//!   process could have issued, even when its own clock is behind.

use super::msgid::{MAX_SEQ, MAX_TIME};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of Unix time in milliseconds.
pub trait Clock {
    fn now_ms(&self) -> u64;
}

/// The system wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // Before 1970 reads as 0; the generator then runs on `max(now, last)`.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// How far ahead of an issued ID's time a renewed lease reaches.
///
/// Renewal happens once the issued time comes within half a lease of its end, so under steady
/// load there is one renewal (one replicated/persisted write) every `LEASE_MS / 2` ms. With
/// `appendfsync everysec` a crash loses at most about two seconds of writes; a lease of five
/// seconds renewed at half-time keeps the last persisted lease ahead of every ID issued up to
/// the crash, as long as that loss stays under 2.5 s.
pub const LEASE_MS: u64 = 5000;

/// Counters reported by `INFO imid`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenStats {
    pub generated: u64,
    pub borrowed_ms: u64,
    pub clock_regressions: u64,
    pub lease_renewals: u64,
}

/// One issued ID's time and seq, plus a renewed lease to persist/replicate, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issued {
    pub time: u64,
    pub seq: u16,
    pub renewed_lease: Option<u64>,
}

/// The 42-bit time field is used up (year 2109, or a floor/lease pushed there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exhausted;

#[derive(Debug)]
pub struct Generator {
    /// Time and seq of the last issued ID, if any.
    last: Option<(u64, u16)>,
    /// The previous clock reading, to count regressions.
    last_wall: u64,
    /// IDs issued from now on have time >= floor.
    floor: u64,
    /// Every ID issued so far has time < lease_until.
    lease_until: u64,
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
            floor: 0,
            lease_until: 0,
            stats: GenStats {
                generated: 0,
                borrowed_ms: 0,
                clock_regressions: 0,
                lease_renewals: 0,
            },
        }
    }

    /// Issues the next (time, seq) given the clock reading `now`.
    pub fn next(&mut self, now: u64) -> Result<Issued, Exhausted> {
        if now < self.last_wall {
            self.stats.clock_regressions = self.stats.clock_regressions.saturating_add(1);
        }
        self.last_wall = now;

        let mut time = now.max(self.floor);
        let mut seq = 0u16;
        let mut borrowed = false;
        if let Some((last_time, last_seq)) = self.last {
            if time <= last_time {
                time = last_time;
                if last_seq >= MAX_SEQ {
                    time = time.checked_add(1).ok_or(Exhausted)?;
                    borrowed = true;
                } else {
                    seq = last_seq + 1;
                }
            }
        }
        if time > MAX_TIME {
            return Err(Exhausted);
        }

        let renewed_lease = self.cover(time);

        if borrowed {
            self.stats.borrowed_ms = self.stats.borrowed_ms.saturating_add(1);
        }
        self.stats.generated = self.stats.generated.saturating_add(1);
        self.last = Some((time, seq));
        Ok(Issued {
            time,
            seq,
            renewed_lease,
        })
    }

    /// Keeps the lease ahead of a time issued by another generator sharing it (UID.GEN):
    /// renews it exactly as `next` does for its own IDs, and returns the renewed lease to
    /// persist and replicate, if any. Afterwards `time < high_water()`.
    pub fn cover(&mut self, time: u64) -> Option<u64> {
        if time.saturating_add(LEASE_MS / 2) >= self.lease_until {
            self.lease_until = time.saturating_add(LEASE_MS);
            self.stats.lease_renewals = self.stats.lease_renewals.saturating_add(1);
            Some(self.lease_until)
        } else {
            None
        }
    }

    /// The time floor: every time issued from now on, by this generator or one sharing its
    /// lease, is at or above it.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// Raises the floor to a high-water mark loaded from disk or received from a primary.
    /// Never lowers it.
    pub fn raise_floor(&mut self, floor: u64) {
        self.floor = self.floor.max(floor);
    }

    /// The high-water mark to persist: every ID issued or still to be issued by an earlier
    /// process has time below it.
    pub fn high_water(&self) -> u64 {
        self.floor.max(self.lease_until)
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
    impl Clock for FakeClock {
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
            let got = g.next(clock.now_ms()).unwrap();
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
                let i = g.next(5).unwrap();
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
        let a = g.next(clock.now_ms()).unwrap();
        clock.0.set(1_000_000 - 5_000); // five seconds back
        let b = g.next(clock.now_ms()).unwrap();
        let c = g.next(clock.now_ms()).unwrap();
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
        let d = g.next(clock.now_ms()).unwrap();
        assert_eq!((d.time, d.seq), (1_000_010, 0));
        // A long backwards run never issues a duplicate even across a borrow.
        clock.0.set(10);
        let mut prev = key(&d);
        for _ in 0..9000 {
            let x = g.next(clock.now_ms()).unwrap();
            assert!(key(&x) > prev);
            prev = key(&x);
        }
        assert_eq!(g.stats().clock_regressions, 2);
        assert_eq!(g.stats().borrowed_ms, 2);
    }

    #[test]
    fn lease_stays_ahead_and_renews_rarely() {
        let mut g = Generator::new();
        let first = g.next(1000).unwrap();
        assert_eq!(first.renewed_lease, Some(1000 + LEASE_MS));
        let mut renewals = 1;
        for now in 1001..1000 + 10 * LEASE_MS {
            let i = g.next(now).unwrap();
            assert!(i.time < g.high_water());
            if i.renewed_lease.is_some() {
                renewals += 1;
            }
        }
        // one renewal per half lease
        assert_eq!(renewals, 20);
        assert_eq!(g.stats().lease_renewals, 20);
    }

    #[test]
    fn floor_from_old_process_is_respected() {
        let mut old = Generator::new();
        let mut last = (0, 0);
        for now in 65_000..65_100 {
            last = key(&old.next(now).unwrap());
        }
        let hwm = old.high_water();
        // the new process's clock is a minute behind
        let mut new = Generator::new();
        new.raise_floor(hwm);
        new.raise_floor(10); // a lower floor never lowers it
        let n = new.next(65_000 - 60_000).unwrap();
        assert!((n.time, n.seq) > last);
        assert!(n.time >= hwm);
    }

    #[test]
    fn cover_shares_the_lease_with_another_generator() {
        let mut g = Generator::new();
        g.next(1000).unwrap();
        // A time issued elsewhere within the lease's first half renews nothing ...
        assert_eq!(g.cover(1000 + LEASE_MS / 2 - 1), None);
        // ... one nearer its end renews it, the same way `next` does.
        assert_eq!(
            g.cover(1000 + LEASE_MS / 2),
            Some(1000 + LEASE_MS / 2 + LEASE_MS)
        );
        assert!(1000 + LEASE_MS / 2 < g.high_water());
        // A time far ahead (a borrowed second) pushes the lease past it.
        assert_eq!(g.cover(90_000), Some(90_000 + LEASE_MS));
        assert!(90_000 < g.high_water());
        // An earlier time never lowers it.
        assert_eq!(g.cover(10), None);
        assert_eq!(g.high_water(), 90_000 + LEASE_MS);
        assert_eq!(g.stats().lease_renewals, 3);
        assert_eq!(g.floor(), 0);
        g.raise_floor(7);
        assert_eq!(g.floor(), 7);
    }

    #[test]
    fn time_exhaustion_is_an_error_not_a_wrap() {
        let mut g = Generator::new();
        assert!(g.next(MAX_TIME).is_ok());
        for _ in 0..MAX_SEQ {
            assert!(g.next(MAX_TIME).is_ok());
        }
        assert_eq!(g.next(MAX_TIME), Err(Exhausted));
        assert_eq!(g.next(u64::MAX), Err(Exhausted));
    }
}
