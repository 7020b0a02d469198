//! The gate (docs/durability.md, "The fence" and "Durable before use"): a node hands out nothing
//! that the place a failover or a restart reads from does not hold. Two acknowledgers count:
//! - the replicas of the primary's term (the fence): on while `imid.fence-replicas` (`auto`:
//!   the server's `min-replicas-to-write`) is above 0 and this node is a primary; a replica
//!   holds what it acknowledged, or (`imid.fence-ack fsynced`, where it reports it) what it
//!   fsynced;
//! - the node's own AOF (`node::durable`): on with `appendfsync everysec`, and with `always`
//!   while Redis skips its fsyncs for a child.
//!
//! A call says what it hands out ([`Need`]); [`check`] lets it answer now, makes it wait, or
//! refuses it before it changes anything, and [`Verdict::answer`] replies or blocks the client
//! until what it waits for is held (`NOREPLICAS` or `NOTDURABLE` after `imid.fence-timeout`).
//! Inside MULTI, a script or a function nothing can wait, so such a call is refused instead. A
//! waiting call is answered by one path only: the round that releases it, times it out or finds
//! the node demoted unblocks it, and the reply callback writes what that round decided; Redis
//! keeps no timeout of its own for it (`host::fence`, `Ctx::block`).
//!
//! The bookkeeping is Redis-free: `core::fence::Book` for the replicas, `core::durable::Local`
//! for the AOF, each counting a `core::fence::Channel`, and the waiting calls'
//! `core::fence::Queue`. Here are their Redis side and when they run: a fence round ([`tick`])
//! reads `ROLE`, releases what the replicas hold and asks them for more (`REPLCONF GETACK *`);
//! the AOF's samples are taken before the event loop sleeps, where Redis cannot postpone its
//! write, and fsynced by imid's own thread (`host::aof`). Rounds run before the event loop
//! sleeps while something waits, from one-shot timers, and from the cron. Everything but the
//! fsync itself runs on Redis's main thread.

use super::{durable, Counter};
use crate::config::{
    fence_timeout_ms, seq_gap, FenceReplicas, CLUSTER_MODE, FENCE_ACK, FENCE_REPLICAS,
};
use crate::core::durable::{Level, Local, Points};
pub(crate) use crate::core::fence::Lease;
use crate::core::fence::{
    gone_at, info_replica, replicating_elsewhere, Book, ForgetError, Member, Members, Missing,
    Queue, Reading, Wait,
};
use crate::error::Error;
use crate::host::aof::FSYNCER;
use crate::host::fence::{Blocked, Timer};
use crate::host::server::ServerInfo;
use crate::host::{Answer, Ctx, Reply};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// What a call hands out, for [`check`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Need {
    /// How many sequence values the call reserves (a gap skip is charged to its target).
    pub(crate) advance: u64,
    /// The call skipped the gap on its target: it waits for its own write, and so does every
    /// later call on that target until the acknowledgers hold it (a promoted replica, or a
    /// restart, without the skip would hand out the same values).
    pub(crate) skip: bool,
    /// The target's id ([`target_id`]) when the call skipped or skips are pending.
    pub(crate) target: Option<u64>,
    /// An IDMP answer: the token's record must be held before it goes out.
    pub(crate) record: bool,
    /// The time of the last message ID handed out.
    pub(crate) msgid_ms: Option<u64>,
    /// The time of the last UID handed out.
    pub(crate) uid_ms: Option<u64>,
}

impl Need {
    /// An IDMP answer alone (a retry's): its record must be held.
    pub(crate) const RETRY: Need = Need {
        advance: 0,
        skip: false,
        target: None,
        record: true,
        msgid_ms: None,
        uid_ms: None,
    };

    /// This need and the IDs the call hands out: a message ID of time `msgid_ms`, UIDs up to
    /// time `uid_ms`.
    pub(crate) fn with_ids(self, msgid_ms: Option<u64>, uid_ms: Option<u64>) -> Need {
        Need {
            msgid_ms,
            uid_ms,
            ..self
        }
    }
}

/// Whether a call replies now, or waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Now,
    Wait(Wait),
}

impl Verdict {
    /// The reply of a call [`check`] let through, after its writes: written now, or kept
    /// while its client waits.
    #[inline(always)]
    pub(crate) fn answer(self, ctx: &Ctx, reply: &(impl Answer + ?Sized)) -> Result<(), Error> {
        match self {
            Verdict::Now => {
                reply.write(ctx);
                Ok(())
            }
            Verdict::Wait(w) => wait(ctx, w, reply.keep()),
        }
    }
}

/// What a released call gets, handed to Redis with its client ([`Blocked::unblock`]): the reply
/// callback writes it ([`reply_released`]), the free callback drops it ([`freed`]).
pub(crate) struct Released {
    what: Unblocked,
    /// The reply callback ran (its client was still there).
    replied: Cell<bool>,
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
fn release(bc: Blocked, what: Unblocked) {
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
}

/// What every call reads without the lock: whether the gate is on (either acknowledger), the
/// fence alone, the node's count of sequence increases, and what both acknowledgers hold as
/// of their last change ([`publish`]).
struct Hot {
    active: AtomicBool,
    fence: AtomicBool,
    aof: AtomicBool,
    advanced: AtomicU64,
    /// The node's count may reach this at once (the lower of the acknowledgers' limits).
    limit: AtomicU64,
    /// Past this count a round is due: the replicas' budget half used, or (while the
    /// before-sleep event that samples the AOF is not subscribed) the AOF's.
    renew_at: AtomicU64,
    msgid_acked: AtomicU64,
    uid_acked: AtomicU64,
    skips: AtomicU64,
    /// Since when the longest-gone member is gone, [`NONE`] for none.
    gone_since: AtomicU64,
}

const NONE: u64 = u64::MAX;

static HOT: Hot = Hot {
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
};

impl Hot {
    fn active(&self) -> bool {
        self.active.load(Relaxed)
    }
    fn fence(&self) -> bool {
        self.fence.load(Relaxed)
    }
    fn aof(&self) -> bool {
        self.aof.load(Relaxed)
    }
}

/// What the acknowledgers hold, copied for the calls: the lower of the two where both count.
fn publish(st: &State) {
    let gap = seq_gap();
    let fence = HOT.fence().then(|| st.book.view(gap));
    let aof = HOT.aof().then(|| {
        let (m, u) = st.local.channel.ids_acked();
        (st.local.channel.limit(gap), m, u, st.local.channel.skips())
    });
    // The AOF's own renewal runs from the before-sleep event while it is subscribed: the
    // calls need arm no round for it then.
    let aof_renews = HOT.aof() && !LOOP.subscribed.load(Relaxed);
    let renew = [
        HOT.fence().then(|| st.book.channel.renew_at(gap)),
        aof_renews.then(|| st.local.channel.renew_at(gap)),
    ];
    let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(x), Some(y)) => x.min(y),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 0,
    };
    HOT.limit
        .store(min(fence.map(|v| v.limit), aof.map(|a| a.0)), Relaxed);
    HOT.renew_at.store(
        if renew == [None, None] {
            u64::MAX
        } else {
            min(renew[0], renew[1])
        },
        Relaxed,
    );
    HOT.msgid_acked
        .store(min(fence.map(|v| v.msgid_acked), aof.map(|a| a.1)), Relaxed);
    HOT.uid_acked
        .store(min(fence.map(|v| v.uid_acked), aof.map(|a| a.2)), Relaxed);
    let skips = fence.map_or(0, |v| v.skips) + aof.map_or(0, |a| a.3);
    HOT.skips.store(skips as u64, Relaxed);
    HOT.gone_since
        .store(fence.and_then(|v| v.gone_since).unwrap_or(NONE), Relaxed);
}

