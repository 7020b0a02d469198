//! The node's ID generators and their two time leases, with the whole life of each lease's
//! high-water mark in one place: issued and renewed here, replicated and written to the AOF
//! (`MSGID.FLOOR ms`, `UID.FLOOR ms`), persisted as RDB aux data, carried into an AOF rewrite,
//! and raised on load or promotion. The rules themselves are Redis-free (`core::generator`,
//! `core::lease`, `core::uid`).
//!
//! Two leases, one per family, so that UID.GEN's borrowing never moves message IDs' time; one
//! rule links them, one way: whatever raises the message-ID mark raises the UID mark to it
//! (the rule in full: `Ids`).

use crate::config::uid_settings;
use crate::core::generator::{GenStats, Generator, Issued, MsgidExhausted};
use crate::core::lease::{Lease, PastCap};
use crate::core::msgid::MAX_TIME;
use crate::core::to_i64;
use crate::core::uid::{
    parse_epoch, parse_unit, Layout, LayoutError, LayoutSpec, NodeSpec, Run, UidGenerator, UidStats,
};
use crate::error::{err, Error};
use crate::host::cluster::{my_cluster_id, NodeId};
use crate::host::Ctx;
use crate::node::fence;
use crate::node::promises::{self, Family, Leases, LEASE_MESSAGE};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The message-ID lease's cap: every message ID's time is below 2^42 (the 42-bit field), so a
/// lease never needs to reach further. MSGID.FLOOR and the RDB loader take marks up to it.
pub(crate) const MSGID_LEASE_CAP: u64 = MAX_TIME + 1;
/// The UID lease's cap: UID.FLOOR carries a signed 64-bit time, and every layout ends at or
/// below 2^63-1 ms (`core::uid::Layout::new`).
pub(crate) const UID_LEASE_CAP: u64 = i64::MAX as u64;

/// The generators and their leases. Two leases, one per family, so that UID.GEN's borrowing (a
/// whole time unit per full seq field, in a layout of the user's choosing) never moves message
/// IDs' time. One rule links them, one way: whatever raises the message-ID floor (MSGID.FLOOR
/// from any source, a loaded mark) raises the UID floor to the same time, and a renewal of the
/// message-ID lease extends the UID lease to it (as its replay, MSGID.FLOOR, raises a replica's
/// UID floor). So old AOFs and RDB files, whose one mark covered both families, keep covering
/// UIDs; the UID mark is never below the message-ID mark; and a replica or an AOF replay, which
/// sees each MSGID.FLOOR once, reaches exactly the primary's two marks.
struct Ids {
    msgid_lease: Lease,
    uid_lease: Lease,
    msgid: Generator,
    /// Built at load from the `imid.uid-*` configs (which cannot change afterwards).
    uid: Option<UidGenerator>,
    /// The time (Unix ms) of the last UID issued by a bounded issue, which the fast path of
    /// [`issue_one_uid`] continues.
    uid_last_ms: u64,
}

/// Commands run on Redis's main thread, so the lock is never contended; it is a Mutex only to
/// make the static `Sync`.
static IDS: Mutex<Ids> = Mutex::new(Ids {
    msgid_lease: Lease::new(MSGID_LEASE_CAP),
    uid_lease: Lease::new(UID_LEASE_CAP),
    msgid: Generator::new(),
    uid: None,
    uid_last_ms: 0,
});

fn ids() -> MutexGuard<'static, Ids> {
    // A poisoned lock means a panic elsewhere was already caught by the guard; the state is
    // updated only after every check, so it is still consistent.
    IDS.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ids {
    /// The message-ID floor, and the UID floor with it. The UID cap is above the message-ID
    /// cap, so once the first is taken the second is too.
    fn raise_msgid_floor(&mut self, ms: u64) -> Result<(), PastCap> {
        self.msgid_lease.raise_floor(ms)?;
        self.uid_lease.raise_floor(ms)
    }
}

/// A renewal to publish: which family's FLOOR command, and the new lease.
#[derive(Clone, Copy)]
enum Renewal {
    Msgid(u64),
    Uid(u64),
}

