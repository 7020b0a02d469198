//! The gate's state: what every call reads without the lock ([`PUBLISHED`]), the event loop's side
//! ([`LOOP`]: timers, the before-sleep event), the `INFO imid` counters ([`COUNTS`]), and the
//! bookkeeping behind the lock ([`State`]: the waiting calls, the replicas' book, the AOF's
//! points); [`publish`] copies what the acknowledgers hold for the calls, [`release_ready`]
//! releases the calls whose needs are met.

use crate::config::seq_gap;
use crate::core::durable::{Local, Points};
use crate::core::fence::{Book, Missing, Queue};
use crate::host::fence::{Blocked, Timer};
use crate::host::{Ctx, Reply};
use crate::node::Counter;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// What a released call gets, handed to Redis with its client ([`Blocked::unblock`]): the reply
/// callback writes it ([`reply_released`]), the free callback drops it ([`freed`]).
pub(crate) struct Released {
    pub(super) what: Unblocked,
    /// The reply callback ran (its client was still there).
    pub(super) replied: Cell<bool>,
}

impl Released {
    fn boxed(what: Unblocked) -> Box<Released> {
        Box::new(Released {
            what,
            replied: Cell::new(false),
        })
    }
}

/// Unblocks a waiting call's client with `what`.
pub(super) fn release(bc: Blocked, what: Unblocked) {
    bc.unblock(Released::boxed(what));
}

/// What a released call gets.
pub(crate) enum Unblocked {
    /// What it waited for is held: its reply.
    Ready(Reply),
    /// Its deadline passed first, this still missing.
    TimedOut(Missing),
    /// This node stopped being a primary first.
    Demoted,
    /// Fewer replicas than required are online (online, required): no acknowledgement can come.
    TooFew(usize, u64),
    /// Not a fenced call: FENCE.FORGET of this address, after its probe found this.
    Forget(String, crate::host::probe::Probe),
}

/// What every call reads without the lock: whether the gate is on (either acknowledger), the
/// fence alone, the node's count of sequence increases, and what both acknowledgers hold as
/// of their last change ([`publish`]).
pub(super) struct Published {
    pub(super) active: AtomicBool,
    /// The replicas of the primary's term count (the fence): on while `imid.fence-replicas`
    /// (`auto`: the server's `min-replicas-to-write`) is above 0 and this node is a primary; a
    /// replica holds what it acknowledged, or (`imid.fence-ack fsynced`, where it reports it)
    /// what it fsynced ([`super::term::follow_term`]).
    pub(super) fence: AtomicBool,
    /// The node's own AOF counts (`node::durable`): on a primary, with `appendfsync everysec`,
    /// and with `always` while Redis skips its fsyncs for a child.
    pub(super) aof: AtomicBool,
    pub(super) advanced: AtomicU64,
    /// The node's count may reach this at once (the lower of the acknowledgers' limits).
    pub(super) limit: AtomicU64,
    /// Past this count a round is due: the replicas' budget half used, or (while the
    /// before-sleep event that samples the AOF is not subscribed) the AOF's.
    pub(super) renew_at: AtomicU64,
    pub(super) msgid_acked: AtomicU64,
    pub(super) uid_acked: AtomicU64,
    pub(super) skips: AtomicU64,
    /// Since when the longest-gone member is gone, [`NONE`] for none.
    pub(super) gone_since: AtomicU64,
    /// Promoted while following a primary it had not synced from (`super::follow`): nothing
    /// goes out; the limits below are held at 0 so that every call takes the slow path.
    pub(super) stale: AtomicBool,
}

pub(super) const NONE: u64 = u64::MAX;

pub(super) static PUBLISHED: Published = Published {
    active: AtomicBool::new(false),
    fence: AtomicBool::new(false),
    aof: AtomicBool::new(false),
    advanced: AtomicU64::new(0),
    limit: AtomicU64::new(0),
    renew_at: AtomicU64::new(0),
    msgid_acked: AtomicU64::new(0),
    uid_acked: AtomicU64::new(0),
    skips: AtomicU64::new(0),
    gone_since: AtomicU64::new(NONE),
    stale: AtomicBool::new(false),
};

impl Published {
    pub(super) fn active(&self) -> bool {
        self.active.load(Relaxed)
    }
    pub(super) fn fence(&self) -> bool {
        self.fence.load(Relaxed)
    }
    pub(super) fn aof(&self) -> bool {
        self.aof.load(Relaxed)
    }
    pub(super) fn stale(&self) -> bool {
        self.stale.load(Relaxed)
    }
}