/// The event loop's side: a one-shot round timer is armed; the deadline timer is armed, to
/// fire then ([`mono_ms`], [`NONE`]: not armed); the fsync timer is armed; the before-sleep
/// event is subscribed (only while something waits or the AOF has samples to take: it costs
/// every iteration); the loop is awake (after its after-sleep event, before its before-sleep
/// event, which then stamps a call that blocks).
struct EventLoop {
    timer_armed: AtomicBool,
    deadline_at: AtomicU64,
    fsync_armed: AtomicBool,
    subscribed: AtomicBool,
    awake: AtomicBool,
}

static LOOP: EventLoop = EventLoop {
    timer_armed: AtomicBool::new(false),
    deadline_at: AtomicU64::new(NONE),
    fsync_armed: AtomicBool::new(false),
    subscribed: AtomicBool::new(false),
    awake: AtomicBool::new(false),
};

/// The gate's `INFO imid` counters.
struct Counts {
    /// Calls that waited (their clients blocked).
    waits: Counter,
    /// Of those, calls that waited for the AOF (alone or with the replicas).
    aof_waits: Counter,
    /// Waiting calls answered: their reply, or the gate's error.
    replied: Counter,
    /// Waiting calls whose client was gone when released (disconnected, killed, or unblocked
    /// by Redis itself): no reply callback ran. `waits` = `replied` + `dropped` + waiting, but
    /// for calls released in the running event loop iteration.
    dropped: Counter,
    /// Waiting calls answered with NOREPLICAS after `imid.fence-timeout`.
    timeouts: Counter,
    /// Waiting calls answered with NOTDURABLE after `imid.fence-timeout`.
    aof_timeouts: Counter,
    /// Calls refused at once (they could not wait, or too few replicas are online).
    refused: Counter,
    /// IDMP answers given inside MULTI/EXEC, a script or a function without waiting.
    unfenced_idmp: Counter,
    /// Calls inside MULTI/EXEC, a script or a function answered once written, before their
    /// AOF's fsync (they cannot wait for it).
    unsynced: Counter,
    /// imid's own fsyncs of the AOF, and those that failed.
    fsyncs: Counter,
    fsync_errors: Counter,
    /// Gap records written (`SEQ.GAP`).
    gap_records: Counter,
}

static COUNTS: Counts = Counts {
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

struct State {
    queue: Queue<(Blocked, Reply)>,
    book: Book,
    local: Local,
    /// The offset every replica of the term holds, as the last round found (`None`: nothing).
    fence_acked: Option<u64>,
    /// The last fsync that failed, for the error and the log.
    fsync_error: Option<String>,
    /// Everything the node's count reached is fsynced up to this count (the AOF fsynced at
    /// the end of a load, or `appendfsync always`), for when the AOF's gate comes on.
    durable_until: Option<u64>,
    /// What each replica's client reported with its last `REPLCONF ACK ... FACK ...`: its
    /// client id, acknowledged and fsynced offsets, and when (ms).
    facks: Vec<(u64, u64, u64, u64)>,
    /// This node is a primary (set at load, then by role changes).
    primary: bool,
    /// How many replicas must be online (`imid.fence-replicas`, `auto` resolved).
    required: u64,
    /// `min-replicas-to-write` as last read with a client (at load, by the cron, at a role
    /// change), for `auto`: a config's apply callback has none to read it with.
    min_replicas: u64,
    /// `load` ran: the configs' apply callback may follow them from then on.
    loaded: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
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
});

fn state() -> MutexGuard<'static, State> {
    // Main thread only: never contended; a poisoned lock was caught by the guard already and
    // the state is consistent between statements.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- The calls ----

/// May the call reply now, must it wait, or is it refused (nothing may change then)? On `Ok`
/// its sequence increase is counted, and the caller makes its writes, then answers. One load
/// when the gate is off; the rest out of line, so that what the callers inline stays that load.
#[inline(always)]
pub(crate) fn check(ctx: &Ctx, need: Need) -> Result<Verdict, Error> {
    if !HOT.active() {
        return Ok(Verdict::Now);
    }
    // The common case, inlined (the caller's constant fields fold away): values within the
    // budget, no record, no IDs, no gap skip anywhere.
    if !need.record
        && !need.skip
        && need.msgid_ms.is_none()
        && need.uid_ms.is_none()
        && HOT.skips.load(Relaxed) == 0
    {
        let now = HOT.advanced.load(Relaxed).saturating_add(need.advance);
        if now <= HOT.limit.load(Relaxed) {
            HOT.advanced.store(now, Relaxed);
            renew_past_half(ctx, now);
            return Ok(Verdict::Now);
        }
    }
    check_on(ctx, need)
}

/// [`check`] with the gate on.
#[inline(never)]
fn check_on(ctx: &Ctx, need: Need) -> Result<Verdict, Error> {
    let adv = HOT.advanced.load(Relaxed);
    let limit = HOT.limit.load(Relaxed);
    let seq_ok = need.advance == 0 || adv.saturating_add(need.advance) <= limit;
    let ids_ok = need
        .msgid_ms
        .is_none_or(|t| t < HOT.msgid_acked.load(Relaxed))
        && need.uid_ms.is_none_or(|t| t < HOT.uid_acked.load(Relaxed));
    // Its target's gap skip (this call's, or an earlier one not yet held).
    let skip = need.skip || need.target.is_some_and(skip_pending);
    // A record: the replicas must acknowledge its write; the AOF must not postpone it.
    let record_ok = !need.record || (!HOT.fence() && durable::record_now());
    if seq_ok && ids_ok && !skip && record_ok {
        let now = adv.saturating_add(need.advance);
        HOT.advanced.store(now, Relaxed);
        renew_past_half(ctx, now);
        return Ok(Verdict::Now);
    }
    wait_or_refuse(ctx, need)
}