/// Issues one message ID's (time, seq) for a target in hash slot `slot` (cluster mode only),
/// renewing the message-ID lease when due; a renewal is the effect to persist and replicate
/// (the IDs themselves are not), and in cluster mode it goes to every other node too.
pub(crate) fn issue_msgid(ctx: &Ctx, slot: Option<u16>) -> Result<Issued, MsgidExhausted> {
    let (issued, renewed) = {
        let mut g = ids();
        if let Some(peer) = slot.and_then(promises::adopt) {
            // A peer's lease past the cap is refused (`node::promises` refuses it already).
            let _ = g.raise_msgid_floor(peer.msgid);
        }
        let floor = g.msgid_lease.floor();
        let issued = g.msgid.next(super::now_ms(), floor)?;
        let renewed = g.msgid_lease.cover(issued.time);
        if let Some(lease) = renewed {
            // Its replay (MSGID.FLOOR) raises a replica's UID floor to it: the UID lease
            // reaches it too, so both nodes hold the same UID mark. (The lease, not the floor:
            // UIDs issued here stay at the clock.)
            g.uid_lease.extend(lease);
        }
        (issued, renewed.map(Renewal::Msgid))
    };
    publish_renewal(ctx, renewed);
    if slot.is_some() && promises::issued(Family::MsgId, issued.time) {
        promise_moved(ctx);
    }
    Ok(issued)
}

/// Builds the UID generator from the `imid.uid-*` configs, checked together against the clock
/// `now_ms` and the server mode, and installs it (at load, once the configs are loaded). A
/// refusal says why (for a layout that runs out, when); the load then fails.
pub(crate) fn configure_uid(now_ms: u64, cluster: bool) -> Result<(), LayoutError> {
    let (layout, epoch, unit, node) = uid_settings();
    let spec = LayoutSpec::parse(&layout)?.unwrap_or(LayoutSpec::auto(cluster));
    // An explicit epoch or unit overrides the named layout's.
    let layout = spec.resolve(parse_epoch(&epoch)?, parse_unit(&unit)?)?;
    layout.check_lifetime(now_ms)?;
    let mode = layout.node_mode(NodeSpec::parse(&node)?, cluster)?;
    ids().uid = Some(UidGenerator::new(layout, mode));
    Ok(())
}

/// Issues a run of `count` UIDs for a target in hash slot `slot` (cluster mode only; standalone
/// passes `None`) under the UID lease: the run starts at the UID floor, may borrow at most
/// `core::uid::UID_MAX_LEAD_MS` ahead of `max(clock, floor)` (else nothing is issued), and the
/// UID lease is renewed past the run's last time; a renewal is persisted and replicated as
/// `UID.FLOOR` and (in cluster mode) sent to every other node. The message-ID lease is not
/// touched.
#[inline(always)]
pub(crate) fn issue_uid(ctx: &Ctx, slot: Option<u16>, count: u32) -> Result<Run, Error> {
    issue_uid_at(ctx, slot, count, super::now_ms())
}

/// [`issue_uid`] with the clock read by the caller.
#[inline(always)]
fn issue_uid_at(ctx: &Ctx, slot: Option<u16>, count: u32, now_ms: u64) -> Result<Run, Error> {
    let (run, renewed) = {
        let mut g = ids();
        let Ids {
            uid_lease,
            uid,
            uid_last_ms,
            ..
        } = &mut *g;
        let uid = uid
            .as_mut()
            .ok_or_else(|| err("UID generator not configured"))?;
        if let Some(peer) = slot.and_then(promises::adopt) {
            // A peer's lease past the cap is refused: it could not be persisted.
            let _ = uid_lease.raise_floor(peer.uid);
        }
        let run = uid
            .issue_bounded(slot.unwrap_or(0), now_ms, uid_lease.floor(), count)
            .map_err(err)?;
        *uid_last_ms = run.time_ms;
        (run, uid_lease.cover(run.time_ms).map(Renewal::Uid))
    };
    publish_renewal(ctx, renewed);
    if slot.is_some() && promises::issued(Family::Uid, run.time_ms) {
        promise_moved(ctx);
    }
    Ok(run)
}

/// One UID on a standalone node, with its time (Unix ms, for the fence): [`issue_uid`]`(ctx,
/// None, 1)`'s first ID, issued without planning when it is the next of the previous ID's time
/// unit (same clock reading, same floor: the lease already covers that unit and nothing needs
/// publishing).
#[inline(always)]
pub(crate) fn issue_one_uid(ctx: &Ctx) -> Result<(u64, u64), Error> {
    let now_ms = super::now_ms();
    let fast = {
        let mut g = ids();
        let (floor_ms, last_ms) = (g.uid_lease.floor(), g.uid_last_ms);
        g.uid
            .as_mut()
            .and_then(|u| u.issue_one(now_ms, floor_ms))
            .map(|id| (id, last_ms))
    };
    match fast {
        Some(issued) => Ok(issued),
        None => issue_uid_at(ctx, None, 1, now_ms).map(|run| (run.first(), run.time_ms)),
    }
}

/// The UID layout in force, once configured.
pub(crate) fn uid_layout() -> Option<Layout> {
    ids().uid.as_ref().map(|g| *g.layout())
}

