//! Slot adoption in cluster mode, the book: the promises heard from peers, the slots being imported
//! and from whom, and this node's own promise (`node::cluster` acts on what the cluster tells this
//! node, `node::ids` raises the floors). Why: what keeps message IDs and UIDs unique when a hash
//! slot moves to another primary (`redis-cli --cluster reshard`, CLUSTER SETSLOT + MIGRATE, an
//! atomic slot migration, a failover), without pushing ID time ahead of the clock.
//!
//! Cluster-wide uniqueness rests on "equal slot, same primary, whose generator never repeats".
//! When a slot changes owner, the new owner's generator knows nothing of the old owner's IDs. So
//! every primary sends a *promise* to every node over the cluster bus: a time (per ID family)
//! above every ID it has issued, which it will not reach without sending a new promise first
//! ([`issued`], [`PROMISE_MS`]). Each node keeps the promises of its peers ([`heard`]).
//!
//! The rule: only a slot that really changes owner is adopted, and only from its old owner (each
//! event and what it adopts from: [`adopt`], [`import_finished`], [`promoted`], [`slots_added`];
//! the bound this keeps: [`PROMISE_MS`]).

use super::Counter;
use crate::core::msgid::MAX_TIME;
pub(crate) use crate::host::cluster::{NodeId, NODE_ID_LEN};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The cluster bus message type carrying a node's promises ([`encode`]).
pub(crate) const LEASE_MESSAGE: u8 = 0x49;

/// How far past the last issued ID's time the promise sent to the other nodes reaches. It is
/// sent again when an issued time comes within half of it: under load one 16-byte bus message
/// per primary every half second, and the bus has half a second to carry it before the promise
/// could be outrun. (The lease timer sends it once a second too, with the node's floor:
/// [`advertised`].)
///
/// The bound: an adopting node's IDs lead its clock by at most the old owner's promise, that is
/// the old owner's own lead plus `PROMISE_MS` plus the clock skew between the two.
pub(crate) const PROMISE_MS: u64 = 1_000;

/// A peer's promise further than this ahead of this node's clock is refused (and logged): no
/// correct node gets there (a client's MSGID.FLOOR may lead by 60 s, a restart by the 5 s lease,
/// UID borrowing by its bound), and taking it would move every later ID of this node as far.
pub(crate) const MAX_PEER_LEAD_MS: u64 = 300_000;

/// The first slot of the Redis 8.4+ atomic slot migration this node is the source of, plus
/// one (0: none): while it is set, each new promise of this node also travels inside the
/// migration (`node::ids`), replicated with a key of that slot.
static CARRYING: AtomicU32 = AtomicU32::new(0);

/// This node became the source of an atomic slot migration whose first slot is `slot` (Redis
/// runs one at a time): its promises go with it from now on.
pub(crate) fn carry_start(slot: u16) {
    CARRYING.store(u32::from(slot) + 1, Ordering::Relaxed);
}

/// The migration this node was the source of ended (completed or failed).
pub(crate) fn carry_end() {
    CARRYING.store(0, Ordering::Relaxed);
}

/// The slot whose key carries this node's promises into the migration it is the source of
/// (one load: the common case is none).
pub(crate) fn carried_slot() -> Option<u16> {
    CARRYING
        .load(Ordering::Relaxed)
        .checked_sub(1)
        .and_then(|n| u16::try_from(n).ok())
}

/// The two time promises (or leases) of a node: message IDs' and UIDs' (Unix ms each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Leases {
    pub(crate) msgid: u64,
    pub(crate) uid: u64,
}

impl Leases {
    pub(crate) fn max(self, o: Leases) -> Leases {
        Leases {
            msgid: self.msgid.max(o.msgid),
            uid: self.uid.max(o.uid),
        }
    }
}

struct State {
    /// The latest promise heard from each peer.
    peers: Vec<(NodeId, Leases)>,
    /// Slots being imported, with their source (`None`: unknown).
    importing: BTreeMap<u16, Option<NodeId>>,
    /// This node's primary, as last seen while it was a replica.
    primary: Option<NodeId>,
}

static STATE: Mutex<State> = Mutex::new(State {
    peers: Vec::new(),
    importing: BTreeMap::new(),
    primary: None,
});

fn state() -> MutexGuard<'static, State> {
    // Updated only after every check: a poisoned lock still holds a consistent state.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// One bit per hash slot: being imported (the fast path of [`adopt`]: one load and a bit test).
