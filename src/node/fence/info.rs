//! The gate's `INFO imid` fields.

use super::state::{state, COUNTS, PUBLISHED};
use crate::node::durable;
use std::sync::atomic::Ordering::Relaxed;

/// The `INFO imid` fields of the gate, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 23] {
    let (waiting, members, online, shared, required, fence_used, aof_used, round) = {
        let st = state();
        let m = &st.book.members;
        let n = |v: usize| v as u64;
        let adv = PUBLISHED.advanced.load(Relaxed);
        let used = |acked: Option<u64>| acked.map_or(0, |a| adv.saturating_sub(a));
        (
            n(st.queue.len()),
            n(m.len()),
            n(m.online()),
            n(m.shared()),
            st.required,
            used(st.book.channel.acked()),
            used(st.local.channel.acked()),
            st.local.round_ms().unwrap_or(0),
        )
    };
    let fence = PUBLISHED.fence();
    let aof = PUBLISHED.aof();
    [
        ("fence_replicas", if fence { required } else { 0 }),
        ("fence_term_replicas", members),
        ("fence_term_replicas_online", online),
        ("fence_term_shared_addrs", shared),
        ("fence_stale", u64::from(PUBLISHED.stale())),
        ("fence_failover_held", u64::from(super::follow::holding())),
        ("fence_waits", COUNTS.waits.get()),
        ("fence_waiting", waiting),
        ("fence_replied", COUNTS.replied.get()),
        ("fence_dropped", COUNTS.dropped.get()),
        ("fence_timeouts", COUNTS.timeouts.get()),
        ("fence_refused", COUNTS.refused.get()),
        ("fence_unfenced_idmp", COUNTS.unfenced_idmp.get()),
        ("durable_unsynced", COUNTS.unsynced.get()),
        ("fence_budget_used", if fence { fence_used } else { 0 }),
        ("durable_waits", COUNTS.aof_waits.get()),
        ("durable_timeouts", COUNTS.aof_timeouts.get()),
        ("durable_budget_used", if aof { aof_used } else { 0 }),
        ("durable_fsyncs", COUNTS.fsyncs.get()),
        ("durable_fsync_errors", COUNTS.fsync_errors.get()),
        ("durable_fsync_ms", round),
        ("seq_gap_records", COUNTS.gap_records.get()),
        ("seq_rate_per_s", durable::rate_per_s()),
    ]
}