/// UID counters and the Unix ms the layout runs out at (zeros before configuration).
pub(crate) fn uid_stats() -> (UidStats, u64) {
    ids().uid.as_ref().map_or((UidStats::default(), 0), |g| {
        (g.stats(), g.layout().end_ms())
    })
}

/// A renewed lease is the effect to persist and replicate (`MSGID.FLOOR` or `UID.FLOOR`), and
/// to have the replicas acknowledge before IDs past the acknowledged lease go out
/// (`node::fence`). Inlined: the usual call has nothing to publish.
#[inline(always)]
fn publish_renewal(ctx: &Ctx, renewed: Option<Renewal>) {
    match renewed {
        Some(Renewal::Msgid(ms)) => {
            replicate_floor(ctx, ms);
            fence::renewed(ctx, fence::Lease::Msgid, ms);
        }
        Some(Renewal::Uid(ms)) => {
            replicate_uid_floor(ctx, ms);
            fence::renewed(ctx, fence::Lease::Uid, ms);
        }
        None => {}
    }
}

/// While the fence is on (from the cron): renews a lease this process uses once the clock
/// comes within half a lease of its end, as an issue would, so that the lease the replicas
/// acknowledged stays ahead of the clock and an ID after an idle spell need not wait (nor be
/// refused inside a script). A lease never renewed by this process (a family it has not used
/// since it started) is left alone. One `MSGID.FLOOR` / `UID.FLOOR` per 2.5 s per family in
/// use, also while idle. Not while writes are paused (nothing may be propagated then).
pub(crate) fn keep_leases(ctx: &Ctx) {
    if !ctx.is_primary() || ctx.writes_paused() {
        return;
    }
    let now = super::now_ms();
    let (msgid, uid) = {
        let mut g = ids();
        let msgid = if g.msgid_lease.until() > 0 {
            let at = now.max(g.msgid_lease.floor()).min(MAX_TIME);
            let r = g.msgid_lease.cover(at);
            if let Some(lease) = r {
                g.uid_lease.extend(lease);
            }
            r
        } else {
            None
        };
        let uid = if g.uid_lease.until() > 0 {
            let at = now.max(g.uid_lease.floor());
            g.uid_lease.cover(at)
        } else {
            None
        };
        (msgid.map(Renewal::Msgid), uid.map(Renewal::Uid))
    };
    publish_renewal(ctx, msgid);
    publish_renewal(ctx, uid);
}

/// Sends this node's promise to every other node of the cluster (`node::promises`).
pub(crate) fn send_promise(ctx: &Ctx) {
    let p = promises::advertised(floors());
    if p != Leases::default() {
        ctx.send_cluster_message(LEASE_MESSAGE, &promises::encode(p));
    }
}

/// This node's promise moved (an ID was issued within half a promise of it): every other node
/// hears it over the bus, and while this node is the source of a Redis 8.4+ atomic slot
/// migration the new promise also goes to the target inside the migration, as
/// `MSGID.PROMISE <key of a migrating slot> <this node> <msgid-ms> <uid-ms>` replicated (in
/// order with the slots' writes, all applied before the target takes the slots over; the bus
/// gives no such order). Nothing while writes are paused (Redis aborts on anything replicated
/// then; no ID is issued then either: MSGID.GEN and UID.GEN are write commands).
fn promise_moved(ctx: &Ctx) {
    send_promise(ctx);
    let Some(slot) = promises::carried_slot() else {
        return;
    };
    if !ctx.is_primary() || ctx.writes_paused() {
        return;
    }
    if let Some((me, p)) = promise_to_carry() {
        if !ctx.replicate_in_slot(PROMISE_COMMAND, slot, &me, p) {
            ctx.log_warning(
                "imid: this node's promise cannot go with the slot migration: the server names no key of the slot",
            );
        }
    }
}

/// The command that carries a promise inside a slot migration (`commands::msgid::promise`).
pub(crate) const PROMISE_COMMAND: &CStr = c"MSGID.PROMISE";

/// What `MSGID.PROMISE` carries: this node's ID and its promise (message IDs', UIDs'). `None`
/// outside cluster mode or before any promise.
pub(crate) fn promise_to_carry() -> Option<(NodeId, [i64; 2])> {
    let p = promises::advertised(floors());
    let me = my_cluster_id()?;
    (p != Leases::default()).then_some((me, [to_i64(p.msgid), to_i64(p.uid)]))
}

/// The floors of the two ID families: every ID issued from now on lies at or above them.
pub(crate) fn floors() -> Leases {
    let g = ids();
    Leases {
        msgid: g.msgid_lease.floor(),
        uid: g.uid_lease.floor(),
    }
}

