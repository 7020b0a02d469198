//! A time lease, Redis-free: the high-water mark that keeps one ID family above what an earlier
//! process issued. The node keeps two (`node::ids`): message IDs' and UIDs'.
//!
//! - `floor`: IDs issued from now on have a time at or above it. Raised (never lowered) to the
//!   mark an earlier process persisted: RDB aux data, `MSGID.FLOOR` / `UID.FLOOR` lines in the
//!   AOF or from a primary.
//! - `until`: every ID this process issued has a time below it. Renewed, `LEASE_MS` ahead of the
//!   issued time, once an issued time comes within half a lease of it; each renewal is persisted
//!   and replicated by the node (`node::ids`).
//! - `cap`: neither ever goes past it. It is the largest mark the family's loaders accept (the
//!   RDB aux data, the FLOOR command), so a node never writes a mark it would refuse at restart.
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

/// A floor past the lease's cap: refused, nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PastCap {
    pub ms: u64,
    pub cap: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    floor: u64,
    until: u64,
    renewals: u64,
    cap: u64,
}

impl Lease {
    /// A lease whose marks never pass `cap`. Every ID the family issues must have a time below
    /// `cap` (for message IDs: the 42-bit field's end, 2^42).
    pub const fn new(cap: u64) -> Lease {
        Lease {
            floor: 0,
            until: 0,
            renewals: 0,
            cap,
        }
    }

    /// IDs issued from now on have a time at or above this.
    pub const fn floor(&self) -> u64 {
        self.floor
    }

    pub const fn cap(&self) -> u64 {
        self.cap
    }

    /// Raises the floor to a mark loaded from disk or received from a primary or a peer. Never
    /// lowers it; a mark past the cap is refused and changes nothing.
    pub fn raise_floor(&mut self, ms: u64) -> Result<(), PastCap> {
        if ms > self.cap {
            return Err(PastCap { ms, cap: self.cap });
        }
        self.floor = self.floor.max(ms);
        Ok(())
    }

    /// Records that an ID with time `time` (ms, below the cap) was issued. Returns the renewed
    /// lease to persist and replicate when the lease had to move, else `None` (the common
    /// case). The lease reaches `LEASE_MS` past `time`, or the cap when that is nearer; once it
    /// sits at the cap it never moves again.
    pub fn cover(&mut self, time: u64) -> Option<u64> {
        if time.saturating_add(LEASE_MS / 2) < self.until {
            return None;
        }
        let until = time.saturating_add(LEASE_MS).min(self.cap);
        if until <= self.until {
            return None;
        }
        self.until = until;
        self.renewals = self.renewals.saturating_add(1);
        Some(until)
    }

    /// Moves the lease to `ms` (never back, never past the cap) without a renewal of its own:
    /// for a mark already persisted and replicated by another lease whose replay raises this
    /// lease's floor (a message-ID renewal, replayed as MSGID.FLOOR, covers UIDs too). Unlike
    /// raising the floor, it does not move the IDs issued from now on.
    pub fn extend(&mut self, ms: u64) {
        self.until = self.until.max(ms.min(self.cap));
    }

    /// The high-water mark to persist: every ID issued, or still to be issued, by an earlier
    /// process has a time below it. At most the cap.
    pub const fn high_water(&self) -> u64 {
        if self.floor > self.until {
            self.floor
        } else {
            self.until
        }
    }

    /// The end of the lease this process renewed (0 before its first renewal): every ID it
    /// issued has a time below it.
    pub const fn until(&self) -> u64 {
        self.until
    }

