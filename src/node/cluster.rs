//! Slot adoption in cluster mode: what keeps message IDs (and UIDs) unique when a hash slot moves
//! to another primary (`redis-cli --cluster reshard`, CLUSTER SETSLOT + MIGRATE, a failover).
//!
//! Cluster-wide uniqueness rests on "equal slot, same primary, whose generator never repeats".
//! When a slot changes owner, the new owner's generator knows nothing of the old owner's IDs. So
//! every primary sends its time lease (`ids::high_water`, above every ID it issued) to every node
//! over the cluster bus, when the lease is renewed and once a second; each node keeps the largest
//! lease it heard. The first ID a node issues for a slot whose ownership may have changed since
//! its last ID for it ("adopting" the slot) first raises the node's time floor to that largest
//! lease, so it lies above every ID the old owner issued.
//!
//! Why only at adoption and not always: a node issuing at a peer's lease must renew its own lease
//! above it, which the peer would then take as its floor, and so on: a ratchet pushing every
//! node's IDs five seconds further into the future per exchange. Adoption is rare (a slot moves,
//! a node starts or is promoted), so each one moves time forward at most once.
//!
//! What marks a slot for adoption: nothing at all at startup (every slot starts unadopted), a
//! `CLUSTER SETSLOT <slot> ...` run on this node (IMPORTING, MIGRATING, NODE, STABLE: every step
//! of a reshard or a manual migration reaches both the old and the new owner), any other slot
//! assignment command (ADDSLOTS, DELSLOTS, FLUSHSLOTS, RESET, FAILOVER, ...: all slots), and a
//! replication role change (all slots).

use super::Counter;
use crate::core::msgid::MAX_TIME;
use crate::glue::Ctx;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The largest time lease heard from another node over the cluster bus.
static PEER_LEASE: AtomicU64 = AtomicU64::new(0);
/// Whether any peer has been heard since this process started. Until then an adoption raises
/// nothing and is not recorded, so it is tried again on the next ID.
static HEARD: AtomicBool = AtomicBool::new(false);
/// One bit per hash slot: adopted since its ownership last may have changed.
static ADOPTED: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];
/// Adoptions that raised the floor, for `INFO imid`.
pub(crate) static ADOPTIONS: Counter = Counter::new();

/// The length of a cluster node ID (`REDISMODULE_NODE_ID_LEN`).
pub(crate) const NODE_ID_LEN: usize = 40;

/// The two time leases a primary sends: message IDs' and UIDs' (Unix ms each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Leases {
    pub(crate) msgid: u64,
    pub(crate) uid: u64,
}

/// Leases received from the peer `sender` (its node ID; `None` if Redis gave none). Anything
/// past the 42-bit time field is refused: a correct peer never sends it, and taking it would
/// end message IDs for good.
pub(crate) fn heard(_sender: Option<&[u8]>, l: Leases) -> bool {
    if l.msgid > MAX_TIME {
        return false;
    }
    PEER_LEASE.fetch_max(l.msgid, Ordering::Relaxed);
    HEARD.store(true, Ordering::Relaxed);
    true
}

/// A lease message as sent over the bus: 16 bytes, the message-ID lease then the UID lease,
/// each big-endian ms.
pub(crate) fn encode(l: Leases) -> [u8; 16] {
    let mut payload = [0u8; 16];
    let (a, b) = payload.split_at_mut(8);
    a.copy_from_slice(&l.msgid.to_be_bytes());
    b.copy_from_slice(&l.uid.to_be_bytes());
    payload
}