/// Raises the floors to what a slot adoption found (`node::cluster`): the old owner's promise,
/// each family its own (the message-ID one raises the UID floor too, as everywhere). A promise
/// past a lease's cap is refused (`node::promises` refuses it already).
pub(crate) fn raise_floors(l: Leases) {
    let mut g = ids();
    let _ = g.raise_msgid_floor(l.msgid);
    let _ = g.uid_lease.raise_floor(l.uid);
}

pub(crate) fn msgid_stats() -> GenStats {
    ids().msgid.stats()
}

/// Renewals of the message-ID lease (each one wrote one MSGID.FLOOR).
pub(crate) fn lease_renewals() -> u64 {
    ids().msgid_lease.renewals()
}

/// Renewals of the UID lease (each one wrote one UID.FLOOR).
pub(crate) fn uid_lease_renewals() -> u64 {
    ids().uid_lease.renewals()
}

/// The message-ID mark to persist: every message ID issued, or still to be issued, by this or
/// an earlier process has a time below it. At most 2^42.
pub(crate) fn high_water() -> u64 {
    ids().msgid_lease.high_water()
}

/// The UID mark to persist (Unix ms of UIDs' time): every UID issued, or still to be issued,
/// by this or an earlier process has a time below it. Never below [`high_water`].
pub(crate) fn uid_high_water() -> u64 {
    ids().uid_lease.high_water()
}

/// Whether there is any mark to persist (RDB aux data is worth writing): an ID was issued or
/// a floor was set or loaded. Without one, Redis 7.2+ and Valkey write no imid aux record
/// (`aux_save2`), so the snapshot loads without imid.
pub(crate) fn has_mark() -> bool {
    let g = ids();
    g.msgid_lease.high_water() > 0 || g.uid_lease.high_water() > 0
}

/// Raises the message-ID floor and the UID floor (MSGID.FLOOR from the AOF, a primary, or a
/// client). Refused past 2^42, changing nothing.
pub(crate) fn raise_floor(ms: u64) -> Result<(), Error> {
    ids().raise_msgid_floor(ms).map_err(|e| {
        err(format_args!(
            "message-id floor {} past its cap {}",
            e.ms, e.cap
        ))
    })
}

/// Raises the UID floor only (UID.FLOOR from the AOF, a primary, or a client). Refused past
/// 2^63-1, changing nothing.
pub(crate) fn raise_uid_floor(ms: u64) -> Result<(), Error> {
    ids()
        .uid_lease
        .raise_floor(ms)
        .map_err(|e| err(format_args!("uid floor {} past its cap {}", e.ms, e.cap)))
}

/// Writes the message-ID mark to the AOF and to replicas, as `MSGID.FLOOR ms`.
pub(crate) fn replicate_floor(ctx: &Ctx, ms: u64) {
    ctx.replicate_int(c"MSGID.FLOOR", to_i64(ms));
}

/// Writes the UID mark to the AOF and to replicas, as `UID.FLOOR ms`.
pub(crate) fn replicate_uid_floor(ctx: &Ctx, ms: u64) {
    ctx.replicate_int(c"UID.FLOOR", to_i64(ms));
}

/// The marks of an earlier process (RDB aux data of a restart or a full sync): raise the
/// floors. `uid` is `None` in a file of the first aux format, whose one mark covered both
/// families. A mark past its lease's cap is refused (the file is refused, as a sequence value
/// above 2^63-1 is): no correct writer saves one, since the leases never pass their caps.
pub(crate) fn load_marks(msgid: u64, uid: Option<u64>) -> Result<(), String> {
    if msgid > MSGID_LEASE_CAP {
        return Err(format!(
            "message-id high-water mark {msgid} past the 42-bit time field (at most {MSGID_LEASE_CAP}: every ID below it); refusing the RDB file"
        ));
    }
    if let Some(u) = uid.filter(|&u| u > UID_LEASE_CAP) {
        return Err(format!(
            "uid high-water mark {u} past 2^63-1 ms (at most {UID_LEASE_CAP}); refusing the RDB file"
        ));
    }
    let mut g = ids();
    // Both within their caps, checked above.
    let _ = g.raise_msgid_floor(msgid);
    if let Some(u) = uid {
        let _ = g.uid_lease.raise_floor(u);
    }
    Ok(())
}

/// The process that last wrote the marks into a rewritten AOF.
static EMITTED_BY: AtomicU32 = AtomicU32::new(0);

