//! The fence (docs/durability.md, "The fence"): a primary hands out nothing that the replica
//! which would take over from it does not know. It is on while `imid.fence-replicas` (`auto`:
//! the server's `min-replicas-to-write`) is above 0 and this node is a primary.
//!
//! A call says what it hands out ([`Need`]); [`check`] lets it answer now, makes it wait, or
//! refuses it before it changes anything, and [`Verdict::answer`] replies or blocks the client
//! until the replicas acknowledge its writes (`NOREPLICAS` after `imid.fence-timeout`). Inside
//! MULTI, a script or a function nothing can wait, so such a call is refused instead. A waiting
//! call is answered by one path only: the round that releases it, times it out or finds the
//! node demoted unblocks it, and the reply callback writes what that round decided; Redis keeps
//! no timeout of its own for it (`host::fence`, `Ctx::block`).
//!
//! The bookkeeping is `core::fence::Book`; here are its Redis side and when it runs: a round
//! ([`tick`]) reads `ROLE`, releases what the replicas acknowledged and asks them for more
//! (`REPLCONF GETACK *`). Rounds run before the event loop sleeps while clients wait, from a
//! one-shot timer, and from the cron. Everything runs on Redis's main thread.

use super::Counter;
use crate::config::{fence_timeout_ms, seq_gap, FenceReplicas, CLUSTER_MODE, FENCE_REPLICAS};
pub(crate) use crate::core::fence::Lease;
use crate::core::fence::{
    gone_at, info_replica, replicating_elsewhere, within, Book, ForgetError, Member, Members, View,
};
use crate::error::Error;
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
    /// later call on that target until the replicas acknowledge it (a promoted replica without
    /// the skip would hand out the same values).
    pub(crate) skip: bool,
    /// The target's id ([`target_id`]) when the call skipped or skips are pending.
    pub(crate) target: Option<u64>,
    /// An IDMP answer: the token's record must be on the replicas before it goes out.
    pub(crate) record: bool,
    /// The time of the last message ID handed out.
    pub(crate) msgid_ms: Option<u64>,
    /// The time of the last UID handed out.
    pub(crate) uid_ms: Option<u64>,
}

impl Need {
    /// An IDMP answer alone (a retry's): its record must be on the replicas.
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

/// Whether a call replies now, or waits for the replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Now,
    Wait,
}