    pub const fn renewals(&self) -> u64 {
        self.renewals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::generator::Generator;
    use crate::core::msgid::MAX_TIME;

    const MSGID_CAP: u64 = MAX_TIME + 1;
    const UID_CAP: u64 = i64::MAX as u64;

    #[test]
    fn lease_stays_ahead_and_renews_rarely() {
        let mut g = Generator::new();
        let mut l = Lease::new(MSGID_CAP);
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
        let (mut old, mut old_lease) = (Generator::new(), Lease::new(MSGID_CAP));
        let mut last = (0, 0);
        for now in 65_000..65_100 {
            let i = old.next(now, old_lease.floor()).unwrap();
            old_lease.cover(i.time);
            last = (i.time, i.seq);
        }
        let hwm = old_lease.high_water();
        // the new process's clock is a minute behind
        let (mut new, mut lease) = (Generator::new(), Lease::new(MSGID_CAP));
        lease.raise_floor(hwm).unwrap();
        lease.raise_floor(10).unwrap(); // a lower floor never lowers it
        assert_eq!(lease.floor(), hwm);
        let n = new.next(65_000 - 60_000, lease.floor()).unwrap();
        assert!((n.time, n.seq) > last);
        assert!(n.time >= hwm);
    }

    #[test]
    fn high_water_is_the_larger_of_floor_and_lease() {
        let mut l = Lease::new(UID_CAP);
        assert_eq!(l.high_water(), 0);
        l.cover(100);
        assert_eq!(l.high_water(), 100 + LEASE_MS);
        l.raise_floor(1_000_000).unwrap();
        assert_eq!(l.high_water(), 1_000_000);
    }

    #[test]
    fn extending_covers_without_a_renewal_or_moving_the_floor() {
        let mut l = Lease::new(UID_CAP);
        l.extend(10_000);
        assert_eq!((l.floor(), l.high_water(), l.renewals()), (0, 10_000, 0));
        l.extend(4_000); // never back
        assert_eq!(l.high_water(), 10_000);
        // IDs within half a lease of it need no renewal of their own
        assert_eq!(l.cover(7_000), None);
        assert_eq!(l.cover(7_500), Some(12_500));
        let mut m = Lease::new(MSGID_CAP);
        m.extend(u64::MAX);
        assert_eq!(m.high_water(), MSGID_CAP, "capped");
    }

    /// The message-ID lease never passes 2^42 (every ID is below it), however near the end of
    /// the 42-bit field the IDs are, and a floor past it is refused: the node never holds a
    /// mark its RDB loader or MSGID.FLOOR (both `<= 2^42`) would refuse.
    #[test]
    fn message_id_lease_is_capped_at_the_end_of_the_time_field() {
        let mut l = Lease::new(MSGID_CAP);
        assert_eq!(l.cap(), 1 << 42);
        l.raise_floor(MAX_TIME).unwrap();
        let mut g = Generator::new();
        let i = g.next(0, l.floor()).unwrap();
        assert_eq!(i.time, MAX_TIME);
        assert_eq!(
            l.cover(i.time),
            Some(MSGID_CAP),
            "capped, still above the ID"
        );
        assert_eq!(l.high_water(), MSGID_CAP);
        // at the cap the lease never moves again: no renewal, nothing to replicate
        assert_eq!(l.cover(MAX_TIME), None);
        assert_eq!(l.renewals(), 1);
        // a restart at that mark loads it, and issues nothing more
        let mut next = Lease::new(MSGID_CAP);
        next.raise_floor(l.high_water()).unwrap();
        assert!(Generator::new().next(0, next.floor()).is_err());
        // past the cap: refused, unchanged
        for bad in [MSGID_CAP + 1, u64::MAX] {
            assert_eq!(
                next.raise_floor(bad),
                Err(PastCap {
                    ms: bad,
                    cap: MSGID_CAP
                })
            );
        }
        assert_eq!(next.floor(), MSGID_CAP);
    }

    /// The UID lease is capped at 2^63-1 ms (what `UID.FLOOR` and the RDB loader take).
    #[test]
    fn uid_lease_is_capped_at_the_largest_signed_64_bit_time() {
        let mut l = Lease::new(UID_CAP);
        let last = UID_CAP - 1000; // the last unit of a seconds layout reaching the end
        assert_eq!(l.cover(last), Some(UID_CAP));
        assert_eq!(l.cover(UID_CAP - 1), None);
        assert_eq!(l.high_water(), UID_CAP);
        assert_eq!(
            l.raise_floor(UID_CAP + 1),
            Err(PastCap {
                ms: UID_CAP + 1,
                cap: UID_CAP
            })
        );
        assert_eq!(l.cover(u64::MAX), None, "saturates at the cap, never wraps");
        assert_eq!(l.high_water(), UID_CAP);
    }
}
