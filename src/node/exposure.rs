//! What a crash could take back: the sequence values issued, and the gap skips made, since the
//! start of the last successful RDB snapshot, for `INFO imid` and a log warning.
//!
//! Why: without AOF a crash (kill -9, OOM killer, power loss) restarts the node from its last
//! snapshot, and every SEQ.NEXT since that snapshot's fork is lost. The gap covers a key only
//! while at most `imid.seq-gap` of its values were lost, and any skip since the snapshot is
//! exposed, whatever the gap ([`Exposure`]). The counts here are node-wide sums, so they bound
//! what any one key can lose.
//!
//! Nothing is added to SEQ.NEXT: the counts derive from `SEQ_ISSUED` and `SEQ_GAP_SKIPS`, which
//! it already keeps, read at the moments a snapshot starts. Which moments those are, as this
//! (parent) process sees them: [`Snapshots`].

use super::{SEQ_GAP_SKIPS, SEQ_ISSUED};
use crate::host::server::ServerInfo;
use crate::host::{self, Ctx};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A reading of the node's counters: where a snapshot started, or now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    /// `SEQ_ISSUED`: values handed out by SEQ.NEXT.
    pub(crate) issued: u64,
    /// `SEQ_GAP_SKIPS`: NEXTs that skipped the gap.
    pub(crate) skips: u64,
}

/// What a crash could take back now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exposure {
    /// Values issued since the last successful snapshot started.
    pub(crate) issued: u64,
    /// Gap skips since then.
    pub(crate) skips: u64,
    /// The AOF is off and a crash could reissue: more than `gap` values, or any skip. A key that
    /// skipped the gap since the snapshot comes back at its old value, still marked, so its next
    /// skip lands exactly on the values handed out after the lost skip.
    pub(crate) exceeds_gap: bool,
}

/// The exposure between the snapshot mark `base` and `now`.
pub(crate) fn exposure(now: Mark, base: Mark, gap: u64, aof: bool) -> Exposure {
    let issued = now.issued.saturating_sub(base.issued);
    let skips = now.skips.saturating_sub(base.skips);
    Exposure {
        issued,
        skips,
        exceeds_gap: !aof && (issued > gap || skips > 0),
    }
}

/// The snapshot bookkeeping, Redis-free: attempts in flight and where the last successful one
/// started. The event callbacks feed it what INFO persistence says. Where a snapshot starts and
/// ends, as the parent process sees it (Redis 7.0.15's source, and `tests/it/exposure.rs` on
/// real servers):
/// - BGSAVE (the command, a `save` rule, a full sync to a disk-based replica) forks; the
///   snapshot holds the data of that instant. FORK_CHILD BORN fires in the parent right after
///   the fork. `rdb_saves` counts disk snapshots started (not diskless transfers to replicas,
///   not AOF rewrites, not module forks); `rdb_bgsave_in_progress` is 1 for RDB children only.
///   FORK_CHILD DIED fires after Redis ran its done handler: on success it set
///   `rdb_last_bgsave_status:ok` and `rdb_last_save_time` to the end time (seconds); a child
///   killed with SIGUSR1 (FLUSHALL, a replica's full sync, shutdown) changes neither. So a
///   snapshot counts when it was a disk save, ended ok and moved `rdb_last_save_time`; one that
///   ends within the same second as the previous save is not counted (the count then stays
///   higher than the truth, never lower). The PERSISTENCE events of a BGSAVE fire in the child,
///   where they change nothing here.
/// - SAVE (the command, FLUSHALL with save rules, DEBUG RELOAD, shutdown) runs in the main
///   process: PERSISTENCE SYNC_RDB_START, then ENDED or FAILED.
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    base: Mark,
    /// A disk snapshot forked at this mark, with `rdb_last_save_time` at the fork.
    fork: Option<(Mark, i64)>,
    /// A synchronous save started at this mark.
    sync: Option<Mark>,
    /// `rdb_saves` when last read: a fork that finds it higher is a disk snapshot.
    saves_seen: i64,
    /// The warning was logged since the last snapshot moved the base.
    warned: bool,
}

impl Snapshots {
    pub(crate) const fn new() -> Snapshots {
        Snapshots {
            base: Mark {
                issued: 0,
                skips: 0,
            },
            fork: None,
            sync: None,
            saves_seen: 0,
            warned: false,
        }
    }

    pub(crate) fn base(&self) -> Mark {
        self.base
    }

    /// A child was forked at `at`: `rdb_child` is `rdb_bgsave_in_progress`, the others are
    /// `rdb_saves` and `rdb_last_save_time` as INFO persistence shows them after the fork.
    pub(crate) fn forked(&mut self, at: Mark, rdb_child: bool, rdb_saves: i64, last_save: i64) {
        if rdb_child && rdb_saves != self.saves_seen {
            self.fork = Some((at, last_save));
        }
        self.saves_seen = rdb_saves;
    }