/// What the acknowledgers hold, copied for the calls: the lower of the two where both count.
pub(super) fn publish(st: &State) {
    let gap = seq_gap();
    let fence = PUBLISHED.fence().then(|| st.book.view(gap));
    let aof = PUBLISHED.aof().then(|| {
        let (m, u) = st.local.channel.ids_acked();
        (st.local.channel.limit(gap), m, u, st.local.channel.skips())
    });
    // The AOF's own renewal runs from the before-sleep event while it is subscribed: the
    // calls need arm no round for it then.
    let aof_renews = PUBLISHED.aof() && !LOOP.subscribed.load(Relaxed);
    let renew = [
        PUBLISHED.fence().then(|| st.book.channel.renew_at(gap)),
        aof_renews.then(|| st.local.channel.renew_at(gap)),
    ];
    let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(x), Some(y)) => x.min(y),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 0,
    };
    PUBLISHED
        .limit
        .store(min(fence.map(|v| v.limit), aof.map(|a| a.0)), Relaxed);
    PUBLISHED.renew_at.store(
        if renew == [None, None] {
            u64::MAX
        } else {
            min(renew[0], renew[1])
        },
        Relaxed,
    );
    PUBLISHED
        .msgid_acked
        .store(min(fence.map(|v| v.msgid_acked), aof.map(|a| a.1)), Relaxed);
    PUBLISHED
        .uid_acked
        .store(min(fence.map(|v| v.uid_acked), aof.map(|a| a.2)), Relaxed);
    let skips = fence.map_or(0, |v| v.skips) + aof.map_or(0, |a| a.3);
    PUBLISHED.skips.store(skips as u64, Relaxed);
    PUBLISHED
        .gone_since
        .store(fence.and_then(|v| v.gone_since).unwrap_or(NONE), Relaxed);
    if PUBLISHED.stale() {
        PUBLISHED.limit.store(0, Relaxed);
        PUBLISHED.msgid_acked.store(0, Relaxed);
        PUBLISHED.uid_acked.store(0, Relaxed);
    }
}

/// The event loop's side: a one-shot round timer is armed; the deadline timer is armed, to
/// fire then ([`mono_ms`], [`NONE`]: not armed); the fsync timer is armed; the before-sleep
/// event is subscribed (only while something waits or the AOF has samples to take: it costs
/// every iteration); the loop is awake (after its after-sleep event, before its before-sleep
/// event, which then stamps a call that blocks).
pub(super) struct EventLoop {
    pub(super) timer_armed: AtomicBool,
    pub(super) deadline_at: AtomicU64,
    pub(super) fsync_armed: AtomicBool,
    pub(super) subscribed: AtomicBool,
    pub(super) awake: AtomicBool,
}

pub(super) static LOOP: EventLoop = EventLoop {
    timer_armed: AtomicBool::new(false),
    deadline_at: AtomicU64::new(NONE),
    fsync_armed: AtomicBool::new(false),
    subscribed: AtomicBool::new(false),
    awake: AtomicBool::new(false),
};

/// The gate's `INFO imid` counters.
pub(super) struct Counts {
    /// Calls that waited (their clients blocked).
    pub(super) waits: Counter,
    /// Of those, calls that waited for the AOF (alone or with the replicas).
    pub(super) aof_waits: Counter,
    /// Waiting calls answered: their reply, or the gate's error.
    pub(super) replied: Counter,
    /// Waiting calls whose client was gone when released (disconnected, killed, or unblocked
    /// by Redis itself): no reply callback ran. `waits` = `replied` + `dropped` + waiting, but
    /// for calls released in the running event loop iteration.
    pub(super) dropped: Counter,
    /// Waiting calls answered with NOREPLICAS after `imid.fence-timeout`.
    pub(super) timeouts: Counter,
    /// Waiting calls answered with NOTDURABLE after `imid.fence-timeout`.
    pub(super) aof_timeouts: Counter,
    /// Calls refused at once (they could not wait, or too few replicas are online).
    pub(super) refused: Counter,
    /// IDMP answers given inside MULTI/EXEC, a script or a function without waiting.
    pub(super) unfenced_idmp: Counter,
    /// Calls inside MULTI/EXEC, a script or a function answered once written, before their
    /// AOF's fsync (they cannot wait for it).
    pub(super) unsynced: Counter,
    /// imid's own fsyncs of the AOF, and those that failed.
    pub(super) fsyncs: Counter,
    pub(super) fsync_errors: Counter,
    /// Gap records written (`SEQ.GAP`).
    pub(super) gap_records: Counter,
}

pub(super) static COUNTS: Counts = Counts {
    waits: Counter::new(),
    aof_waits: Counter::new(),
    replied: Counter::new(),
    dropped: Counter::new(),
    timeouts: Counter::new(),
    aof_timeouts: Counter::new(),
    refused: Counter::new(),
    unfenced_idmp: Counter::new(),
    unsynced: Counter::new(),
    fsyncs: Counter::new(),
    fsync_errors: Counter::new(),
    gap_records: Counter::new(),
};

