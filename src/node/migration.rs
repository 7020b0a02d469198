//! Atomic slot migration, the rules: what the importing node does at each phase of an import
//! (Valkey 9's `CLUSTER MIGRATESLOTS` and Redis 8.4+'s `CLUSTER MIGRATION IMPORT`), and, on
//! Redis, what the source does so that its promise travels inside the migration. The module
//! option Valkey needs is declared in `host::server`; the subscriptions and the raw events are
//! in `entry::migration`.
//!
//! Neither migration runs `CLUSTER SETSLOT`, and both run their snapshot and stream as a
//! replicated client, so sequences arrive marked for the gap and streamed `SEQ.NEXT` calls
//! replay exactly; what the events add is slot adoption (`node::cluster`): [`on_import`] follows
//! the source, and on Redis [`before_snapshot`] and [`on_migrate`] carry the source's promise.

use crate::host::cluster::NODE_ID_LEN;
use crate::host::Ctx;
use crate::node::{cluster, ids, promises};

/// A phase of a migration, on the importing node (and on its replicas, which follow it) or on
/// the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Started,
    Completed,
    Aborted,
}

/// Applies `phase` of the import `job` of `slots`; returns the line to log. `source` is the
/// node the event names (Redis), or `None` (Valkey: taken from `CLUSTER NODES` when the
/// import starts).
///
/// Neither migration runs `CLUSTER SETSLOT`: the source sends the slots' keys to the target as a
/// snapshot (Valkey: AOF format, the sequence type's `aof_rewrite`, `SEQ.SET key value`; Redis:
/// `RESTORE` payloads), then streams the writes to those slots, pauses its writers, and the
/// target claims the slots. Both servers run the snapshot and the stream as a replicated client,
/// so sequences arrive marked for the gap and streamed `SEQ.NEXT` calls replay exactly; what the
/// events add is slot adoption (`node::cluster`): the importing node follows the source from the
/// import's start, raises its floors to the source's promise when it takes the slots over, and
/// stops following it when the import is cancelled or fails.
pub(crate) fn on_import(
    ctx: &Ctx,
    phase: Phase,
    job: &str,
    slots: &[u16],
    source: Option<&[u8]>,
) -> String {
    // Valkey's event names no source. When the import starts, Valkey has just checked that the
    // slots' owner in this node's view is the source.
    let source = match (phase, slots.first(), source) {
        (_, _, Some(id)) => Some(id.to_vec()),
        (Phase::Started, Some(&s), None) => ctx
            .call_text(c"CLUSTER", c"NODES")
            .and_then(|nodes| owner_in_nodes(&nodes, s)),
        _ => None,
    };
    for &s in slots {
        match phase {
            Phase::Started => promises::import_started(s, source.as_deref()),
            Phase::Completed => {
                // A source named at completion (Redis) is the old owner, even if the start
                // was not seen here (a module loaded in the middle of the import).
                if let Some(id) = source.as_deref() {
                    promises::import_started(s, Some(id));
                }
                cluster::import_finished(s);
            }
            Phase::Aborted => promises::import_cancelled(s),
        }
    }
    let (what, from) = match (phase, &source) {
        (Phase::Started, Some(id)) => (
            "started",
            format!(", source {}", String::from_utf8_lossy(id)),
        ),
        (Phase::Started, None) => ("started", String::from(", source unknown")),
        (Phase::Completed, _) => ("completed", String::new()),
        (Phase::Aborted, _) => ("aborted", String::new()),
    };
    format!(
        "imid: atomic slot migration {job}: import {what} for {} slot(s) ({}){from}",
        slots.len(),
        ranges(slots)
    )
}

/// Applies `phase` of the migration `job` of `slots` from this node (Redis 8.4+), the source,
/// to `destination`; returns the line to log. While it lasts, this node's new promises travel
/// inside it (`node::ids`); it ends with the source's pause, completion or failure (a failed
/// one is retried by the target with a new start).
pub(crate) fn on_migrate(phase: Phase, job: &str, slots: &[u16], destination: &[u8]) -> String {
    match (phase, slots.first()) {
        (Phase::Started, Some(&s)) => promises::carry_start(s),
        _ => promises::carry_end(),
    }
    migrate_line(phase, job, slots, destination)
}