impl Verdict {
    /// The reply of a call [`check`] let through, after its writes: written now, or kept
    /// while its client waits for the replicas.
    #[inline(always)]
    pub(crate) fn answer(self, ctx: &Ctx, reply: &(impl Answer + ?Sized)) -> Result<(), Error> {
        match self {
            Verdict::Now => {
                reply.write(ctx);
                Ok(())
            }
            Verdict::Wait => wait(ctx, reply.keep()),
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
    /// The replicas acknowledged: its reply.
    Ready(Reply),
    /// Its deadline passed first.
    TimedOut,
    /// This node stopped being a primary first.
    Demoted,
    /// Fewer replicas than required are online (online, required): no acknowledgement can come.
    TooFew(usize, u64),
}

/// What every call reads without the lock: whether the fence is on, the node's count of
/// sequence increases, and the book's [`View`] as of its last change ([`Hot::publish`]).
struct Hot {
    active: AtomicBool,
    advanced: AtomicU64,
    /// [`View::acked`], [`NONE`] for `None`.
    acked: AtomicU64,
    msgid_acked: AtomicU64,
    uid_acked: AtomicU64,
    skips: AtomicU64,
    /// [`View::gone_since`], [`NONE`] for `None`.
    gone_since: AtomicU64,
}

const NONE: u64 = u64::MAX;

static HOT: Hot = Hot {
    active: AtomicBool::new(false),
    advanced: AtomicU64::new(0),
    acked: AtomicU64::new(NONE),
    msgid_acked: AtomicU64::new(0),
    uid_acked: AtomicU64::new(0),
    skips: AtomicU64::new(0),
    gone_since: AtomicU64::new(NONE),
};

impl Hot {
    fn active(&self) -> bool {
        self.active.load(Relaxed)
    }

    fn acked(&self) -> Option<u64> {
        Some(self.acked.load(Relaxed)).filter(|&a| a != NONE)
    }

    fn publish(&self, v: View) {
        self.acked.store(v.acked.unwrap_or(NONE), Relaxed);
        self.msgid_acked.store(v.msgid_acked, Relaxed);
        self.uid_acked.store(v.uid_acked, Relaxed);
        self.skips.store(v.skips as u64, Relaxed);
        self.gone_since.store(v.gone_since.unwrap_or(NONE), Relaxed);
    }
}

/// The event loop's side: a one-shot round timer is armed; the deadline timer is armed, to
/// fire then ([`mono_ms`], [`NONE`]: not armed); the before-sleep event is subscribed (only
/// while clients wait: it costs every iteration); the loop is awake (after its after-sleep
/// event, before its before-sleep event, which then stamps a call that blocks).
struct EventLoop {
    timer_armed: AtomicBool,
    deadline_at: AtomicU64,
    subscribed: AtomicBool,
    awake: AtomicBool,
}

static LOOP: EventLoop = EventLoop {
    timer_armed: AtomicBool::new(false),
    deadline_at: AtomicU64::new(NONE),
    subscribed: AtomicBool::new(false),
    awake: AtomicBool::new(false),
};

/// The fence's `INFO imid` counters.
struct Counts {
    /// Calls that waited for the replicas (their clients blocked).
    waits: Counter,
    /// Waiting calls answered: their reply, or the fence's error.
    replied: Counter,
    /// Waiting calls whose client was gone when released (disconnected, killed, or unblocked
    /// by Redis itself): no reply callback ran. `waits` = `replied` + `dropped` + waiting, but
    /// for calls released in the running event loop iteration.
    dropped: Counter,
    /// Waiting calls answered with the error after `imid.fence-timeout`.
    timeouts: Counter,
    /// Calls refused at once (they could not wait, or too few replicas are online).
    refused: Counter,
    /// IDMP answers given inside MULTI/EXEC, a script or a function without waiting.
    unfenced_idmp: Counter,
}

static COUNTS: Counts = Counts {
    waits: Counter::new(),
    replied: Counter::new(),
    dropped: Counter::new(),
    timeouts: Counter::new(),
    refused: Counter::new(),
    unfenced_idmp: Counter::new(),
};

struct State {
    book: Book<(Blocked, Reply)>,
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
    book: Book::new(),
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

/// May the call reply now, must it wait, or is it refused (nothing may change then)? On `Ok`
/// its sequence increase is counted, and the caller makes its writes, then answers. One load
/// when the fence is off; the rest out of line, so that what the callers inline stays that load.
#[inline(always)]
pub(crate) fn check(ctx: &Ctx, need: Need) -> Result<Verdict, Error> {
    if !HOT.active() {
        return Ok(Verdict::Now);
    }
    check_on(ctx, need)
}

/// [`check`] with the fence on.
#[inline(never)]
fn check_on(ctx: &Ctx, need: Need) -> Result<Verdict, Error> {
    let adv = HOT.advanced.load(Relaxed);
    let gap = seq_gap();
    let acked = HOT.acked();
    let seq_ok = need.advance == 0 || within(adv, need.advance, acked, gap);
    let ids_ok = need
        .msgid_ms
        .is_none_or(|t| t < HOT.msgid_acked.load(Relaxed))
        && need.uid_ms.is_none_or(|t| t < HOT.uid_acked.load(Relaxed));
    // Its target's gap skip (this call's, or an earlier one not yet acknowledged).
    let skip = need.skip || need.target.is_some_and(skip_pending);
    if seq_ok && ids_ok && !need.record && !skip {
        let now = adv.saturating_add(need.advance);
        HOT.advanced.store(now, Relaxed);
        renew_past_half(ctx, now, acked, gap);
        return Ok(Verdict::Now);
    }
    wait_or_refuse(ctx, need, seq_ok && ids_ok && !skip)
}

/// May a read of what the fence protects (IM.SYNC's messages and seqs, IM.PULL's changes)
/// answer now? On a primary with the fence on, only when every sequence increase this node made
/// is acknowledged by the replicas of its term (a message or a change is written by the call
/// that raised its seq, so its write is acknowledged then too); otherwise the read waits as a
/// call that hands values out does, and its reply, made now, goes out once the replicas hold
/// everything written before it ([`Verdict::answer`]), or `NOREPLICAS` after
/// `imid.fence-timeout`. Refused where it cannot wait (MULTI, a script, a function), or at once
/// when a replica of the term is gone. Off, or on a replica: now. Two loads when nothing waits.
#[inline(always)]
pub(crate) fn check_read(ctx: &Ctx) -> Result<Verdict, Error> {
    if !HOT.active() {
        return Ok(Verdict::Now);
    }
    let advanced = HOT.advanced.load(Relaxed);
    if HOT.acked().is_some_and(|a| a >= advanced) || ctx.is_replay() {
        return Ok(Verdict::Now);
    }
    read_waits(ctx)
}

#[cold]
#[inline(never)]
fn read_waits(ctx: &Ctx) -> Result<Verdict, Error> {
    if !ctx.can_block() {
        COUNTS.refused.add(1);
        return Err(cannot_wait());
    }
    if let Some(e) = gone_too_long() {
        COUNTS.refused.add(1);
        return Err(e);
    }
    Ok(Verdict::Wait)
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
    skips_pending() && state().book.skip_pending(id)
}

/// Half the budget used (the node's count `now` against the acknowledged `acked`): refresh it
/// before a call has to wait.
#[inline(always)]
fn renew_past_half(ctx: &Ctx, now: u64, acked: Option<u64>, gap: u64) {
    if acked.is_some_and(|a| now.saturating_sub(a) > gap / 2) {
        arm_tick(ctx);
    }
}

/// The node's count after a call that skipped the gap on its target (`id`) and hands out
/// `advance` values: counted at least once, so that a sample (and its acknowledgement) covers
/// the skip.
fn count_skip(id: Option<u64>, advance: u64) -> u64 {
    let count = HOT.advanced.load(Relaxed).saturating_add(advance.max(1));
    let mut st = state();
    let now = st.book.charge_skip(id, count, seq_gap());
    HOT.publish(st.book.view());
    now
}

/// Whether a call that skips the gap here must store the skip alone: it cannot wait (inside
/// MULTI, a script or a function), so it stores and replicates only the skip and is refused
/// ([`skip_refused`]); its retry, once the replicas hold the skip, answers. Refused with
/// nothing changed, such a target could never advance from a script.
pub(crate) fn store_skip_alone(ctx: &Ctx) -> bool {
    HOT.active() && !ctx.is_replay() && !ctx.can_block()
}

/// [`store_skip_alone`]'s skip was stored and replicated: charged to its target (`id`).
pub(crate) fn charge_stored_skip(ctx: &Ctx, id: u64) {
    COUNTS.refused.add(1);
    HOT.advanced.store(count_skip(Some(id), 0), Relaxed);
    arm_tick(ctx);
}

/// [`check`]'s path for a call that cannot answer at once: it waits, or is refused when its
/// client cannot wait or a member is gone; a replay, and an IDMP answer within the budget
/// inside MULTI or a script, answer now.
#[cold]
#[inline(never)]
fn wait_or_refuse(ctx: &Ctx, need: Need, within_acked: bool) -> Result<Verdict, Error> {
    let verdict = if ctx.is_replay() {
        // The AOF at load on a primary: it hands nothing out.
        Verdict::Now
    } else if !ctx.can_block() {
        if need.record && within_acked {
            COUNTS.unfenced_idmp.add(1);
            Verdict::Now
        } else {
            COUNTS.refused.add(1);
            return Err(cannot_wait());
        }
    } else if let Some(e) = gone_too_long() {
        COUNTS.refused.add(1);
        return Err(e);
    } else {
        // With fewer replicas online than required, the round at the end of this iteration
        // answers it with the error.
        Verdict::Wait
    };
    let now = if need.skip && verdict == Verdict::Wait {
        count_skip(need.target, need.advance)
    } else {
        HOT.advanced.load(Relaxed).saturating_add(need.advance)
    };
    HOT.advanced.store(now, Relaxed);
    // As on the fast path: IDMP answers inside MULTI or a script come only here, and without
    // this got the budget back only from the cron.
    renew_past_half(ctx, now, HOT.acked(), seq_gap());
    Ok(verdict)
}

/// The call waits for the replicas: its client is blocked, and `reply` goes out once they
/// acknowledge its writes, or the fence's error after `imid.fence-timeout` (the deadline timer
/// runs the round that times it out).
fn wait(ctx: &Ctx, reply: Reply) -> Result<(), Error> {
    let Some(bc) = ctx.block() else {
        return Err(cannot_wait());
    };
    COUNTS.waits.add(1);
    let deadline = mono_ms().saturating_add(fence_timeout_ms());
    state().book.wait((bc, reply), deadline);
    arm_deadline(ctx);
    if !LOOP.subscribed.load(Relaxed) && ctx.subscribe_before_sleep(true) {
        LOOP.subscribed.store(true, Relaxed);
    }
    // Between this iteration's after-sleep and before-sleep events, the before-sleep round
    // stamps the call. Otherwise (just subscribed, a failed subscription, or a released
    // client's next command run after that event, as on Redis 7 and Valkey) the timer does.
    if !(LOOP.subscribed.load(Relaxed) && LOOP.awake.load(Relaxed)) {
        arm_tick(ctx);
    }
    Ok(())
}

/// Arms the deadline timer for the earliest deadline of a waiting call, unless one is armed to
/// fire by then already.
fn arm_deadline(ctx: &Ctx) {
    let Some(due) = state().book.next_deadline() else {
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
    HOT.active()
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
        state().book.renewed(lease, until);
        arm_tick(ctx);
    }
}

/// Arms the one-shot round timer, unless it is armed already.
fn arm_tick(ctx: &Ctx) {
    if !LOOP.timer_armed.swap(true, Relaxed) && !ctx.arm_timer(0, Timer::Round) {
        LOOP.timer_armed.store(false, Relaxed);
    }
}

/// A one-shot timer fired (a context of its own, outside any event's callback): a round, then
/// the deadline timer for the calls still waiting.
pub(crate) fn on_timer(ctx: &Ctx, which: Timer) {
    match which {
        Timer::Round => LOOP.timer_armed.store(false, Relaxed),
        Timer::Deadline => LOOP.deadline_at.store(NONE, Relaxed),
    }
    tick(ctx);
    arm_deadline(ctx);
    // Nobody waits: the before-sleep event is not worth its cost per iteration. Unsubscribed
    // here, never from an event's callback (see `host::fence`).
    let idle = state().book.waiting() == 0;
    if idle && LOOP.subscribed.load(Relaxed) && ctx.subscribe_before_sleep(false) {
        LOOP.subscribed.store(false, Relaxed);
        LOOP.awake.store(false, Relaxed);
    }
}

/// The event loop woke up: its before-sleep event follows in this iteration.
pub(crate) fn after_sleep() {
    LOOP.awake.store(true, Relaxed);
}

/// Before the event loop sleeps: the acknowledgements that arrived in this iteration release
/// their calls, and the calls blocked in it are stamped.
pub(crate) fn before_sleep(ctx: &Ctx) {
    LOOP.awake.store(false, Relaxed);
    let waiting = state().book.waiting();
    if waiting > 0 {
        tick(ctx);
    }
}

/// The server's cron: follows the configs, and while on runs a round every tick (so a replica
/// that comes online joins at once and one that left is seen gone) and reads the replicas'
/// lags. Off, it releases the calls still waiting from when it was on.
pub(crate) fn cron(ctx: &Ctx) {
    read_min_replicas(ctx);
    follow();
    let waiting = state().book.waiting();
    if HOT.active() || LOOP.subscribed.load(Relaxed) || waiting > 0 {
        arm_tick(ctx);
    }
    if HOT.active() {
        read_lags();
    }
    if HOT.gone_since.load(Relaxed) != NONE && CLUSTER_MODE.load(Relaxed) {
        drop_migrated(ctx);
    }
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
    HOT.publish(st.book.view());
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
        HOT.publish(st.book.view());
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

/// Turns the fence on or off as `imid.fence-replicas` (`auto`: the last
/// `min-replicas-to-write` read) and the node's role say. Calls nothing in Redis, so that a
/// config's apply callback, whose context has no client, may run it.
fn follow() {
    let mut st = state();
    let required = match FENCE_REPLICAS.with(|v| *v) {
        FenceReplicas::Count(n) => n,
        FenceReplicas::Auto => st.min_replicas,
    };
    st.required = required;
    let active = required > 0 && st.primary;
    if HOT.active.swap(active, Relaxed) != active {
        // On: a new term, nothing acknowledged yet. Off: the calls still waiting get their
        // replies at the next round, which the cron arms.
        reset(&mut st);
    }
}

/// `imid.fence-replicas` was set (its apply callback: nothing here calls into Redis). The
/// fence follows at once, so that calls right after the `CONFIG SET` see the new count.
pub(crate) fn config_applied() {
    let loaded = state().loaded;
    if loaded {
        follow();
    }
}

/// Forgets everything acknowledged and every replica of the term.
fn reset(st: &mut State) {
    st.book.reset();
    HOT.publish(st.book.view());
}

/// At load: this node's role and the fence's configs, on at once when they say so (a primary
/// restarted under load must not answer unfenced until the first cron tick). No timer is
/// armed in OnLoad (`entry::load`).
pub(crate) fn load(ctx: &Ctx) {
    state().primary = ctx.is_primary();
    read_min_replicas(ctx);
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
        HOT.active.store(false, Relaxed);
        reset(&mut st);
        if primary {
            Vec::new()
        } else {
            st.book.drain()
        }
    };
    for (bc, _) in demoted {
        release(bc, Unblocked::Demoted);
    }
    read_min_replicas(ctx);
    follow();
    arm_tick(ctx);
}

/// One round ([`Book::round`]) on the offsets `ROLE` shows, then the calls it released or
/// timed out answered and the replicas asked. Off, or on a replica, whoever still waits is
/// answered as without the fence, or with the error.
fn tick(ctx: &Ctx) {
    let role = if HOT.active() { ctx.role() } else { None };
    let Some(role) = role else {
        return release_all();
    };
    let (round, required) = {
        let mut st = state();
        let required = usize::try_from(st.required).unwrap_or(usize::MAX);
        let advanced = HOT.advanced.load(Relaxed);
        let round = st
            .book
            .round(role.offset, &role.replicas, advanced, required, mono_ms());
        HOT.publish(st.book.view());
        (round, st.required)
    };
    for (bc, reply) in round.released {
        release(bc, Unblocked::Ready(reply));
    }
    for (bc, _) in round.expired {
        release(
            bc,
            match round.too_few {
                Some(online) => Unblocked::TooFew(online, required),
                None => Unblocked::TimedOut,
            },
        );
    }
    if round.ask {
        ctx.request_acks();
    }
}

/// The fence is off, or this node no longer a primary: every waiting call answered.
fn release_all() {
    let (waiting, primary) = {
        let mut st = state();
        (st.book.drain(), st.primary)
    };
    for (bc, reply) in waiting {
        release(
            bc,
            if primary {
                Unblocked::Ready(reply)
            } else {
                Unblocked::Demoted
            },
        );
    }
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
        Unblocked::TimedOut => {
            COUNTS.timeouts.add(1);
            ctx.reply_error(&timed_out());
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

/// The members as the errors name them: `ip:port`, and for an offline one since when.
fn describe(members: &Members, now_ms: u64) -> String {
    if members.is_empty() {
        return "none attached yet".to_owned();
    }
    members
        .list()
        .iter()
        .map(|m| {
            if let (true, Some(q)) = (m.online, m.quiet_since) {
                format!(
                    "{} silent for {:.1} s",
                    m.addr,
                    now_ms.saturating_sub(q) as f64 / 1000.0
                )
            } else if m.online {
                m.addr.clone()
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

/// [`store_skip_alone`]'s refusal.
pub(crate) fn skip_refused() -> Error {
    Error::Text(format!(
        "NOREPLICAS imid: this sequence's first value on this node skips imid.seq-gap and must \
         wait until the replicas hold the skip (imid.fence-replicas {}), which a call inside \
         MULTI, a script or a function cannot; the skip was made and sent to them, no value was \
         handed out: retry in a moment",
        state().required
    ))
}

fn demoted() -> Error {
    Error::Static(
        c"NOREPLICAS imid: this node stopped being a primary before its replicas acknowledged; nothing was handed out, retry on the primary",
    )
}

/// The `INFO imid` fields of the fence, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 11] {
    let (waiting, members, online, required) = {
        let st = state();
        let m = &st.book.members;
        let n = |v: usize| v as u64;
        (n(st.book.waiting()), n(m.len()), n(m.online()), st.required)
    };
    let active = HOT.active();
    let used = HOT
        .acked()
        .map_or(0, |a| HOT.advanced.load(Relaxed).saturating_sub(a));
    [
        ("fence_replicas", if active { required } else { 0 }),
        ("fence_term_replicas", members),
        ("fence_term_replicas_online", online),
        ("fence_waits", COUNTS.waits.get()),
        ("fence_waiting", waiting),
        ("fence_replied", COUNTS.replied.get()),
        ("fence_dropped", COUNTS.dropped.get()),
        ("fence_timeouts", COUNTS.timeouts.get()),
        ("fence_refused", COUNTS.refused.get()),
        ("fence_unfenced_idmp", COUNTS.unfenced_idmp.get()),
        ("fence_budget_used", if active { used } else { 0 }),
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
        HOT.publish(st.book.view());
        drop(st);
        // What the others acknowledged may now release waiting calls.
        arm_tick(ctx);
    }
    Ok(forgotten)
}

/// A write raised sequence values by `n` without handing them out (SEQ.SET, SEQ.ADVANCE, their
/// map forms, an internal SEQ.IDMPSET from a client): counted, so that the next call that hands
/// out values waits for an acknowledgement covering it (a promoted replica that never saw the
/// raise would otherwise hand out values above the old ones only by the gap).
#[inline]
pub(crate) fn advanced(n: u64) {
    if n > 0 && HOT.active() {
        let now = HOT.advanced.load(Relaxed).saturating_add(n);
        HOT.advanced.store(now, Relaxed);
    }
}

/// A key of imid's types appeared under a new name (COPY, RENAME, MOVE): a replica which has
/// not seen the command lacks it there (and would start it at the gap, below the values it
/// holds), so it counts as a whole budget: the next sequence call waits until the replicas
/// hold the command.
pub(crate) fn appeared() {
    advanced(seq_gap().saturating_add(1));
}
