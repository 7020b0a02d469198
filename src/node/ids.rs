//! The node's ID generators and the time lease they share, with the whole life of the lease's
//! high-water mark in one place: issued and renewed here, replicated and written to the AOF as
//! `MSGID.FLOOR ms`, persisted as RDB aux data, carried into an AOF rewrite, and raised on load
//! or promotion. The rules themselves are Redis-free (`core::generator`, `core::lease`).
//!
//! Commands run on Redis's main thread, so the lock is never contended; it is a Mutex only to
//! make the static `Sync`.

use crate::core::generator::{Exhausted, GenStats, Generator, Issued};
use crate::core::lease::Lease;
use crate::core::msgid::MAX_TIME;
use crate::core::uid::{Layout, Run, UidGenerator, UidStats};
use crate::glue::{err, Ctx, Error};
use crate::node::cluster::{Family, Leases};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

struct Ids {
    lease: Lease,
    msgid: Generator,
    /// Built at load from the `imid.uid-*` configs (which cannot change afterwards).
    uid: Option<UidGenerator>,
}

static IDS: Mutex<Ids> = Mutex::new(Ids {
    lease: Lease::new(),
    msgid: Generator::new(),
    uid: None,
});

fn ids() -> MutexGuard<'static, Ids> {
    // A poisoned lock means a panic elsewhere was already caught by the guard; the state is
    // updated only after every check, so it is still consistent.
    IDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Issues one message ID's (time, seq) for a target in hash slot `slot` (cluster mode only),
/// renewing the lease when due; a renewal is the effect to persist and replicate (the IDs
/// themselves are not), and in cluster mode it goes to every other node too.
pub fn issue_msgid(ctx: &Ctx, slot: Option<u16>) -> Result<Issued, Exhausted> {
    let (issued, renewed) = {
        let mut g = ids();
        if let Some(peer) = slot.and_then(super::cluster::adopt) {
            g.lease.raise_floor(peer.msgid);
        }
        let floor = g.lease.floor();
        let issued = g.msgid.next(super::now_ms(), floor)?;
        (issued, g.lease.cover(issued.time))
    };
    publish_renewal(ctx, renewed);
    if slot.is_some() && super::cluster::issued(Family::MsgId, issued.time) {
        send_promise(ctx);
    }
    Ok(issued)
}

/// Installs the UID generator (at load, once the configs are checked).
pub fn set_uid_generator(g: UidGenerator) {
    ids().uid = Some(g);
}

/// Issues a run of `count` UIDs for a target in hash slot `slot` (cluster mode only; standalone
/// passes `None`), under the same lease as message IDs: the run starts at the lease's floor,
/// the lease is renewed past the run's last time, and a renewal is persisted, replicated and
/// (in cluster mode) sent to every other node, exactly as for MSGID.GEN.
pub fn issue_uid(ctx: &Ctx, slot: Option<u16>, count: u32) -> Result<Run, Error> {
    let (run, renewed) = {
        let mut g = ids();
        let Ids { lease, uid, .. } = &mut *g;
        let uid = uid
            .as_mut()
            .ok_or_else(|| err("UID generator not configured"))?;
        if let Some(peer) = slot.and_then(super::cluster::adopt) {
            lease.raise_floor(peer.uid);
        }
        let run = uid
            .issue(slot.unwrap_or(0), super::now_ms(), lease.floor(), count)
            .map_err(err)?;
        (run, lease.cover(run.time_ms))
    };
    publish_renewal(ctx, renewed);
    if slot.is_some() && super::cluster::issued(Family::Uid, run.time_ms) {
        send_promise(ctx);
    }
    Ok(run)
}

/// The UID layout in force, once configured.
pub fn uid_layout() -> Option<Layout> {
    ids().uid.as_ref().map(|g| *g.layout())
}

/// UID counters and the Unix ms the layout runs out at (zeros before configuration).
pub fn uid_stats() -> (UidStats, u64) {
    ids().uid.as_ref().map_or((UidStats::default(), 0), |g| {
        (g.stats(), g.layout().end_ms())
    })
}

/// A renewed lease is the effect to persist and replicate (`MSGID.FLOOR`).
fn publish_renewal(ctx: &Ctx, renewed: Option<u64>) {
    if let Some(lease) = renewed {
        replicate_floor(ctx, lease);
    }
}