/// The log line of [`on_migrate`].
fn migrate_line(phase: Phase, job: &str, slots: &[u16], destination: &[u8]) -> String {
    let what = match phase {
        Phase::Started => "started (this node's promise goes with it)",
        Phase::Completed => "completed",
        Phase::Aborted => "failed",
    };
    format!(
        "imid: atomic slot migration {job}: migration of {} slot(s) ({}) to {} {what}",
        slots.len(),
        ranges(slots),
        String::from_utf8_lossy(destination)
    )
}

/// In the fork child that writes a Redis 8.4+ migration's snapshot of `slots` (the event that
/// asks modules for commands to send before the keys): this node's promise at the fork, as
/// `MSGID.PROMISE`, goes first. Later promises follow in the stream ([`on_migrate`]). A failure
/// is returned for the log; the bus still carries the promise.
///
/// Redis lets the source send commands of its own to the target inside the migration, ordered
/// with the slots' writes and all applied before the target takes the slots over: the source's
/// promise goes that way, once before the snapshot (here) and again with every renewal while
/// the migration lasts (`node::ids`), so the target does not depend on the bus having carried
/// the last one. Valkey's stream forwards only what has a key of a moving slot and offers no
/// such step before its snapshot; there the bus alone carries the promise.
pub(crate) fn before_snapshot(ctx: &Ctx, slots: &[u16]) -> Result<(), String> {
    let Some(&slot) = slots.first() else {
        return Ok(());
    };
    match ids::promise_to_carry() {
        Some((me, p)) => ctx.propagate_for_slot_migration(ids::PROMISE_COMMAND, slot, &me, p),
        None => Ok(()),
    }
}

/// `a-b` for the log: the first and last slot.
fn ranges(slots: &[u16]) -> String {
    match (slots.first(), slots.last()) {
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => String::from("none"),
    }
}

/// The node whose line of `CLUSTER NODES` output lists `slot` (a slot, or a `start-end` range;
/// `[slot->-node]` and `[slot-<-node]` migration markers are not ownership).
fn owner_in_nodes(text: &[u8], slot: u16) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(text).ok()?;
    text.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let id = f.next()?;
        let owns = f.skip(7).any(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
        });
        (owns && id.len() == NODE_ID_LEN).then(|| id.as_bytes().to_vec())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_of_a_slot_is_read_from_cluster_nodes() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let text = format!(
            "{a} 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 [5461->-{b}]\n\
             {b} 127.0.0.1:7002@17002 master - 0 1 2 connected 5461-10922 16000 [7-<-{a}]\n\
             {} 127.0.0.1:7003@17003 master - 0 1 3 connected\n",
            "c".repeat(40)
        );
        let t = text.as_bytes();
        assert_eq!(owner_in_nodes(t, 0), Some(a.clone().into_bytes()));
        assert_eq!(owner_in_nodes(t, 5460), Some(a.clone().into_bytes()));
        assert_eq!(
            owner_in_nodes(t, 5461),
            Some(b.clone().into_bytes()),
            "a migration marker is not ownership"
        );
        assert_eq!(owner_in_nodes(t, 7), Some(a.into_bytes()));
        assert_eq!(owner_in_nodes(t, 16000), Some(b.into_bytes()));
        assert_eq!(owner_in_nodes(t, 12000), None, "no owner");
        assert_eq!(owner_in_nodes(b"\xff\xfe", 0), None, "not text");
        assert_eq!(
            owner_in_nodes(b"short 1:1@2 master - 0 0 1 connected 0-16383", 0),
            None
        );
    }

    #[test]
    fn the_sources_log_line_names_the_slots_and_the_destination() {
        // (carrying the promise is `promises`' one test: its statics are process-wide)
        let d = [b'd'; NODE_ID_LEN];
        let line = migrate_line(Phase::Started, "t1", &[7, 8, 100], &d);
        assert_eq!(
            line,
            format!(
                "imid: atomic slot migration t1: migration of 3 slot(s) (7-100) to {} started \
                 (this node's promise goes with it)",
                "d".repeat(40)
            )
        );
        assert!(migrate_line(Phase::Aborted, "t1", &[], &d)
            .ends_with("(none) to dddddddddddddddddddddddddddddddddddddddd failed"));
    }
}