/// The marks to write in an AOF rewrite, as (MSGID.FLOOR value, UID.FLOOR value); 0 is "none".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Marks {
    pub(crate) msgid: i64,
    pub(crate) uid: i64,
}

/// Called for each key an AOF rewrite writes: the marks to write before the first key of a
/// rewrite (`MSGID.FLOOR` then `UID.FLOOR`; the first raises both floors, the second the UID
/// floor to its own mark, never below), `None` for the other keys.
///
/// An AOF rewrite without the RDB preamble has no place for aux data, and the FLOOR lines of
/// the old AOF are gone with it. Rewrites run in a forked child: the child's pid marks
/// "already written in this rewrite" without any reset in the parent.
pub(crate) fn marks_for_rewrite() -> Option<Marks> {
    let pid = std::process::id();
    if EMITTED_BY.swap(pid, Ordering::Relaxed) == pid {
        return None;
    }
    let g = ids();
    let m = Marks {
        msgid: to_i64(g.msgid_lease.high_water()),
        uid: to_i64(g.uid_lease.high_water()),
    };
    (m.msgid > 0 || m.uid > 0).then_some(m)
}

/// When a forked child has exited, the primary writes its marks again (`MSGID.FLOOR` then
/// `UID.FLOOR`, to the AOF and to replicas).
///
/// Why: an AOF rewrite replaces the files holding the earlier FLOOR lines with a new base
/// file. With the RDB preamble the base carries the marks as aux data, and without it the
/// marks ride on the first sequence key; a dataset with no sequence key at all had no mark
/// until the next lease renewal (up to 2.5 s under load, never without load), so a crash in
/// that window restarted the generators below IDs they had issued. Redis fires this event
/// after it has installed the rewritten AOF, so the lines land in the new incremental file. For
/// other children (BGSAVE) they are harmless extra lines.
///
/// Returns false when writes are paused (`CLIENT PAUSE ... WRITE`, a failover): Redis aborts
/// on anything propagated then, and a BGSAVE ending inside a failover's pause took a primary
/// down. The caller tries again once the pause is over.
pub(crate) fn after_fork_child(ctx: &Ctx) -> bool {
    // Replicas receive the marks from their primary, and cannot write their own.
    if !ctx.is_primary() {
        return true;
    }
    if ctx.writes_paused() {
        return false;
    }
    let (msgid, uid) = {
        let g = ids();
        (g.msgid_lease.high_water(), g.uid_lease.high_water())
    };
    if msgid > 0 {
        replicate_floor(ctx, msgid);
    }
    if uid > 0 {
        replicate_uid_floor(ctx, uid);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test only: the leases are process-wide.
    #[test]
    fn marks_load_within_their_caps_and_keep_the_uid_mark_above() {
        assert!(!has_mark());
        // past a cap: the whole file is refused, nothing raised
        let e = load_marks(MSGID_LEASE_CAP + 1, Some(5)).unwrap_err();
        assert!(
            e.contains("message-id high-water mark 4398046511105"),
            "{e}"
        );
        let e = load_marks(5, Some(UID_LEASE_CAP + 1)).unwrap_err();
        assert!(e.contains("uid high-water mark 9223372036854775808"), "{e}");
        assert!(!has_mark());
        assert!(raise_floor(MSGID_LEASE_CAP + 1).is_err());
        assert!(raise_uid_floor(UID_LEASE_CAP + 1).is_err());
        assert!(!has_mark());
        // the UID floor alone is a mark, and leaves message IDs alone
        raise_uid_floor(7_000).unwrap();
        assert!(has_mark());
        assert_eq!((high_water(), uid_high_water()), (0, 7_000));
        // a version-1 mark (one for both) raises both; version 2 each its own
        load_marks(9_000, None).unwrap();
        assert_eq!((high_water(), uid_high_water()), (9_000, 9_000));
        load_marks(10_000, Some(12_000)).unwrap();
        assert_eq!((high_water(), uid_high_water()), (10_000, 12_000));
        // MSGID.FLOOR's raise takes the UID floor along, never down
        raise_floor(11_000).unwrap();
        assert_eq!((high_water(), uid_high_water()), (11_000, 12_000));
        raise_floor(13_000).unwrap();
        assert_eq!((high_water(), uid_high_water()), (13_000, 13_000));
        // the caps themselves load
        load_marks(MSGID_LEASE_CAP, Some(UID_LEASE_CAP)).unwrap();
        assert_eq!(
            (high_water(), uid_high_water()),
            (MSGID_LEASE_CAP, UID_LEASE_CAP)
        );
        assert_eq!(
            floors(),
            Leases {
                msgid: MSGID_LEASE_CAP,
                uid: UID_LEASE_CAP
            }
        );
    }
}
