//! The node's time lease, Redis-free: the one high-water mark that keeps every ID family (MSGID,
//! UID) above what an earlier process issued.
//!
//! - `floor`: IDs issued from now on have a time at or above it. Raised (never lowered) to the
//!   mark an earlier process persisted: RDB aux data, `MSGID.FLOOR` lines in the AOF or from a
//!   primary.
//! - `until`: every ID this process issued has a time below it. Renewed, `LEASE_MS` ahead of the
//!   issued time, once an issued time comes within half a lease of it; each renewal is persisted
//!   and replicated by the glue (`node::ids`).
//!
//! The mark to persist is `max(floor, until)`: after a restart or a promotion the new process
//! raises its floor to it, so it starts above every ID the old one could have issued, even when
//! its own clock is behind.

/// How far ahead of an issued ID's time a renewed lease reaches.
///
/// Renewal happens once the issued time comes within half a lease of its end, so under steady
/// load there is one renewal (one replicated/persisted write) every `LEASE_MS / 2` ms. With
/// `appendfsync everysec` a crash loses at most about two seconds of writes; a lease of five
/// seconds renewed at half-time keeps the last persisted lease ahead of every ID issued up to
/// the crash, as long as that loss stays under 2.5 s.
pub const LEASE_MS: u64 = 5000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lease {
    floor: u64,
    until: u64,
    renewals: u64,
}

impl Lease {
    pub const fn new() -> Lease {
        Lease {
            floor: 0,
            until: 0,
            renewals: 0,
        }
    }

    /// IDs issued from now on have a time at or above this.
    pub const fn floor(&self) -> u64 {
        self.floor
    }

    /// Raises the floor to a mark loaded from disk or received from a primary. Never lowers it.
    pub fn raise_floor(&mut self, ms: u64) {
        self.floor = self.floor.max(ms);
    }

    /// Records that an ID with time `time` (ms) was issued. Returns the renewed lease to persist
    /// and replicate when the lease had to move, else `None` (the common case).
    pub fn cover(&mut self, time: u64) -> Option<u64> {
        if time.saturating_add(LEASE_MS / 2) < self.until {
            return None;
        }
        self.until = time.saturating_add(LEASE_MS);
        self.renewals = self.renewals.saturating_add(1);
        Some(self.until)
    }

    /// The high-water mark to persist: every ID issued, or still to be issued, by an earlier
    /// process has a time below it.
    pub const fn high_water(&self) -> u64 {
        if self.floor > self.until {
            self.floor
        } else {
            self.until
        }
    }

    pub const fn renewals(&self) -> u64 {
        self.renewals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::generator::Generator;

    #[test]
    fn lease_stays_ahead_and_renews_rarely() {
        let mut g = Generator::new();
        let mut l = Lease::new();
        let first = g.next(1000, l.floor()).unwrap();
        assert_eq!(l.cover(first.time), Some(1000 + LEASE_MS));
        let mut renewals = 1;
        for now in 1001..1000 + 10 * LEASE_MS {
            let i = g.next(now, l.floor()).unwrap();
            if l.cover(i.time).is_some() {
                renewals += 1;
            }
            assert!(i.time < l.high_water());
        }
        // one renewal per half lease
        assert_eq!(renewals, 20);
        assert_eq!(l.renewals(), 20);
    }

    #[test]
    fn floor_from_old_process_is_respected() {
        let (mut old, mut old_lease) = (Generator::new(), Lease::new());
        let mut last = (0, 0);
        for now in 65_000..65_100 {
            let i = old.next(now, old_lease.floor()).unwrap();
            old_lease.cover(i.time);
            last = (i.time, i.seq);
        }
        let hwm = old_lease.high_water();
        // the new process's clock is a minute behind
        let (mut new, mut lease) = (Generator::new(), Lease::new());
        lease.raise_floor(hwm);
        lease.raise_floor(10); // a lower floor never lowers it
        assert_eq!(lease.floor(), hwm);
        let n = new.next(65_000 - 60_000, lease.floor()).unwrap();
        assert!((n.time, n.seq) > last);
        assert!(n.time >= hwm);
    }

    #[test]
    fn high_water_is_the_larger_of_floor_and_lease() {
        let mut l = Lease::new();
        assert_eq!(l.high_water(), 0);
        l.cover(100);
        assert_eq!(l.high_water(), 100 + LEASE_MS);
        l.raise_floor(1_000_000);
        assert_eq!(l.high_water(), 1_000_000);
        assert_eq!(l.cover(u64::MAX), Some(u64::MAX), "saturates, never wraps");
    }
}