pub(super) struct State {
    pub(super) queue: Queue<(Blocked, Reply)>,
    pub(super) book: Book,
    pub(super) local: Local,
    /// The offset every replica of the term holds, as the last round found (`None`: nothing).
    pub(super) fence_acked: Option<u64>,
    /// The last fsync that failed, for the error and the log.
    pub(super) fsync_error: Option<String>,
    /// Everything the node's count reached is fsynced up to this count (the AOF fsynced at
    /// the end of a load, or `appendfsync always`), for when the AOF's gate comes on.
    pub(super) durable_until: Option<u64>,
    /// What each replica's client reported with its last `REPLCONF ACK ... FACK ...`: its
    /// client id, acknowledged and fsynced offsets, and when (ms).
    pub(super) facks: Vec<(u64, u64, u64, u64)>,
    /// This node is a primary (set at load, then by role changes).
    pub(super) primary: bool,
    /// How many replicas must be online (`imid.fence-replicas`, `auto` resolved).
    pub(super) required: u64,
    /// `min-replicas-to-write` as last read with a client (at load, by the cron, at a role
    /// change), for `auto`: a config's apply callback has none to read it with.
    pub(super) min_replicas: u64,
    /// `load` ran: the configs' apply callback may follow them from then on.
    pub(super) loaded: bool,
    /// The primary this node follows, and whether it is stale (`super::follow`).
    pub(super) follow: Follow,
}

/// What this node follows, as the fence keeps it (`super::follow`).
#[derive(Debug, Default)]
pub(super) struct Follow {
    /// The primary it synced from last (`ip:port`); `Some("")` for a primary's own data
    /// (demoted, not synced since); `None` until the first reading after load.
    pub(super) synced_from: Option<String>,
    /// The primary it follows now, and whether it has not synced from it.
    pub(super) following: Option<String>,
    pub(super) unsynced: bool,
    /// Promoted while following a primary it had not synced from: that primary's address.
    pub(super) stale: Option<String>,
    /// The failover settings imid holds while unsynced, and the values to give back.
    pub(super) held: Option<Held>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    /// `replica-priority` before imid set 0 (`None`: it was 0 already).
    pub(super) priority: Option<u64>,
    /// `cluster-replica-no-failover` was `no` and imid set `yes`.
    pub(super) no_failover: bool,
}

impl Follow {
    pub(super) const fn new() -> Follow {
        Follow {
            synced_from: None,
            following: None,
            unsynced: false,
            stale: None,
            held: None,
        }
    }
}

pub(super) static STATE: Mutex<State> = Mutex::new(State {
    queue: Queue::new(),
    book: Book::new(),
    local: Local::new(),
    fence_acked: None,
    fsync_error: None,
    durable_until: Some(0),
    facks: Vec::new(),
    primary: true,
    required: 0,
    min_replicas: 0,
    loaded: false,
    follow: Follow::new(),
});

pub(super) fn state() -> MutexGuard<'static, State> {
    // Main thread only: never contended; a poisoned lock was caught by the guard already and
    // the state is consistent between statements.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// Whether the replicas of the term hold every sequence increase up to `advanced`.
    pub(super) fn fence_acked_count_covers(&self, advanced: u64) -> bool {
        self.book.channel.acked().is_some_and(|a| a >= advanced)
    }
}

/// Subscribes to the before-sleep event, unless subscribed.
pub(super) fn subscribe(ctx: &Ctx) {
    if !LOOP.subscribed.load(Relaxed) && ctx.subscribe_before_sleep(true) {
        LOOP.subscribed.store(true, Relaxed);
        publish(&state());
    }
}

/// Arms the deadline timer for the earliest deadline of a waiting call, unless one is armed to
/// fire by then already.
pub(super) fn arm_deadline(ctx: &Ctx) {
    let Some(due) = state().queue.next_deadline() else {
        return;
    };
    if LOOP.deadline_at.load(Relaxed) <= due {
        return;
    }
    if ctx.arm_timer(due.saturating_sub(mono_ms()), Timer::Deadline) {
        LOOP.deadline_at.store(due, Relaxed);
    }
}

/// Whether the fence is on here.
pub(crate) fn active() -> bool {
    PUBLISHED.fence()
}

/// A monotonic clock in ms (since its first read) for the deadlines and the GETACK pacing:
/// never the IDs' clock (`node::now_ms`), whose steps must not time waiting calls out early.
pub(super) fn mono_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let elapsed = START.get_or_init(std::time::Instant::now).elapsed();
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

/// Arms the one-shot round timer, unless it is armed already.
pub(super) fn arm_tick(ctx: &Ctx) {
    if !LOOP.timer_armed.swap(true, Relaxed) && !ctx.arm_timer(0, Timer::Round) {
        LOOP.timer_armed.store(false, Relaxed);
    }
}

/// The calls whose needs are met, released.
pub(super) fn release_ready(st: &mut State) {
    let acked = if PUBLISHED.fence() {
        st.fence_acked
    } else {
        Some(u64::MAX)
    };
    let points = if PUBLISHED.aof() {
        st.local.points()
    } else {
        Points {
            written: u64::MAX,
            fsynced: u64::MAX,
        }
    };
    for (bc, reply) in st.queue.take_ready(acked, points) {
        release(bc, Unblocked::Ready(reply));
    }
}

/// An fsync failed: counted, logged once per kind of failure, and the waiting calls time out
/// as they would on a disk that never completes (they say why).
pub(super) fn fsync_failed(ctx: &Ctx, why: String) {
    COUNTS.fsync_errors.add(1);
    let mut st = state();
    if st.fsync_error.as_deref() != Some(why.as_str()) {
        ctx.log_warning(&format!(
            "imid: fsync of the AOF failed ({why}): values wait until one succeeds"
        ));
        st.fsync_error = Some(why);
    }
}
