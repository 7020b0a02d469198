//! What the cluster tells this node, and what it does about it: a peer's promise over the bus,
//! the once-a-second timer (this primary's promise; a replica notes its primary), the slot
//! assignment commands the command filter saw, a promotion. Each slot adoption raises the
//! node's floors (`node::ids`) to what the book of promises (`node::promises`) says the slot's
//! old owner promised.

use super::promises::{self, decode, heard, import_cancelled, import_started, restore_imports};
use crate::host::cluster::my_cluster_id;
use crate::host::Ctx;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// This node owns `slot` now: its floors rise to the old owner's promise.
pub(crate) fn import_finished(slot: u16) {
    super::ids::raise_floors(promises::import_finished(slot));
}

/// Slots were assigned to this node by hand (ADDSLOTS): its floors rise to every peer's largest
/// promise, once.
pub(crate) fn slots_added() {
    super::ids::raise_floors(promises::slots_added());
}

/// This node was promoted: its floors rise to its former primary's promise, once.
pub(crate) fn promoted() {
    super::ids::raise_floors(promises::promoted());
}

/// When a refused lease was last logged (ms).
static LAST_REFUSAL_LOG: AtomicU64 = AtomicU64::new(0);

/// A lease message from the peer `sender` arrived over the cluster bus (`entry::cluster`).
pub(crate) fn received(ctx: &Ctx, sender: Option<&[u8]>, bytes: &[u8]) {
    let Some(leases) = decode(bytes) else {
        return;
    };
    if let Err(why) = heard(sender, leases, super::now_ms()) {
        // At most one line a minute: a peer repeats its promise every second.
        let now = super::now_ms();
        if now.saturating_sub(LAST_REFUSAL_LOG.load(Ordering::Relaxed)) >= 60_000 {
            LAST_REFUSAL_LOG.store(now, Ordering::Relaxed);
            ctx.log_warning(&format!("imid: {why} (INFO imid: cluster_leases_refused)"));
        }
    }
}

/// Whether the first timer tick restored the imports in progress.
static IMPORTS_RESTORED: AtomicBool = AtomicBool::new(false);

/// The once-a-second timer (`entry::cluster`).
pub(crate) fn tick(ctx: &Ctx) {
    // Once, on the first tick: the imports this node was in the middle of when it last
    // stopped (kept in nodes.conf), which no SETSLOT seen by the filter announced.
    if !IMPORTS_RESTORED.swap(true, Ordering::Relaxed) {
        if let Some(nodes) = ctx.call_text(c"CLUSTER", c"NODES") {
            restore_imports(&nodes);
        }
    }
    // Primaries send their promise; replicas have their primary's lease by replication
    // and note who their primary is, for a promotion (promoted).
    if ctx.is_primary() {
        super::ids::send_promise(ctx);
    } else if let Some(primary) = ctx.cluster_primary() {
        promises::set_primary(&primary);
    }
}

/// A `CLUSTER <sub> <slot> <how> <node>` command run on this node, its arguments 1 to 4 as the
/// command filter saw them (`entry::cluster`): the slot assignment commands that move a slot.
pub(crate) fn cluster_command(
    sub: &[u8],
    slot: Option<&[u8]>,
    how: Option<&[u8]>,
    node: Option<&[u8]>,
) {
    let sub = sub.to_ascii_uppercase();
    match sub.as_slice() {
        b"SETSLOT" => {
            let Some(slot) = slot
                .and_then(|s| std::str::from_utf8(s).ok())
                .and_then(|s| s.parse::<u16>().ok())
            else {
                return;
            };
            let how = how.map(<[u8]>::to_ascii_uppercase);
            match how.as_deref() {
                Some(b"IMPORTING") => import_started(slot, node),
                Some(b"NODE") => {
                    let mine = my_cluster_id();
                    if node.is_some() && node == mine.as_ref().map(|m| &m[..]) {
                        import_finished(slot);
                    } else {
                        import_cancelled(slot);
                    }
                }
                Some(b"STABLE") => import_cancelled(slot),
                _ => {}
            }
        }
        b"ADDSLOTS" | b"ADDSLOTSRANGE" => slots_added(),
        _ => {}
    }
}