static IMPORTING: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];
/// This node's promise as last sent, per family.
static OWN_MSGID: AtomicU64 = AtomicU64::new(0);
static OWN_UID: AtomicU64 = AtomicU64::new(0);
/// The largest message-ID promise heard from any peer, for `INFO imid`.
static PEER_MAX: AtomicU64 = AtomicU64::new(0);
/// Adoptions (a slot imported, assigned, or taken over in a promotion), for `INFO imid`.
pub(crate) static ADOPTIONS: Counter = Counter::new();
/// Peer promises refused as implausible, for `INFO imid`.
pub(crate) static REFUSED: Counter = Counter::new();

fn id_of(b: &[u8]) -> Option<NodeId> {
    b.get(..NODE_ID_LEN).and_then(|b| NodeId::try_from(b).ok())
}

/// Promises received from the peer `sender` (its node ID), checked against this node's clock
/// `now`. A refusal says why (the caller logs it); nothing is recorded then. Each peer's
/// promises are kept by node ID, the largest heard per family.
pub(crate) fn heard(sender: Option<&[u8]>, l: Leases, now: u64) -> Result<(), String> {
    let Some(id) = sender.and_then(id_of) else {
        return Err("a lease message without a sender node ID".to_owned());
    };
    let limit = now.saturating_add(MAX_PEER_LEAD_MS);
    let refuse = |what: &str, ms: u64| {
        REFUSED.add(1);
        Err(format!(
            "refused a {what} time lease of {ms} ms from node {}: more than {} s ahead of this node's clock ({now} ms){}",
            String::from_utf8_lossy(&id),
            MAX_PEER_LEAD_MS / 1000,
            if ms > MAX_TIME + 1 && what == "message-ID" {
                " and past the 42-bit time field"
            } else {
                ""
            }
        ))
    };
    if l.msgid > limit || l.msgid > MAX_TIME + 1 {
        return refuse("message-ID", l.msgid);
    }
    if l.uid > limit {
        return refuse("UID", l.uid);
    }
    let mut s = state();
    match s.peers.iter_mut().find(|(p, _)| *p == id) {
        Some((_, known)) => *known = known.max(l),
        None => s.peers.push((id, l)),
    }
    PEER_MAX.fetch_max(l.msgid, Ordering::Relaxed);
    Ok(())
}

/// The `INFO imid` fields of slot adoption, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 4] {
    [
        ("cluster_peer_lease_ms", peer_lease()),
        ("cluster_slot_adoptions", ADOPTIONS.get()),
        ("cluster_leases_refused", REFUSED.get()),
        ("cluster_slots_importing", importing()),
    ]
}

/// How many slots this node is importing (following their source's promise), for `INFO imid`.
pub(crate) fn importing() -> u64 {
    IMPORTING
        .iter()
        .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
        .sum()
}

/// The largest message-ID promise heard from any peer.
pub(crate) fn peer_lease() -> u64 {
    PEER_MAX.load(Ordering::Relaxed)
}

/// `source`'s promise, or every peer's largest when the source is unknown or not heard yet.
/// Promises are never taken from nodes that are not the slot's old owner when it is known, so
/// nodes no longer ratchet each other's time forward (each adoption from the largest peer lease
/// added five seconds to every node's time, one adoption at a time, hours after a few thousand
/// calls).
fn promise_of(s: &State, source: Option<NodeId>) -> Leases {
    let known = source.and_then(|id| s.peers.iter().find(|(p, _)| *p == id).map(|(_, l)| *l));
    known.unwrap_or_else(|| {
        s.peers
            .iter()
            .fold(Leases::default(), |acc, (_, l)| acc.max(*l))
    })
}

fn bit(slot: u16) -> (Option<&'static AtomicU64>, u64) {
    (IMPORTING.get(usize::from(slot >> 6)), 1u64 << (slot & 63))
}

/// Before issuing an ID for `slot`: the floor to raise the node's time to, when the slot is
/// being imported (the source's latest promise); `None` otherwise (one load and a bit test).
/// While `CLUSTER SETSLOT <slot> IMPORTING <source>` (or an atomic migration's import) lasts,
/// every ID this node issues for the slot is raised so, since the source may still issue for
/// keys it holds until they move.
pub(crate) fn adopt(slot: u16) -> Option<Leases> {
    let (w, b) = bit(slot);
    if w?.load(Ordering::Relaxed) & b == 0 {
        return None;
    }
    let s = state();
    let source = s.importing.get(&slot).copied().flatten();
    Some(promise_of(&s, source))
}

/// `slot` is being imported from the node `source` (`CLUSTER SETSLOT slot IMPORTING source`, or
/// an atomic slot migration's import), or from an unknown node (`None`).
pub(crate) fn import_started(slot: u16, source: Option<&[u8]>) {
    let (Some(w), b) = bit(slot) else { return };
    let source = source.and_then(id_of);
    let mut s = state();
    s.importing.insert(slot, source);
    w.fetch_or(b, Ordering::Relaxed);
}

