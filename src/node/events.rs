//! What imid does on the server events it listens to. The subscription and the raw callbacks,
//! which decode each event into an [`Event`], are in `entry::events`.

use crate::config::CLUSTER_MODE;
use crate::host::Ctx;
use crate::node;
use std::sync::atomic::{AtomicBool, Ordering};

/// A server event imid acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A load starts: an RDB or AOF at startup, a full sync from a primary, DEBUG RELOAD.
    LoadStart,
    /// A load ended successfully.
    LoadEnd,
    /// This node is promoted (`primary`), or becomes a replica.
    RoleChanged { primary: bool },
    /// A forked child was born (the start of a BGSAVE's snapshot).
    ForkBorn,
    /// A forked child exited.
    ForkDied,
    /// A synchronous save starts.
    SyncSaveStart,
    /// A save ended, successfully or not.
    SaveEnded { ok: bool },
    /// The server's cron (`hz` times a second).
    Cron,
    /// `CONFIG SET` changed a config (Redis's or a module's).
    ConfigChanged,
}

/// Runs what `event` asks for.
pub(crate) fn on_event(ctx: &Ctx, event: Event) {
    match event {
        // From now on a missing sequence key may be one whose writes were lost, so its first
        // SEQ.NEXT skips the gap (see `node::inherited`).
        Event::LoadStart => {
            node::mark_inherited();
            node::fence::load_started();
        }
        // What was loaded is fsynced before the first call counts on it (`node::fence`).
        Event::LoadEnd => node::fence::load_ended(ctx),
        Event::RoleChanged { primary } => {
            node::mark_inherited();
            // What the replicas acknowledged belongs to the old term (`node::fence`).
            node::fence::role_changed(ctx, primary);
            // A promoted replica takes over its primary's slots (node::cluster); a replica
            // imports nothing. Only cluster mode has slots to adopt.
            if CLUSTER_MODE.load(Ordering::Relaxed) {
                if primary {
                    node::cluster::promoted();
                } else {
                    node::promises::demoted();
                }
            }
        }
        // The snapshot bookkeeping (`node::exposure`); a fork starts streams that need the IDMP
        // clock again (`node::idmp_clock`); after an exit the primary writes its time
        // high-water mark again (see `node::ids::after_fork_child`).
        Event::ForkBorn => {
            node::exposure::on_fork_born();
            node::idmp_clock::on_fork_born();
            node::fence::child_changed(true);
        }
        Event::ForkDied => {
            node::exposure::on_fork_died();
            node::fence::child_changed(false);
            if !node::ids::after_fork_child(ctx) {
                MARK_PENDING.store(true, Ordering::Relaxed);
            }
        }
        // The AOF's settings may have changed: what the gate waits for follows at once.
        Event::ConfigChanged => node::fence::config_changed(ctx),
        // A BGSAVE's own start and end events fire inside its child, where they change nothing.
        Event::SyncSaveStart => node::exposure::on_sync_save_start(),
        Event::SaveEnded { ok } => node::exposure::on_save_end(ok),
        // The exposure warning, if due.
        Event::Cron => {
            node::exposure::on_cron(ctx);
            // The fence's configs and budget (`node::fence`), and, while it is on, leases
            // renewed ahead of the clock so that IDs need not wait after an idle spell.
            node::fence::cron(ctx);
            if node::fence::active() {
                node::ids::keep_leases(ctx);
            }
            // A mark deferred by paused writes, once the pause is over.
            if MARK_PENDING.load(Ordering::Relaxed) && node::ids::after_fork_child(ctx) {
                MARK_PENDING.store(false, Ordering::Relaxed);
            }
        }
    }
}

/// The time mark to write after a forked child exited was deferred: writes were paused then
/// (`node::ids::after_fork_child`); the cron writes it once they are not.
static MARK_PENDING: AtomicBool = AtomicBool::new(false);