/// May a read of what the gate protects (IM.SYNC's messages and seqs, IM.PULL's changes)
/// answer now? With the fence, only when every sequence increase this node made is
/// acknowledged by the replicas of its term (a message or a change is written by the call
/// that raised its seq, so its write is acknowledged then too); with the AOF, only where Redis
/// cannot postpone the write of what the read shows. Otherwise the read waits as a call that
/// hands values out does, and its reply, made now, goes out once what it shows is held, or the
/// gate's error after `imid.fence-timeout`. Refused where it cannot wait (MULTI, a script, a
/// function), or at once when a replica of the term is gone. Off, or on a replica: now.
#[inline(always)]
pub(crate) fn check_read(ctx: &Ctx) -> Result<Verdict, Error> {
    if !HOT.active() || ctx.is_replay() {
        return Ok(Verdict::Now);
    }
    read_check(ctx)
}

#[inline(never)]
fn read_check(ctx: &Ctx) -> Result<Verdict, Error> {
    let replicas = HOT.fence() && !state().fence_acked_count_covers(HOT.advanced.load(Relaxed));
    let aof = HOT.aof() && !durable::written_now();
    if !replicas && !aof {
        return Ok(Verdict::Now);
    }
    if !ctx.can_block() {
        COUNTS.refused.add(1);
        return Err(if replicas {
            cannot_wait()
        } else {
            aof_cannot_wait()
        });
    }
    if replicas {
        if let Some(e) = gone_too_long() {
            COUNTS.refused.add(1);
            return Err(e);
        }
    }
    let wait = Wait {
        replicas,
        aof: aof.then(|| (state().local.next_point(), Level::Written)),
    };
    Ok(Verdict::Wait(wait))
}

impl State {
    /// Whether the replicas of the term hold every sequence increase up to `advanced`.
    fn fence_acked_count_covers(&self, advanced: u64) -> bool {
        self.book.channel.acked().is_some_and(|a| a >= advanced)
    }
}

/// Whether calls must look their target up ([`Need::target`]): gap skips are pending.
#[inline(always)]
pub(crate) fn skips_pending() -> bool {
    HOT.skips.load(Relaxed) > 0
}

/// The id a target's skip is recorded under: a hash of the key's name and the map's field
/// (a collision only makes another target wait too).
pub(crate) fn target_id(key: &[u8], field: Option<&[u8]>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    field.hash(&mut h);
    h.finish()
}

#[cold]
#[inline(never)]
fn skip_pending(id: u64) -> bool {
    if !skips_pending() {
        return false;
    }
    let st = state();
    (HOT.fence() && st.book.channel.skip_pending(id))
        || (HOT.aof() && st.local.channel.skip_pending(id))
}

/// Half the budget used (the node's count `now` past the acknowledgers' renewal point):
/// refresh it before a call has to wait.
#[inline(always)]
fn renew_past_half(ctx: &Ctx, now: u64) {
    if now > HOT.renew_at.load(Relaxed) {
        arm_tick(ctx);
    }
}

/// The node's count after a call that skipped the gap on its target (`id`) and hands out
/// `advance` values: counted at least once, so that a sample (and its acknowledgement) covers
/// the skip; charged to the target with each acknowledger on.
fn count_skip(id: Option<u64>, advance: u64) -> u64 {
    let count = HOT.advanced.load(Relaxed).saturating_add(advance.max(1));
    let gap = seq_gap();
    let mut st = state();
    let mut now = count;
    if HOT.fence() {
        now = now.max(st.book.channel.charge_skip(id, count, gap));
    }
    if HOT.aof() {
        now = now.max(st.local.channel.charge_skip(id, count, gap));
    }
    publish(&st);
    now
}

/// Whether a call that skips the gap here must store the skip alone: it cannot wait (inside
/// MULTI, a script or a function) for the replicas, so it stores and replicates only the skip
/// and is refused ([`skip_refused`]); its retry, once the replicas hold the skip, answers.
/// Refused with nothing changed, such a target could never advance from a script. (The AOF's
/// part of a skip goes once written, as any value inside a script: [`check`].)
pub(crate) fn store_skip_alone(ctx: &Ctx) -> bool {
    HOT.fence() && !ctx.is_replay() && !ctx.can_block()
}

/// [`store_skip_alone`]'s skip was stored and replicated: charged to its target (`id`).
pub(crate) fn charge_stored_skip(ctx: &Ctx, id: u64) {
    COUNTS.refused.add(1);
    HOT.advanced.store(count_skip(Some(id), 0), Relaxed);
    arm_tick(ctx);
}

/// What a call that cannot answer at once waits for, from each acknowledger on: the replicas
/// when their budget, lease, a skip or a record needs them; the AOF, fsynced for a value (the
/// budget, a lease, a skip), written (or, unsynced under `always`, fsynced) for a record.
fn what_to_wait_for(need: Need) -> Wait {
    let adv = HOT.advanced.load(Relaxed);
    let gap = seq_gap();
    let st = state();
    let beyond = |limit: u64, (m, u): (u64, u64), skip: bool| {
        (need.advance > 0 && adv.saturating_add(need.advance) > limit)
            || need.msgid_ms.is_some_and(|t| t >= m)
            || need.uid_ms.is_some_and(|t| t >= u)
            || skip
    };
    let skip_of = |pending: bool| need.skip || need.target.is_some() && pending;
    let replicas = HOT.fence() && {
        let c = &st.book.channel;
        let skip = skip_of(need.target.is_some_and(|t| c.skip_pending(t)));
        need.record || beyond(c.limit(gap), c.ids_acked(), skip)
    };
    let aof = HOT.aof().then(|| {
        let c = &st.local.channel;
        let skip = skip_of(need.target.is_some_and(|t| c.skip_pending(t)));
        if beyond(c.limit(gap), c.ids_acked(), skip) {
            Some(Level::Fsynced)
        } else if need.record && !durable::record_now() {
            durable::record_level()
        } else {
            None
        }
    });
    Wait {
        replicas,
        aof: aof.flatten().map(|level| (st.local.next_point(), level)),
    }
}