/// Sends this node's promise to every other node of the cluster (node::cluster).
pub fn send_promise(ctx: &Ctx) {
    let p = super::cluster::advertised(floors());
    if p != Leases::default() {
        ctx.send_lease(p.msgid, p.uid);
    }
}

/// The floors of the two ID families: every ID issued from now on lies at or above them.
pub fn floors() -> Leases {
    let f = ids().lease.floor();
    Leases { msgid: f, uid: f }
}

/// Raises the floors to what a slot adoption found (node::cluster): the old owner's promise.
pub fn raise_floors(l: Leases) {
    let mut g = ids();
    g.lease.raise_floor(l.msgid.max(l.uid));
}

pub fn msgid_stats() -> GenStats {
    ids().msgid.stats()
}

pub fn lease_renewals() -> u64 {
    ids().lease.renewals()
}

/// The mark to persist: every ID issued, or still to be issued, by this or an earlier process
/// has a time below it.
pub fn high_water() -> u64 {
    ids().lease.high_water()
}

/// Raises the floor (from RDB aux data, the AOF, a primary, or a client's MSGID.FLOOR).
pub fn raise_floor(ms: u64) {
    ids().lease.raise_floor(ms);
}

/// Writes the mark to the AOF and to replicas, as `MSGID.FLOOR ms`.
pub fn replicate_floor(ctx: &Ctx, ms: u64) {
    ctx.replicate_int(c"MSGID.FLOOR", i64::try_from(ms).unwrap_or(i64::MAX));
}

/// The mark of an earlier process (RDB aux data of a restart or a full sync): raises the floor.
pub fn load_mark(hwm: u64) -> Result<(), String> {
    // Every issued ID's time fits the 42-bit field, and so does every floor MSGID.FLOOR
    // accepts. A mark past it would make every later MSGID.GEN fail for good, so the file is
    // refused (as a sequence value above 2^63-1 is) instead of loaded. (Only a lease renewed in
    // the field's last 5 s, in 2109, could reach past it; MSGID.GEN is exhausted by then.)
    if hwm > MAX_TIME {
        return Err(format!(
            "message-id high-water mark {hwm} above the 42-bit time field (max {MAX_TIME} ms); refusing the RDB file"
        ));
    }
    raise_floor(hwm);
    Ok(())
}

/// The process that last wrote the mark into a rewritten AOF.
static EMITTED_BY: AtomicU32 = AtomicU32::new(0);

/// Called for each key an AOF rewrite writes: the mark to write before the first key of a
/// rewrite (as `MSGID.FLOOR`), `None` for the others.
///
/// An AOF rewrite without the RDB preamble has no place for aux data, and the MSGID.FLOOR lines
/// of the old AOF are gone with it. Rewrites run in a forked child: the child's pid marks
/// "already written in this rewrite" without any reset in the parent.
pub fn mark_for_rewrite() -> Option<i64> {
    let pid = std::process::id();
    if EMITTED_BY.swap(pid, Ordering::Relaxed) == pid {
        return None;
    }
    let hwm = high_water();
    (hwm > 0).then(|| i64::try_from(hwm).unwrap_or(i64::MAX))
}

/// When a forked child has exited, the primary writes its mark again (`MSGID.FLOOR`, to the AOF
/// and to replicas).
///
/// Why: an AOF rewrite replaces the files holding the earlier `MSGID.FLOOR` lines with a new
/// base file. With the RDB preamble the base carries the mark as aux data, and without it the
/// mark rides on the first sequence key; a dataset with no sequence key at all had no mark
/// until the next lease renewal (up to 2.5 s under load, never without load), so a crash in
/// that window restarted the generator below IDs it had issued. Redis fires this event after
/// it has installed the rewritten AOF, so the line lands in the new incremental file. For other
/// children (BGSAVE) it is one harmless extra line.
///
/// Returns false when writes are paused (`CLIENT PAUSE ... WRITE`, a failover): Redis aborts
/// on anything propagated then, and a BGSAVE ending inside a failover's pause took a primary
/// down. The caller tries again once the pause is over.
pub fn after_fork_child(ctx: &Ctx) -> bool {
    // Replicas receive the mark from their primary, and cannot write one of their own.
    if !ctx.is_primary() {
        return true;
    }
    if ctx.writes_paused() {
        return false;
    }
    let hwm = high_water();
    if hwm > 0 {
        replicate_floor(ctx, hwm);
    }
    true
}