    /// The forked child has exited and Redis has handled its end: `ok` is
    /// `rdb_last_bgsave_status:ok`, `last_save` is `rdb_last_save_time`.
    pub(crate) fn child_exited(&mut self, ok: bool, last_save: i64) {
        if let Some((at, before)) = self.fork.take() {
            if ok && last_save != before {
                self.moved(at);
            }
        }
    }

    /// A synchronous save started at `at` (`rdb_saves` as INFO shows it then).
    pub(crate) fn sync_started(&mut self, at: Mark, rdb_saves: i64) {
        self.sync = Some(at);
        self.saves_seen = rdb_saves;
    }

    /// The synchronous save ended (`ok`) or failed. A fork still pending is older (FLUSHALL
    /// kills a running BGSAVE before it saves), so it can no longer move the base.
    pub(crate) fn sync_ended(&mut self, ok: bool) {
        if let Some(at) = self.sync.take() {
            if ok {
                self.moved(at);
                self.fork = None;
            }
        }
    }

    /// Whether to log the warning now: when the exposure exceeds the gap, once per snapshot.
    pub(crate) fn warn_due(&mut self, exceeds_gap: bool) -> bool {
        let due = exceeds_gap && !self.warned;
        self.warned |= due;
        due
    }

    fn moved(&mut self, at: Mark) {
        // Marks only grow; an older one never moves the base back.
        self.base = Mark {
            issued: self.base.issued.max(at.issued),
            skips: self.base.skips.max(at.skips),
        };
        self.warned = false;
    }
}

static SNAPSHOTS: Mutex<Snapshots> = Mutex::new(Snapshots::new());

/// The base, copied out of the lock for INFO: Redis also calls the INFO callback from its crash
/// report, where taking a lock could hang.
static BASE_ISSUED: AtomicU64 = AtomicU64::new(0);
static BASE_SKIPS: AtomicU64 = AtomicU64::new(0);

/// Runs `f` on the bookkeeping (event callbacks only, on Redis's main thread), then publishes
/// the base for INFO.
fn with<T>(f: impl FnOnce(&mut Snapshots) -> T) -> T {
    // A poisoned lock means a panic was already caught; every field is valid on its own.
    let mut g: MutexGuard<Snapshots> = SNAPSHOTS.lock().unwrap_or_else(|e| e.into_inner());
    let out = f(&mut g);
    let base = g.base();
    BASE_ISSUED.store(base.issued, Ordering::Relaxed);
    BASE_SKIPS.store(base.skips, Ordering::Relaxed);
    out
}

fn now() -> Mark {
    Mark {
        issued: SEQ_ISSUED.get(),
        skips: SEQ_GAP_SKIPS.get(),
    }
}

/// The exposure now, for INFO (no lock taken).
pub(crate) fn current() -> Exposure {
    let base = Mark {
        issued: BASE_ISSUED.load(Ordering::Relaxed),
        skips: BASE_SKIPS.load(Ordering::Relaxed),
    };
    exposure(now(), base, crate::config::seq_gap(), host::aof_on())
}

/// FORK_CHILD BORN, in the parent right after the fork.
pub(crate) fn on_fork_born() {
    let at = now();
    let Some(info) = ServerInfo::read(c"persistence") else {
        return;
    };
    let rdb_child = info.int_field(c"rdb_bgsave_in_progress") == Some(1);
    let saves = info.int_field(c"rdb_saves").unwrap_or(0);
    let last_save = info.int_field(c"rdb_last_save_time").unwrap_or(0);
    drop(info);
    with(|s| s.forked(at, rdb_child, saves, last_save));
}

/// FORK_CHILD DIED, after Redis handled the child's end.
pub(crate) fn on_fork_died() {
    let Some(info) = ServerInfo::read(c"persistence") else {
        return;
    };
    let ok = info.text_is(c"rdb_last_bgsave_status", "ok");
    let last_save = info.int_field(c"rdb_last_save_time").unwrap_or(0);
    drop(info);
    with(|s| s.child_exited(ok, last_save));
}

/// PERSISTENCE SYNC_RDB_START: a synchronous save starts in this process.
pub(crate) fn on_sync_save_start() {
    let at = now();
    let saves = ServerInfo::read(c"persistence")
        .and_then(|i| i.int_field(c"rdb_saves"))
        .unwrap_or(0);
    with(|s| s.sync_started(at, saves));
}

/// PERSISTENCE ENDED or FAILED. In a BGSAVE's child these fire too, with no synchronous save
/// pending there, so they change nothing.
pub(crate) fn on_save_end(ok: bool) {
    with(|s| s.sync_ended(ok));
}