/// [`check`]'s path for a call that cannot answer at once: it waits, or is refused when its
/// client cannot wait or a member is gone; a replay, and an IDMP answer within what the
/// replicas hold inside MULTI or a script, answer now.
#[cold]
#[inline(never)]
fn wait_or_refuse(ctx: &Ctx, need: Need) -> Result<Verdict, Error> {
    let wait = if ctx.is_replay() {
        // The AOF at load on a primary: it hands nothing out.
        Wait::default()
    } else {
        what_to_wait_for(need)
    };
    let verdict = if wait == Wait::default() {
        Verdict::Now
    } else if !ctx.can_block() {
        // Inside MULTI, a script or a function nothing can wait. The replicas' part goes when
        // only the record needed them (the old promise: an answer to follow with WAIT); the
        // AOF's part when Redis will write the call before its reply (a process crash keeps
        // it; a host crash may not: `WAITAOF` after it), counted in both cases.
        let replicas_ok = !wait.replicas
            || (need.record && {
                let mut n = need;
                n.record = false;
                !what_to_wait_for(n).replicas
            });
        let aof_ok = wait.aof.is_none() || durable::written_now();
        if replicas_ok && aof_ok {
            if wait.replicas {
                COUNTS.unfenced_idmp.add(1);
            }
            if wait.aof.is_some() {
                COUNTS.unsynced.add(1);
            }
            Verdict::Now
        } else {
            COUNTS.refused.add(1);
            return Err(if replicas_ok {
                aof_cannot_wait()
            } else {
                cannot_wait()
            });
        }
    } else if let Some(e) = wait.replicas.then(gone_too_long).flatten() {
        COUNTS.refused.add(1);
        return Err(e);
    } else {
        // With fewer replicas online than required, the round at the end of this iteration
        // answers it with the error.
        Verdict::Wait(wait)
    };
    let waits = matches!(verdict, Verdict::Wait(_));
    let now = if need.skip && waits {
        count_skip(need.target, need.advance)
    } else {
        HOT.advanced.load(Relaxed).saturating_add(need.advance)
    };
    HOT.advanced.store(now, Relaxed);
    // As on the fast path: IDMP answers inside MULTI or a script come only here, and without
    // this got the budget back only from the cron.
    renew_past_half(ctx, now);
    Ok(verdict)
}

/// The call waits for `w`: its client is blocked, and `reply` goes out once that is held, or
/// the gate's error after `imid.fence-timeout` (the deadline timer runs the round that times
/// it out).
fn wait(ctx: &Ctx, w: Wait, reply: Reply) -> Result<(), Error> {
    let Some(bc) = ctx.block() else {
        return Err(if w.replicas {
            cannot_wait()
        } else {
            aof_cannot_wait()
        });
    };
    COUNTS.waits.add(1);
    if w.aof.is_some() {
        COUNTS.aof_waits.add(1);
    }
    let deadline = mono_ms().saturating_add(fence_timeout_ms());
    state().queue.push((bc, reply), w, deadline);
    arm_deadline(ctx);
    subscribe(ctx);
    // Between this iteration's after-sleep and before-sleep events, the before-sleep round
    // stamps the call. Otherwise (just subscribed, a failed subscription, or a released
    // client's next command run after that event, as on Redis 7 and Valkey) the timer does.
    if !(LOOP.subscribed.load(Relaxed) && LOOP.awake.load(Relaxed)) {
        arm_tick(ctx);
    }
    Ok(())
}

/// Subscribes to the before-sleep event, unless subscribed.
fn subscribe(ctx: &Ctx) {
    if !LOOP.subscribed.load(Relaxed) && ctx.subscribe_before_sleep(true) {
        LOOP.subscribed.store(true, Relaxed);
        publish(&state());
    }
}

/// Arms the deadline timer for the earliest deadline of a waiting call, unless one is armed to
/// fire by then already.
fn arm_deadline(ctx: &Ctx) {
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
    HOT.fence()
}

/// A monotonic clock in ms (since its first read) for the deadlines and the GETACK pacing:
/// never the IDs' clock (`node::now_ms`), whose steps must not time waiting calls out early.
fn mono_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let elapsed = START.get_or_init(std::time::Instant::now).elapsed();
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

/// A lease renewal to `until` was propagated in the running call (`node::ids`).
pub(crate) fn renewed(ctx: &Ctx, lease: Lease, until: u64) {
    if HOT.active() {
        let mut st = state();
        if HOT.fence() {
            st.book.channel.renewed(lease, until);
        }
        if HOT.aof() {
            st.local.channel.renewed(lease, until);
        }
        drop(st);
        arm_tick(ctx);
    }
}

// ---- The rounds ----

/// Arms the one-shot round timer, unless it is armed already.
fn arm_tick(ctx: &Ctx) {
    if !LOOP.timer_armed.swap(true, Relaxed) && !ctx.arm_timer(0, Timer::Round) {
        LOOP.timer_armed.store(false, Relaxed);
    }
}

/// A one-shot timer fired (a context of its own, outside any event's callback): a round and the
/// deadline timer for the calls still waiting, or the start of an fsync of the AOF.
pub(crate) fn on_timer(ctx: &Ctx, which: Timer) {
    match which {
        Timer::Round => LOOP.timer_armed.store(false, Relaxed),
        Timer::Deadline => LOOP.deadline_at.store(NONE, Relaxed),
        Timer::Fsync => {
            LOOP.fsync_armed.store(false, Relaxed);
            start_fsync(ctx);
            return;
        }
    }
    tick(ctx);
    arm_deadline(ctx);
    // The AOF has samples to take: the before-sleep event takes them.
    let (idle, aof_work) = {
        let st = state();
        (st.queue.is_empty(), HOT.aof() && aof_pending(&st))
    };
    if aof_work {
        subscribe(ctx);
    }
    // Nothing waits and nothing is to sample: the before-sleep event is not worth its cost
    // per iteration. Unsubscribed here, never from an event's callback (see `host::fence`).
    if idle && !aof_work && LOOP.subscribed.load(Relaxed) && ctx.subscribe_before_sleep(false) {
        LOOP.subscribed.store(false, Relaxed);
        LOOP.awake.store(false, Relaxed);
        publish(&state());
    }
}

/// The event loop woke up: its before-sleep event follows in this iteration.
pub(crate) fn after_sleep() {
    LOOP.awake.store(true, Relaxed);
}

