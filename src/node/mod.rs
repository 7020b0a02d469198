//! Node-wide state, below the data types and the command families: the clock, whether this node
//! inherited its data, the counters `INFO imid` reports; the ID generators with their time
//! leases (`ids`); the IDMP clock (`idmp_clock`); slot adoption in cluster mode (`promises`, the
//! book of what peers promised, and `cluster`, what the cluster tells this node); atomic slot
//! migration, Valkey 9's and Redis 8.4+'s (`migration`); what each server event does
//! (`events`); what a crash could take back since the last snapshot (`exposure`); the fence
//! (`fence`); and, in a test build, the steerable clock and armed panics (`test_hooks`). It
//! imports `error`, the core, `host` and the configs; nothing above it.

pub(crate) mod cluster;
pub(crate) mod durable;
pub(crate) mod events;
pub(crate) mod exposure;
pub(crate) mod fence;
pub(crate) mod idmp_clock;
pub(crate) mod ids;
pub(crate) mod migration;
pub(crate) mod promises;
#[cfg(feature = "test-hooks")]
pub(crate) mod test_hooks;

use crate::core::seq::Seq;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The wall clock the generators read: the system clock, or the tests' steerable clock in a
/// build with the `test-hooks` feature.
pub(crate) fn now_ms() -> u64 {
    #[cfg(feature = "test-hooks")]
    return test_hooks::now_ms();
    #[cfg(not(feature = "test-hooks"))]
    crate::host::clock::system_now_ms()
}

/// Set once this process has loaded data it did not write itself: an RDB or AOF at startup,
/// a full sync from a primary, or a change of replication role. From then on a sequence key
/// that is missing may be one whose writes were lost (created after the snapshot, or after
/// the last write that reached this replica), so it is treated like a loaded key at 0: its
/// first SEQ.NEXT skips the gap. A node that started empty and was never a replica starts
/// new sequences at 1. Never cleared: a lost key can be used again at any later time.
static INHERITED: AtomicBool = AtomicBool::new(false);

/// Called from the loading and role-change server events (`events`).
pub(crate) fn mark_inherited() {
    INHERITED.store(true, Ordering::Relaxed);
}

pub(crate) fn inherited() -> bool {
    INHERITED.load(Ordering::Relaxed)
}

/// The state a write starts from when the sequence (a key, a map field) is missing: 0, marked
/// for the gap when this node inherited its data ([`inherited`]).
#[inline]
pub(crate) fn missing() -> Seq {
    Seq::new(0, inherited()).unwrap_or_default()
}

/// A counter for `INFO imid`. Commands run on Redis's main thread; atomics keep the statics
/// `Sync` at no real cost.
pub(crate) struct Counter(AtomicU64);

impl Counter {
    pub(crate) const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Default for Counter {
    fn default() -> Self {
        Counter::new()
    }
}

/// Values handed out by SEQ.NEXT (the sum of the counts).
pub(crate) static SEQ_ISSUED: Counter = Counter::new();
/// First NEXTs that skipped `imid.seq-gap` values after a load or a replication.
pub(crate) static SEQ_GAP_SKIPS: Counter = Counter::new();
pub(crate) static OPENID_ENCODED: Counter = Counter::new();
pub(crate) static OPENID_DECODED: Counter = Counter::new();
pub(crate) static OPENID_REJECTED: Counter = Counter::new();