/// Stops following `slot`'s source; returns the source if the slot was being imported.
fn stop_importing(s: &mut State, slot: u16) -> Option<Option<NodeId>> {
    let (w, b) = bit(slot);
    if let Some(w) = w {
        w.fetch_and(!b, Ordering::Relaxed);
    }
    s.importing.remove(&slot)
}

/// This node owns `slot` now (SETSLOT NODE naming this node, or an atomic migration that
/// completed): the floors to raise the node's to, the old owner's promise (every peer's largest
/// when no import named it, as when a slot is assigned by hand). Counted as an adoption.
pub(crate) fn import_finished(slot: u16) -> Leases {
    let floors = {
        let mut s = state();
        let source = stop_importing(&mut s, slot).flatten();
        promise_of(&s, source)
    };
    ADOPTIONS.add(1);
    floors
}

/// An import of `slot` ended without this node taking it over (SETSLOT STABLE, SETSLOT NODE
/// naming another node, a cancelled migration).
pub(crate) fn import_cancelled(slot: u16) {
    stop_importing(&mut state(), slot);
}

/// Slots were assigned to this node by hand (ADDSLOTS, ADDSLOTSRANGE): their earlier owner, if
/// any, is unknown, so the floors to raise to are every peer's largest promise. Counted.
pub(crate) fn slots_added() -> Leases {
    let floors = promise_of(&state(), None);
    ADOPTIONS.add(1);
    floors
}

/// This node was promoted: it takes over its former primary's slots, so the floors to raise to
/// are that primary's promise (every peer's largest if it is unknown). Counted. Its replicated
/// floor already covers what reached it by replication.
pub(crate) fn promoted() -> Leases {
    let floors = {
        let s = state();
        let primary = s.primary;
        promise_of(&s, primary)
    };
    ADOPTIONS.add(1);
    floors
}

/// The imports in progress according to `CLUSTER NODES` (this node's line, entries
/// `[<slot>-<-<source>]`): after a restart in the middle of an import, nodes.conf keeps the slot
/// importing, but no SETSLOT announced it to this process. Only the following is restored:
/// nothing is adopted at startup, since a restarted node's own persisted mark keeps it above
/// its own IDs.
pub(crate) fn restore_imports(cluster_nodes: &[u8]) {
    let text = String::from_utf8_lossy(cluster_nodes);
    let Some(me) = text.lines().find(|l| {
        l.split_whitespace()
            .nth(2)
            .is_some_and(|flags| flags.split(',').any(|f| f == "myself"))
    }) else {
        return;
    };
    for entry in me.split_whitespace().skip(8) {
        let Some(inner) = entry.strip_prefix('[').and_then(|e| e.strip_suffix(']')) else {
            continue;
        };
        if let Some((slot, source)) = inner.split_once("-<-") {
            if let Ok(slot) = slot.parse::<u16>() {
                import_started(slot, Some(source.as_bytes()));
            }
        }
    }
}

/// This node became a replica: it imports nothing any more, nor is it the source of a
/// migration.
pub(crate) fn demoted() {
    carry_end();
    let mut s = state();
    s.importing.clear();
    for w in &IMPORTING {
        w.store(0, Ordering::Relaxed);
    }
}

/// While a replica, the timer records its primary (for [`promoted`]).
pub(crate) fn set_primary(id: &[u8]) {
    if let Some(id) = id_of(id) {
        state().primary = Some(id);
    }
}

/// After issuing an ID (cluster mode): `true` when this node's promise for the family had to
/// move (the issued time came within half a promise of it), so that [`advertised`] must be
/// sent to every node now. The common case is one load and a comparison.
pub(crate) fn issued(family: Family, time: u64) -> bool {
    let own = match family {
        Family::MsgId => &OWN_MSGID,
        Family::Uid => &OWN_UID,
    };
    if time.saturating_add(PROMISE_MS / 2) < own.load(Ordering::Relaxed) {
        return false;
    }
    // Capped where the peers' check refuses (message IDs: the end of the 42-bit field).
    let cap = match family {
        Family::MsgId => MAX_TIME + 1,
        Family::Uid => i64::MAX.unsigned_abs(),
    };
    let new = time.saturating_add(PROMISE_MS).min(cap);
    own.fetch_max(new, Ordering::Relaxed) < new
}

/// The ID families that share the promise mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    MsgId,
    Uid,
}