/// Before the event loop sleeps: the acknowledgements that arrived in this iteration release
/// their calls, the calls blocked in it are stamped, and the AOF takes a sample where Redis
/// will not postpone its write (this iteration's replies go out after it).
pub(crate) fn before_sleep(ctx: &Ctx) {
    LOOP.awake.store(false, Relaxed);
    if HOT.aof() {
        aof_upkeep(ctx);
    }
    let waiting = !state().queue.is_empty();
    if waiting {
        tick(ctx);
    }
}

/// Whether the AOF has work for the before-sleep event: something needs its next round (a
/// call waiting, half the budget used, a renewal, a gap record or a skip not held yet). Else
/// nothing is sampled: a round costs a sample and an fsync, so the budget is renewed at half,
/// not at every iteration.
fn aof_pending(st: &State) -> bool {
    let c = &st.local.channel;
    st.queue.waits_for_aof()
        || HOT.advanced.load(Relaxed) > c.renew_at(seq_gap())
        || c.renewal_pending()
        || c.gap_pending()
        || c.skips() > 0
}

/// Before the event loop sleeps, with the AOF gate on: where nothing propagated so far can be
/// postponed, a sample (its point written at once) and the calls waiting for that released;
/// then an fsync for the next iteration, when one is wanted.
fn aof_upkeep(ctx: &Ctx) {
    let advanced = HOT.advanced.load(Relaxed);
    let want = {
        let mut st = state();
        if !aof_pending(&st) {
            return;
        }
        if st.local.needs_sample(advanced) && durable::written_now() {
            st.local.sample(advanced, mono_ms());
            release_ready(&mut st);
        }
        st.local.unsynced() && !st.local.fsyncing()
    };
    if want && !LOOP.fsync_armed.swap(true, Relaxed) && !ctx.arm_timer(0, Timer::Fsync) {
        LOOP.fsync_armed.store(false, Relaxed);
    }
}

/// The fsync timer (an iteration after the sample it covers was written): starts imid's own
/// fsync of the AOF files for the newest written point, unless one is in flight.
fn start_fsync(ctx: &Ctx) {
    let Some((dir, manifest)) = durable::files() else {
        fsync_failed(
            ctx,
            "the AOF's directory and manifest are unknown".to_owned(),
        );
        return;
    };
    let mut st = state();
    let Some(p) = st.local.start_fsync(mono_ms()) else {
        return;
    };
    drop(st);
    if !FSYNCER.start(p, dir, manifest) {
        let mut st = state();
        st.local.fsync_done(p, false, mono_ms());
        drop(st);
        fsync_failed(ctx, "imid's fsync thread could not start".to_owned());
    }
}

/// An fsync failed: counted, logged once per kind of failure, and the waiting calls time out
/// as they would on a disk that never completes (they say why).
fn fsync_failed(ctx: &Ctx, why: String) {
    COUNTS.fsync_errors.add(1);
    let mut st = state();
    if st.fsync_error.as_deref() != Some(why.as_str()) {
        ctx.log_warning(&format!(
            "imid: fsync of the AOF failed ({why}): values wait until one succeeds"
        ));
        st.fsync_error = Some(why);
    }
}

/// imid's fsync thread finished (the main thread, woken by it; no context): what it covers is
/// fsynced, and the calls waiting for that go.
pub(crate) fn fsynced() {
    let done = FSYNCER.take_done();
    let mut st = state();
    for (point, r) in done {
        COUNTS.fsyncs.add(1);
        let ok = r.is_ok();
        st.local.fsync_done(point, ok, mono_ms());
        match r {
            Ok(()) => st.fsync_error = None,
            Err(e) => {
                COUNTS.fsync_errors.add(1);
                st.fsync_error = Some(e);
            }
        }
    }
    publish(&st);
    release_ready(&mut st);
}