/// CRON_LOOP (`hz` times a second): the warning, once per snapshot interval. A few atomic loads
/// and a flag test.
pub(crate) fn on_cron(ctx: &Ctx) {
    let e = current();
    if !with(|s| s.warn_due(e.exceeds_gap)) {
        return;
    }
    let gap = crate::config::seq_gap();
    let skips = if e.skips > 0 {
        format!(
            ", and the gap was skipped on {} keys since then (a crash takes a skip back, and \
             that key's next skip hands out the same values again)",
            e.skips
        )
    } else {
        String::new()
    };
    ctx.log_warning(&format!(
        "imid: with AOF off, a crash now could hand out sequence values again: {} values were \
         issued since the last RDB snapshot started, imid.seq-gap is {gap}{skips}. Turn on AOF \
         (appendonly yes), or snapshot more often and raise imid.seq-gap above the values one \
         key issues between snapshots (docs/durability.md, \"Without AOF\"). Logged once per snapshot.",
        e.issued
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(issued: u64, skips: u64) -> Mark {
        Mark { issued, skips }
    }

    #[test]
    fn exposure_counts_since_the_base_and_exceeds_only_without_aof() {
        let e = exposure(m(1500, 0), m(400, 0), 1000, false);
        assert_eq!((e.issued, e.skips, e.exceeds_gap), (1100, 0, true));
        assert!(!exposure(m(1500, 0), m(400, 0), 1000, true).exceeds_gap);
        // At most `gap` lost values are covered: exactly the gap does not exceed.
        assert!(!exposure(m(1400, 0), m(400, 0), 1000, false).exceeds_gap);
        assert!(exposure(m(1401, 0), m(400, 0), 1000, false).exceeds_gap);
        // Any skip since the snapshot is exposed, whatever the gap.
        let e = exposure(m(401, 3), m(400, 2), 1000, false);
        assert_eq!((e.issued, e.skips, e.exceeds_gap), (1, 1, true));
        assert!(!exposure(m(401, 3), m(400, 2), 1000, true).exceeds_gap);
        // gap 0: every value issued is exposed.
        assert!(exposure(m(1, 0), m(0, 0), 0, false).exceeds_gap);
        assert!(!exposure(m(0, 0), m(0, 0), 0, false).exceeds_gap);
    }

    #[test]
    fn a_disk_snapshot_that_ends_ok_moves_the_base_to_its_fork() {
        let mut s = Snapshots::new();
        s.forked(m(10, 1), true, 1, 100);
        s.child_exited(true, 103);
        assert_eq!(s.base(), m(10, 1));
    }

    #[test]
    fn failed_killed_and_other_children_leave_the_base() {
        let mut s = Snapshots::new();
        // Failed: status err.
        s.forked(m(10, 0), true, 1, 100);
        s.child_exited(false, 100);
        assert_eq!(s.base(), m(0, 0));
        // Killed with SIGUSR1: status still ok from before, save time unchanged.
        s.forked(m(20, 0), true, 2, 100);
        s.child_exited(true, 100);
        assert_eq!(s.base(), m(0, 0));
        // A diskless transfer to replicas: an RDB child, but rdb_saves did not move.
        s.forked(m(30, 0), true, 2, 100);
        s.child_exited(true, 100);
        assert_eq!(s.base(), m(0, 0));
        // An AOF rewrite (or a module's fork).
        s.forked(m(40, 0), false, 2, 100);
        s.child_exited(true, 107);
        assert_eq!(s.base(), m(0, 0));
        // The next disk save counts.
        s.forked(m(50, 0), true, 3, 100);
        s.child_exited(true, 108);
        assert_eq!(s.base(), m(50, 0));
    }

    #[test]
    fn a_disk_save_counted_by_rdb_saves_but_whose_fork_failed_does_not_promote_the_next_fork() {
        let mut s = Snapshots::new();
        s.forked(m(5, 0), true, 1, 100);
        s.child_exited(true, 101);
        // BGSAVE's fork fails (rdb_saves 2, no BORN, status err); a diskless transfer follows
        // and is taken for a disk save, but its end neither sets ok nor moves the save time.
        s.forked(m(30, 0), true, 2, 101);
        s.child_exited(false, 101);
        assert_eq!(s.base(), m(5, 0));
    }

    #[test]
    fn a_synchronous_save_moves_the_base_to_its_start_and_supersedes_a_pending_fork() {
        let mut s = Snapshots::new();
        s.sync_started(m(7, 0), 1);
        s.sync_ended(true);
        assert_eq!(s.base(), m(7, 0));
        s.sync_started(m(9, 0), 2);
        s.sync_ended(false);
        assert_eq!(s.base(), m(7, 0));
        // FLUSHALL: the running BGSAVE is killed, a SAVE runs, then the child's end arrives.
        s.forked(m(20, 0), true, 3, 100);
        s.sync_started(m(25, 0), 3);
        s.sync_ended(true);
        s.child_exited(true, 104);
        assert_eq!(s.base(), m(25, 0));
        // An ENDED without a SAVE started (in a BGSAVE's child) changes nothing.
        s.sync_ended(true);
        assert_eq!(s.base(), m(25, 0));
    }

    #[test]
    fn the_warning_is_due_once_per_snapshot() {
        let mut s = Snapshots::new();
        assert!(!s.warn_due(false));
        assert!(s.warn_due(true));
        assert!(!s.warn_due(true));
        s.sync_started(m(1, 0), 1);
        s.sync_ended(true);
        assert!(s.warn_due(true));
        assert!(!s.warn_due(true));
        // A failed snapshot does not re-arm it.
        s.sync_started(m(2, 0), 2);
        s.sync_ended(false);
        assert!(!s.warn_due(true));
    }
}
