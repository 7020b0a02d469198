//! Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`): what the importing node does at
//! each phase of an import. The module option is declared in `host::server`; the subscription
//! and the raw event are in `entry::migration`.
//!
//! The migration runs no `CLUSTER SETSLOT`: the source sends the slots' keys to the target as an
//! AOF-format snapshot (the sequence type's `aof_rewrite`: `SEQ.SET key value`), then streams
//! the writes to those slots, pauses its writers, and the target claims the slots. Valkey runs
//! the snapshot and the stream as a replicated client, so sequences arrive marked for the gap
//! and streamed `SEQ.NEXT` calls replay exactly; what the event adds is slot adoption
//! (`node::cluster`): the importing node follows the source from the import's start, raises its
//! floors to the source's promise when it takes the slots over, and stops following it when the
//! import is cancelled or fails. The source needs nothing: it is the old owner.

use crate::host::cluster::NODE_ID_LEN;
use crate::host::Ctx;
use crate::node::{cluster, promises};

/// A phase of an import, on the importing node (and on its replicas, which follow it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Started,
    Completed,
    Aborted,
}

/// Applies `phase` of the import `job` of `slots`; returns the line to log.
pub(crate) fn on_import(ctx: &Ctx, phase: Phase, job: &str, slots: &[u16]) -> String {
    // The event names no source. When the import starts, Valkey has just checked that the
    // slots' owner in this node's view is the source.
    let source = match (phase, slots.first()) {
        (Phase::Started, Some(&s)) => ctx
            .call_text(c"CLUSTER", c"NODES")
            .and_then(|nodes| owner_in_nodes(&nodes, s)),
        _ => None,
    };
    for &s in slots {
        match phase {
            Phase::Started => promises::import_started(s, source.as_deref()),
            Phase::Completed => cluster::import_finished(s),
            Phase::Aborted => promises::import_cancelled(s),
        }
    }
    let range = match (slots.first(), slots.last()) {
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => String::from("none"),
    };
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
        "imid: atomic slot migration {job}: import {what} for {} slot(s) ({range}){from}",
        slots.len()
    )
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
}