/// What this node promises its peers: its own promise, or its floors where they are higher
/// (a restarted node's persisted mark, a floor from a primary or a client), since every ID it
/// issues lies at or above them.
pub(crate) fn advertised(floors: Leases) -> Leases {
    Leases {
        msgid: OWN_MSGID.load(Ordering::Relaxed),
        uid: OWN_UID.load(Ordering::Relaxed),
    }
    .max(floors)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: u8) -> NodeId {
        [c; NODE_ID_LEN]
    }

    fn at(ms: u64) -> Leases {
        Leases { msgid: ms, uid: ms }
    }

    // One test only: the statics are process-wide.
    #[test]
    fn only_an_importing_slot_follows_and_only_its_source() {
        let now = 1_000_000;
        assert!(heard(Some(&id(b'a')), at(now + 5_000), now).is_ok());
        assert!(heard(Some(&id(b'b')), at(now + 2_000), now).is_ok());
        assert!(
            heard(Some(&id(b'b')), at(now + 1_000), now).is_ok(),
            "an older promise never lowers the known one"
        );
        assert_eq!(adopt(7), None, "not importing: nothing to adopt");
        import_started(7, Some(&id(b'b')));
        assert_eq!(
            adopt(7),
            Some(at(now + 2_000)),
            "b's promise, not a's larger one"
        );
        assert_eq!(adopt(8), None);
        assert!(heard(Some(&id(b'b')), at(now + 3_000), now).is_ok());
        assert_eq!(
            adopt(7),
            Some(at(now + 3_000)),
            "follows the source while importing"
        );
        import_cancelled(7);
        assert_eq!(adopt(7), None);
        import_started(16_383, None);
        assert_eq!(
            adopt(16_383),
            Some(at(now + 5_000)),
            "unknown source: every peer"
        );
        import_started(16_384, Some(&id(b'b')));
        assert_eq!(adopt(16_384), None, "no such slot: nothing to do");
        import_started(9, Some(&id(b'z')));
        assert_eq!(
            adopt(9),
            Some(at(now + 5_000)),
            "a source not heard yet: every peer"
        );
        // the source of a Redis migration carries its promise until it ends, or is demoted
        assert_eq!(carried_slot(), None);
        carry_start(16_383);
        assert_eq!(carried_slot(), Some(16_383));
        carry_end();
        assert_eq!(carried_slot(), None);
        carry_start(0);
        assert_eq!(carried_slot(), Some(0));
        demoted();
        assert_eq!(carried_slot(), None);
        assert_eq!(adopt(9), None);
        assert_eq!(adopt(16_383), None);

        let far = now + MAX_PEER_LEAD_MS + 1;
        assert!(
            heard(Some(&id(b'c')), at(far), now).is_err(),
            "implausibly far ahead"
        );
        assert!(
            heard(
                Some(&id(b'c')),
                Leases {
                    msgid: now,
                    uid: far
                },
                now
            )
            .is_err(),
            "a UID promise too"
        );
        assert!(
            heard(Some(&id(b'c')), at(MAX_TIME + 2), MAX_TIME).is_err(),
            "past the 42-bit field"
        );
        assert!(heard(None, at(now), now).is_err(), "no sender");
        assert_eq!(REFUSED.get(), 3, "the three implausible ones");
        assert_eq!(peer_lease(), now + 5_000);

        // Imports in progress after a restart, from CLUSTER NODES.
        let nodes = format!(
            "{} 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922\n\
             {} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 [5461-<-{}] [7->-{}]\n",
            "b".repeat(40),
            "m".repeat(40),
            "b".repeat(40),
            "b".repeat(40)
        );
        restore_imports(nodes.as_bytes());
        assert_eq!(adopt(5461), Some(at(now + 3_000)), "importing from b again");
        assert_eq!(adopt(7), None, "migrating away: nothing to adopt");
        import_cancelled(5461);

        // The own promise: renewed only within half a promise of its end.
        assert!(issued(Family::MsgId, now));
        assert!(!issued(Family::MsgId, now + PROMISE_MS / 2 - 1));
        assert!(issued(Family::MsgId, now + PROMISE_MS / 2));
        assert_eq!(
            advertised(Leases::default()).msgid,
            now + PROMISE_MS / 2 + PROMISE_MS
        );
        assert_eq!(advertised(Leases::default()).uid, 0, "UIDs apart");
        assert_eq!(
            advertised(at(now + 60_000)),
            at(now + 60_000),
            "a higher floor"
        );
    }

    #[test]
    fn lease_messages_round_trip_and_old_ones_are_read() {
        let l = Leases {
            msgid: 1_700_000_000_123,
            uid: 1_700_000_000_456,
        };
        assert_eq!(decode(&encode(l)), Some(l));
        let old = 1_700_000_000_789u64.to_be_bytes();
        assert_eq!(decode(&old), Some(at(1_700_000_000_789)));
        assert_eq!(decode(&[0; 12]), None);
        assert_eq!(decode(&[0; 17]), None);
        assert_eq!(decode(&[]), None);
    }
}