/// The leases of a bus message: 16 bytes as [`encode`] makes them, or 8 bytes from an older
/// imid, one lease for both families. Any other length is not a lease message.
pub(crate) fn decode(bytes: &[u8]) -> Option<Leases> {
    let word = |i: usize| {
        bytes
            .get(i..i + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    };
    match (bytes.len(), word(0), word(8)) {
        (16, Some(msgid), Some(uid)) => Some(Leases { msgid, uid }),
        (8, Some(ms), None) => Some(Leases { msgid: ms, uid: ms }),
        _ => None,
    }
}

/// A lease message from the peer `sender` arrived over the cluster bus.
pub(crate) fn received(sender: Option<&[u8]>, bytes: &[u8]) {
    if let Some(l) = decode(bytes) {
        heard(sender, l);
    }
}

/// The once-a-second timer: a primary sends its lease to the other nodes. Replicas have their
/// primary's lease by replication; only primaries issue IDs.
pub(crate) fn tick(ctx: &Ctx) {
    if ctx.is_primary() {
        let hwm = super::ids::high_water();
        if hwm > 0 {
            ctx.send_lease(hwm, hwm);
        }
    }
}

/// A `CLUSTER <sub> [<slot> ...]` command run on this node (seen by the command filter):
/// every slot assignment command marks what it may move for adoption again.
pub(crate) fn cluster_command(sub: &[u8], slot: Option<&[u8]>) {
    let sub = sub.to_ascii_uppercase();
    match sub.as_slice() {
        b"SETSLOT" => {
            match slot
                .and_then(|s| std::str::from_utf8(s).ok())
                .and_then(|s| s.parse::<u16>().ok())
            {
                Some(slot) => forget(slot),
                None => forget_all(),
            }
        }
        b"ADDSLOTS" | b"ADDSLOTSRANGE" | b"DELSLOTS" | b"DELSLOTSRANGE" | b"FLUSHSLOTS"
        | b"RESET" | b"FAILOVER" | b"FORGET" | b"REPLICATE" => forget_all(),
        _ => {}
    }
}

pub(crate) fn peer_lease() -> u64 {
    PEER_LEASE.load(Ordering::Relaxed)
}

fn bit(slot: u16) -> (Option<&'static AtomicU64>, u64) {
    (ADOPTED.get(usize::from(slot >> 6)), 1u64 << (slot & 63))
}

/// `slot`'s ownership may have changed: its next ID adopts it again.
pub(crate) fn forget(slot: u16) {
    if let (Some(w), b) = bit(slot) {
        w.fetch_and(!b, Ordering::Relaxed);
    }
}

/// `slot` is being imported from the node `source` (`CLUSTER SETSLOT slot IMPORTING source`, or
/// an atomic slot migration's import), or from an unknown node (`None`).
#[allow(dead_code)] // a hook for the slot adoption and atomic migration work (issue 18)
pub(crate) fn import_started(slot: u16, _source: Option<&[u8]>) {
    forget(slot);
}

/// This node owns `slot` now, at the end of an import (SETSLOT NODE, or an atomic migration
/// that completed).
#[allow(dead_code)] // a hook for the slot adoption and atomic migration work (issue 18)
pub(crate) fn import_finished(slot: u16) {
    forget(slot);
}

/// An import of `slot` ended without this node taking it over.
#[allow(dead_code)] // a hook for the slot adoption and atomic migration work (issue 18)
pub(crate) fn import_cancelled(_slot: u16) {}

/// This node was promoted (or its role changed): it takes over its former primary's slots.
pub(crate) fn promoted(_former_primary: Option<&[u8]>) {
    forget_all();
}

/// Every slot's ownership may have changed.
pub(crate) fn forget_all() {
    for w in &ADOPTED {
        w.store(0, Ordering::Relaxed);
    }
}

/// Before issuing an ID for `slot`: when the slot is not adopted yet, the floor to raise the
/// node's time to (the largest lease heard). `None` when it is adopted (the common case: one
/// load and a bit test).
pub(crate) fn adopt(slot: u16) -> Option<Leases> {
    let (w, b) = bit(slot);
    let w = w?;
    if w.load(Ordering::Relaxed) & b != 0 {
        return None;
    }
    if HEARD.load(Ordering::Relaxed) {
        w.fetch_or(b, Ordering::Relaxed);
        ADOPTIONS.add(1);
    }
    let l = peer_lease();
    Some(Leases { msgid: l, uid: l })
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test only: the statics are process-wide.
    #[test]
    fn adoption_raises_once_per_change_and_only_after_hearing_a_peer() {
        forget_all();
        assert_eq!(adopt(7), Some(Leases::default()), "nothing heard yet");
        assert_eq!(
            adopt(7),
            Some(Leases::default()),
            "and not recorded: tried again"
        );
        let at = |ms| Leases { msgid: ms, uid: ms };
        assert!(heard(None, at(5_000)));
        assert!(
            heard(None, at(4_000)),
            "an older lease is taken, never lowering the max"
        );
        assert!(
            !heard(None, at(MAX_TIME + 1)),
            "past the time field: refused"
        );
        assert_eq!(peer_lease(), 5_000);
        assert_eq!(adopt(7), Some(at(5_000)));
        assert_eq!(adopt(7), None, "adopted");
        assert_eq!(adopt(16_383), Some(at(5_000)), "its own bit");
        assert_eq!(adopt(16_384), None, "no such slot: nothing to do");
        forget(7);
        assert_eq!(adopt(7), Some(at(5_000)));
        assert_eq!(adopt(16_383), None);
        forget_all();
        assert_eq!(adopt(16_383), Some(at(5_000)));
        assert_eq!(ADOPTIONS.get(), 4);
    }

    #[test]
    fn lease_messages_round_trip_and_old_ones_are_read() {
        let l = Leases {
            msgid: 1_700_000_000_123,
            uid: 1_700_000_000_456,
        };
        assert_eq!(decode(&encode(l)), Some(l));
        let old = 1_700_000_000_789u64.to_be_bytes();
        assert_eq!(
            decode(&old),
            Some(Leases {
                msgid: 1_700_000_000_789,
                uid: 1_700_000_000_789
            })
        );
        assert_eq!(decode(&[0; 12]), None);
        assert_eq!(decode(&[0; 17]), None);
        assert_eq!(decode(&[]), None);
    }
}