/// The calls whose needs are met, released.
fn release_ready(st: &mut State) {
    let acked = if HOT.fence() {
        st.fence_acked
    } else {
        Some(u64::MAX)
    };
    let points = if HOT.aof() {
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

/// The server's cron: follows the configs, and while the gate is on runs a round every tick
/// (so a replica that comes online joins at once and one that left is seen gone), reads the
/// replicas' lags and measures the rate for the gap. Off, it releases the calls still waiting
/// from when it was on.
pub(crate) fn cron(ctx: &Ctx) {
    read_min_replicas(ctx);
    // The AOF's settings follow their config events; read again once a second besides, should
    // an event have been missed (five CONFIG GETs: not every tick).
    static REFRESHED: AtomicU64 = AtomicU64::new(0);
    let now = mono_ms();
    if now.saturating_sub(REFRESHED.load(Relaxed)) >= 1000 {
        REFRESHED.store(now, Relaxed);
        durable::refresh(ctx);
    }
    follow();
    // What replicas report fsynced is read by a command filter, registered once the fence is
    // first on (until then every command would pay for it).
    if HOT.fence() {
        ctx.watch_replconf();
    }
    let waiting = !state().queue.is_empty();
    if HOT.active() || LOOP.subscribed.load(Relaxed) || waiting {
        arm_tick(ctx);
    }
    if HOT.fence() {
        read_lags();
    }
    if HOT.gone_since.load(Relaxed) != NONE && CLUSTER_MODE.load(Relaxed) {
        drop_migrated(ctx);
    }
    if HOT.active() {
        gap_upkeep(ctx);
    }
    prune_facks();
}

/// The gap in force, raised or lowered as the node's rate and its acknowledgers' rounds say
/// (`node::durable::next_record`): a new `SEQ.GAP` record to the AOF and the replicas, noted
/// with each acknowledger. Not while writes are paused (nothing may be propagated then).
fn gap_upkeep(ctx: &Ctx) {
    if ctx.writes_paused() || !ctx.is_primary() {
        return;
    }
    let round_ms = {
        let st = state();
        let aof = HOT.aof().then(|| st.local.round_ms()).flatten();
        let fence = HOT.fence().then(|| st.book.channel.round_ms()).flatten();
        aof.max(fence).unwrap_or(0)
    };
    let Some(gap) = durable::next_record(HOT.advanced.load(Relaxed), mono_ms(), round_ms) else {
        return;
    };
    ctx.replicate_int(c"SEQ.GAP", crate::core::to_i64(gap));
    durable::written(gap);
    COUNTS.gap_records.add(1);
    let mut st = state();
    if HOT.fence() {
        st.book.channel.gap_written(gap);
    }
    if HOT.aof() {
        st.local.channel.gap_written(gap);
    }
    publish(&st);
    drop(st);
    arm_tick(ctx);
}

/// Each online replica's `lag` (`INFO replication`): one silent for `core::fence::QUIET_S`
/// counts as gone though its link looks up, so calls beyond what it acknowledged are refused
/// at once rather than each waiting out `imid.fence-timeout`.
fn read_lags() {
    let Some(info) = ServerInfo::read(c"replication") else {
        return;
    };
    let n = info.int(c"connected_slaves").unwrap_or(0).clamp(0, 1024);
    let lags: Vec<(String, u64)> = (0..n)
        .filter_map(|i| {
            let name = std::ffi::CString::new(format!("slave{i}")).ok()?;
            info_replica(&info.text(&name)?)
        })
        .collect();
    let mut st = state();
    st.book.members.lags(&lags, mono_ms());
    publish(&st);
}

/// In Cluster: members offline now that the cluster shows replicating another primary leave
/// the term (they cannot take over here); else a replica that Cluster moved to an orphaned
/// primary would hold this one to its budget until an operator's `FENCE.FORGET`.
fn drop_migrated(ctx: &Ctx) {
    let offline: Vec<String> = state()
        .book
        .members
        .offline()
        .iter()
        .map(|m| m.addr.clone())
        .collect();
    let Some(nodes) = ctx.call_text(c"CLUSTER", c"NODES") else {
        return;
    };
    let addrs: Vec<&str> = offline.iter().map(String::as_str).collect();
    let moved = replicating_elsewhere(&nodes, &addrs);
    if moved.is_empty() {
        return;
    }
    {
        let mut st = state();
        for a in &moved {
            let _ = st.book.members.forget(a);
        }
        publish(&st);
    }
    ctx.log_notice(&format!(
        "imid: the fence no longer counts {}: the cluster shows it replicating another primary",
        moved.join(", ")
    ));
    arm_tick(ctx);
}

/// Reads `min-replicas-to-write` for `auto` (needs a context with a client: the cron, OnLoad,
/// a role change).
fn read_min_replicas(ctx: &Ctx) {
    if matches!(FENCE_REPLICAS.with(|v| *v), FenceReplicas::Auto) {
        if let Some(v) = ctx.config_u64(c"min-replicas-to-write") {
            state().min_replicas = v;
        }
    }
}

/// Turns the fence and the AOF's part on or off as `imid.fence-replicas` (`auto`: the last
/// `min-replicas-to-write` read), the AOF's mode (`node::durable`) and the node's role say.
/// Calls nothing in Redis, so that a config's apply callback, whose context has no client, may
/// run it. What a call waited for from an acknowledger turned off is no longer needed: it goes
/// at the next round.
fn follow() {
    let mut st = state();
    let required = match FENCE_REPLICAS.with(|v| *v) {
        FenceReplicas::Count(n) => n,
        FenceReplicas::Auto => st.min_replicas,
    };
    st.required = required;
    let fence = required > 0 && st.primary;
    if HOT.fence.swap(fence, Relaxed) != fence {
        // On: a new term, nothing acknowledged yet. Off: the calls still waiting for the
        // replicas get their replies at the next round.
        st.book.reset();
        st.fence_acked = None;
    }
    let aof = durable::gated() && st.primary;
    if HOT.aof.swap(aof, Relaxed) != aof {
        // On: nothing is known fsynced yet, but where everything before was (`always` until
        // now, or nothing handed out since the load's fsync). Off: nothing more to wait for
        // from the AOF.
        st.local.reset();
        if aof && st.durable_until == Some(HOT.advanced.load(Relaxed)) {
            st.local
                .start_durable(HOT.advanced.load(Relaxed), mono_ms());
        }
    }
    st.durable_until = match durable::mode() {
        durable::Mode::Always => Some(HOT.advanced.load(Relaxed)),
        _ => None,
    };
    HOT.active.store(fence || aof, Relaxed);
    publish(&st);
    release_ready(&mut st);
}

/// `imid.fence-replicas` was set (its apply callback: nothing here calls into Redis). The
/// fence follows at once, so that calls right after the `CONFIG SET` see the new count.
pub(crate) fn config_applied() {
    let loaded = state().loaded;
    if loaded {
        follow();
    }
}

/// A config changed (`CONFIG SET`; the event's context has a client): the AOF's settings are
/// read again and the gate follows them.
pub(crate) fn config_changed(ctx: &Ctx) {
    if durable::refresh(ctx) && state().loaded {
        follow();
    }
}

/// A forked child was born or exited: the AOF's mode may change with it (`always` with
/// `no-appendfsync-on-rewrite yes`). Calls nothing in Redis.
pub(crate) fn child_changed(alive: bool) {
    if durable::child(alive) && state().loaded {
        follow();
    }
}

/// A load starts (an RDB or AOF at startup, a full sync, DEBUG RELOAD): what is loaded is not
/// known to be on disk until the load's end fsyncs it ([`load_ended`]).
pub(crate) fn load_started() {
    let mut st = state();
    st.durable_until = None;
    st.local.reset();
    publish(&st);
}

/// A load ended: with the AOF gate's mode, the AOF files fsynced at once (the server is still
/// loading, serving nobody), so that everything loaded counts as on disk and the first calls
/// need not wait for a round (a call inside MULTI or a script could not).
pub(crate) fn load_ended(ctx: &Ctx) {
    if !durable::gated() {
        return;
    }
    let synced = match durable::files() {
        Some((dir, manifest)) => crate::host::aof::fsync_now(&dir, &manifest),
        None => Err("the AOF's directory and manifest are unknown".to_owned()),
    };
    let advanced = HOT.advanced.load(Relaxed);
    let mut st = state();
    match synced {
        Ok(()) => {
            st.durable_until = Some(advanced);
            if HOT.aof() {
                st.local.start_durable(advanced, mono_ms());
            }
            publish(&st);
        }
        Err(e) => {
            drop(st);
            fsync_failed(ctx, e);
        }
    }
}

/// At load: this node's role and the configs, on at once when they say so (a primary
/// restarted under load must not answer unguarded until the first cron tick). No timer is
/// armed in OnLoad (`entry::load`).
pub(crate) fn load(ctx: &Ctx) {
    state().primary = ctx.is_primary();
    read_min_replicas(ctx);
    durable::load(ctx);
    follow();
    state().loaded = true;
}

/// This node was promoted (`primary`) or became a replica: what was acknowledged, and by whom,
/// belongs to the old term. A demoted node's waiting calls get the error (Redis disconnects
/// blocked clients of a primary that becomes a replica too).
pub(crate) fn role_changed(ctx: &Ctx, primary: bool) {
    let demoted = {
        let mut st = state();
        st.primary = primary;
        HOT.fence.store(false, Relaxed);
        HOT.aof.store(false, Relaxed);
        HOT.active.store(false, Relaxed);
        st.book.reset();
        st.local.reset();
        st.fence_acked = None;
        publish(&st);
        if primary {
            Vec::new()
        } else {
            st.queue.drain()
        }
    };
    for (bc, _) in demoted {
        release(bc, Unblocked::Demoted);
    }
    read_min_replicas(ctx);
    durable::refresh(ctx);
    follow();
    arm_tick(ctx);
}

/// One fence round ([`Book::round`]) on the offsets `ROLE` shows (with what each replica last
/// reported fsynced), then the calls it released or timed out answered and the replicas asked.
/// Off, or on a replica, whoever still waits for the replicas is answered as without the fence.
fn tick(ctx: &Ctx) {
    let role = if HOT.fence() { ctx.role() } else { None };
    if !HOT.fence() {
        // Off: nothing to wait for from the replicas any more.
        release_ready(&mut state());
    }
    let (round, too_few, required) = match role {
        Some(role) => {
            let mut st = state();
            let required = usize::try_from(st.required).unwrap_or(usize::MAX);
            let advanced = HOT.advanced.load(Relaxed);
            let online = with_fsynced(&role.replicas, &st.facks);
            let waiting = {
                st.queue.stamp(role.offset);
                st.queue.highest_target()
            };
            let round = st.book.round(&Reading {
                offset: role.offset,
                online: &online,
                advanced,
                required,
                fsynced: FENCE_ACK.fsynced(),
                waiting,
                now_ms: mono_ms(),
            });
            if round.acked.is_some() {
                st.fence_acked = round.acked;
            }
            publish(&st);
            release_ready(&mut st);
            let too_few = round.too_few;
            (Some(round), too_few, st.required)
        }
        None => (None, None, 0),
    };
    expire(too_few, required);
    if round.is_some_and(|r| r.ask) {
        ctx.request_acks();
    }
}

/// The calls past their deadline answered with what they still miss; with fewer replicas
/// online than required, every call waiting for them.
fn expire(too_few: Option<usize>, required: u64) {
    let expired = {
        let mut st = state();
        let acked = if HOT.fence() {
            st.fence_acked
        } else {
            Some(u64::MAX)
        };
        let points = st.local.points();
        let mut out = st.queue.take_expired(mono_ms(), acked, points);
        if too_few.is_some() {
            out.extend(st.queue.take_replicas_waiting());
        }
        out
    };
    for ((bc, _), missing) in expired {
        let what = match too_few {
            Some(online) if missing.replicas => Unblocked::TooFew(online, required),
            _ => Unblocked::TimedOut(missing),
        };
        release(bc, what);
    }
}

/// The replicas `ROLE` lists, each with the fsynced offset its client last reported with the
/// same acknowledged offset (the lowest, should two share it); `None` where none did (a replica
/// that reports none, Redis 7.0, AOF off there).
fn with_fsynced(
    replicas: &[(String, u64)],
    facks: &[(u64, u64, u64, u64)],
) -> Vec<(String, u64, Option<u64>)> {
    replicas
        .iter()
        .map(|(addr, ack)| {
            let fsynced = facks
                .iter()
                .filter(|&&(_, a, ..)| a == *ack)
                .map(|&(_, _, f, _)| f)
                .min();
            (addr.clone(), *ack, fsynced)
        })
        .collect()
}

/// A replica's client (`client`) sent `REPLCONF ACK ack FACK fsynced` (the command filter):
/// kept for the next round.
pub(crate) fn replica_acked(client: u64, ack: u64, fsynced: u64) {
    let now = mono_ms();
    let mut st = state();
    if let Some(e) = st.facks.iter_mut().find(|e| e.0 == client) {
        *e = (client, ack, fsynced, now);
    } else if st.facks.len() < crate::core::fence::MEMBERS {
        st.facks.push((client, ack, fsynced, now));
    }
}

/// Reports older than a minute belong to replicas gone since (the cron).
fn prune_facks() {
    let now = mono_ms();
    state()
        .facks
        .retain(|&(.., at)| now.saturating_sub(at) < 60_000);
}

/// A released call's reply callback: its reply, or the error.
pub(crate) fn reply_released(ctx: &Ctx) {
    let Some(released) = ctx.blocked_payload::<Released>() else {
        return ctx.reply_error(&crate::error::INTERNAL);
    };
    released.replied.set(true);
    COUNTS.replied.add(1);
    match &released.what {
        Unblocked::Ready(r) => ctx.reply_kept(r),
        Unblocked::TimedOut(m) if m.replicas => {
            COUNTS.timeouts.add(1);
            ctx.reply_error(&timed_out());
        }
        Unblocked::TimedOut(m) => {
            COUNTS.aof_timeouts.add(1);
            ctx.reply_error(&not_durable(m.aof.unwrap_or(Level::Written)));
        }
        Unblocked::Demoted => ctx.reply_error(&demoted()),
        Unblocked::TooFew(online, required) => {
            COUNTS.refused.add(1);
            ctx.reply_error(&too_few(*online, *required));
        }
    }
}

/// A released call's payload is freed: counted as dropped when no reply callback ran (its
/// client was gone). Runs in the free callback: nothing here calls Redis or can panic.
pub(crate) fn freed(released: &Released) {
    if !released.replied.get() {
        COUNTS.dropped.add(1);
    }
}

// ---- The errors ----

fn timed_out() -> Error {
    let st = state();
    Error::Text(format!(
        "NOREPLICAS imid: not acknowledged within {} ms by every replica of this primary's term \
         ({}; imid.fence-replicas {}, imid.fence-timeout); nothing was handed out, a retry is \
         safe (with the same IDMP token, if any)",
        fence_timeout_ms(),
        describe(&st.book.members, mono_ms()),
        st.required,
    ))
}

fn not_durable(level: Level) -> Error {
    let st = state();
    let what = match level {
        Level::Written => {
            "Redis's AOF write was postponed behind a slow fsync (appendfsync everysec) for"
        }
        Level::Fsynced => "the AOF was not fsynced within",
    };
    let why = st
        .fsync_error
        .as_ref()
        .map_or_else(String::new, |e| format!(" (the last fsync failed: {e})"));
    Error::Text(format!(
        "NOTDURABLE imid: {what} {} ms{why}, and a crash could take back what it holds; nothing \
         was handed out, a retry is safe (with the same IDMP token, if any)",
        fence_timeout_ms(),
    ))
}

/// The members as the errors name them: `ip:port`, and for an offline one since when.
fn describe(members: &Members, now_ms: u64) -> String {
    if members.is_empty() {
        return "none attached yet".to_owned();
    }
    let fsynced = FENCE_ACK.fsynced();
    members
        .list()
        .iter()
        .map(|m| {
            let lagging = match m.fsynced {
                Some(f) if fsynced && f < m.ack => " fsynced behind what it applied",
                _ => "",
            };
            if let (true, Some(q)) = (m.online, m.quiet_since) {
                format!(
                    "{} silent for {:.1} s",
                    m.addr,
                    now_ms.saturating_sub(q) as f64 / 1000.0
                )
            } else if m.online {
                format!("{}{lagging}", m.addr)
            } else {
                format!(
                    "{} not connected for {:.1} s",
                    m.addr,
                    now_ms.saturating_sub(m.since_ms) as f64 / 1000.0
                )
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn too_few(online: usize, required: u64) -> Error {
    Error::Text(format!(
        "NOREPLICAS imid: {online} replica(s) online, imid.fence-replicas requires {required}; \
         nothing was handed out"
    ))
}

/// A member has been offline for at least `imid.fence-timeout`: a call that would wait for it
/// is refused at once instead (it would only time out), naming it and what to do.
fn gone_too_long() -> Option<Error> {
    let since = HOT.gone_since.load(Relaxed);
    let now = mono_ms();
    if since == NONE || now.saturating_sub(since) < fence_timeout_ms() {
        return None;
    }
    let st = state();
    let gone: Vec<&Member> = st.book.members.gone();
    let first = gone.first()?;
    let how = if first.online {
        "has not acknowledged anything"
    } else {
        "has not been connected"
    };
    Some(Error::Text(format!(
        "NOREPLICAS imid: replica {} of this primary's term {how} for {:.1} s and may hold less \
         than this primary handed out (a failover could promote it); nothing was handed out, a \
         retry is safe once it is back. If it is gone for good: FENCE.FORGET {}",
        first.addr,
        now.saturating_sub(gone_at(first)) as f64 / 1000.0,
        first.addr
    )))
}

fn cannot_wait() -> Error {
    Error::Text(format!(
        "NOREPLICAS imid: the replicas have not acknowledged enough yet (imid.fence-replicas \
         {}), and a call inside MULTI, a script or a function cannot wait for them; nothing was \
         handed out, retry outside or later",
        state().required
    ))
}

fn aof_cannot_wait() -> Error {
    Error::Static(
        c"NOTDURABLE imid: the AOF does not hold enough yet (a slow fsync), and a call inside MULTI, a script or a function cannot wait for it; nothing was handed out, retry outside or later",
    )
}

/// [`store_skip_alone`]'s refusal.
pub(crate) fn skip_refused() -> Error {
    Error::Text(format!(
        "NOREPLICAS imid: this sequence's first value on this node skips imid.seq-gap and must \
         wait until the replicas hold the skip (imid.fence-replicas {}), which a call inside \
         MULTI, a script or a function cannot; the skip was made and sent to them, no value \
         was handed out: retry in a moment",
        state().required
    ))
}

fn demoted() -> Error {
    Error::Static(
        c"NOREPLICAS imid: this node stopped being a primary before its replicas acknowledged; nothing was handed out, retry on the primary",
    )
}

// ---- INFO and the operator's commands ----

/// The `INFO imid` fields of the gate, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 20] {
    let (waiting, members, online, required, fence_used, aof_used, round) = {
        let st = state();
        let m = &st.book.members;
        let n = |v: usize| v as u64;
        let adv = HOT.advanced.load(Relaxed);
        let used = |acked: Option<u64>| acked.map_or(0, |a| adv.saturating_sub(a));
        (
            n(st.queue.len()),
            n(m.len()),
            n(m.online()),
            st.required,
            used(st.book.channel.acked()),
            used(st.local.channel.acked()),
            st.local.round_ms().unwrap_or(0),
        )
    };
    let fence = HOT.fence();
    let aof = HOT.aof();
    [
        ("fence_replicas", if fence { required } else { 0 }),
        ("fence_term_replicas", members),
        ("fence_term_replicas_online", online),
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

/// The replicas of this primary's term, for `FENCE.REPLICAS`: each member with its state, and
/// the ms since it joined or went offline.
pub(crate) fn term_replicas() -> Vec<(Member, u64)> {
    let now = mono_ms();
    state()
        .book
        .members
        .list()
        .iter()
        .map(|m| (m.clone(), now.saturating_sub(m.since_ms)))
        .collect()
}

/// `FENCE.FORGET addr`: the member at `addr` stops counting (an operator says it is gone for
/// good). `Ok(false)`: no such member.
pub(crate) fn forget(ctx: &Ctx, addr: &str) -> Result<bool, Error> {
    let mut st = state();
    let forgotten = st
        .book
        .members
        .forget(addr)
        .map_err(|ForgetError::Online| {
            Error::Text(format!(
                "ERR replica {addr} is connected to this primary: it counts again at the next \
             reading, so it cannot be forgotten (stop it, or make it replicate another node, \
             first)"
            ))
        })?;
    if forgotten {
        publish(&st);
        drop(st);
        // What the others acknowledged may now release waiting calls.
        arm_tick(ctx);
    }
    Ok(forgotten)
}

/// A write raised sequence values by `n` without handing them out (SEQ.SET, SEQ.ADVANCE, their
/// map forms, an internal SEQ.IDMPSET from a client): counted, so that the next call that hands
/// out values waits for an acknowledgement covering it (a promoted replica or a restart that
/// never saw the raise would otherwise hand out values above the old ones only by the gap).
#[inline]
pub(crate) fn advanced(n: u64) {
    if n > 0 && HOT.active() {
        let now = HOT.advanced.load(Relaxed).saturating_add(n);
        HOT.advanced.store(now, Relaxed);
    }
}

/// A key of imid's types appeared under a new name (COPY, RENAME, MOVE): a replica which has
/// not seen the command lacks it there (and would start it at the gap, below the values it
/// holds), so it counts as a whole budget: the next sequence call waits until the
/// acknowledgers hold the command.
pub(crate) fn appeared() {
    advanced(
        durable::skip_gap()
            .max(durable::stream_gap())
            .saturating_add(1),
    );
}
