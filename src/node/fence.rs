//! The fence (issue 27; docs/durability.md, "The fence"): a primary hands out nothing that the
//! replica which would take over, should this node lose its role now, would not know. On when
//! `imid.fence-replicas` (`auto`: the server's `min-replicas-to-write`) is above 0 and this node
//! is a primary; otherwise every call replies at once, as without it.
//!
//! What a call hands out ([`Need`]) is checked by [`check`] before the call changes anything:
//! - sequence values, against the node-wide budget (`core::fence::within`): at once while the
//!   node's count of sequence increases is at most `imid.seq-gap` above the count of the newest
//!   sample its replicas acknowledged;
//! - message IDs and UIDs, against the lease renewals the replicas acknowledged
//!   (`core::fence::Marks`): at once when the ID's time lies below one;
//! - an IDMP answer (a first answer, and a retry's, whose record may not have reached the
//!   replicas yet): never at once.
//!
//! What cannot reply at once waits ([`wait`]): the client (only it) is blocked until the
//! replicas acknowledge the offset that covers the call's writes, or answered with the fence's
//! `NOREPLICAS` error after `imid.fence-timeout`. Inside MULTI/EXEC, a script or a function no
//! client can wait: such a call is refused at once instead, except an IDMP answer within the
//! budget, which is given and counted (`imid_fence_unfenced_idmp`: the docs say to `WAIT`
//! after such a transaction or script before using its answer). A call refused at once
//! changes nothing, except one that would skip the gap there: it stores and replicates the
//! skip alone ([`skip_only`]), so that its retry can answer.
//!
//! The offsets (`tick`): `ROLE` gives the primary's offset and each online replica's
//! acknowledged one; the `imid.fence-replicas`-th largest is what "the replicas" acknowledged.
//! A tick releases the calls, samples and renewals that offset covers, stamps what was
//! propagated since the last tick with the current offset, and asks the replicas to acknowledge
//! (`REPLCONF GETACK *`) when something is waiting for them. Ticks run before the event loop
//! sleeps while clients wait (the before-sleep event, subscribed only then: it costs every
//! iteration; a call blocked before it in the same iteration needs nothing else), from a
//! one-shot timer when the budget runs low, a renewal waits, the fence just came on, or a call
//! blocked after that event (a released client's next pipelined command, on Redis 7 and
//! Valkey), and from the server's cron (`hz`) to keep the budget and the leases fresh.
//!
//! Every function here runs on Redis's main thread; the atomics keep the statics `Sync` and let
//! the hot path read the fence's state without a lock.

use super::Counter;
use crate::config::{fence_timeout_ms, seq_gap, FenceReplicas, CLUSTER_MODE, FENCE_REPLICAS};
use crate::core::fence::{
    gone_at, info_replica, replicating_elsewhere, within, ForgetError, Marks, Member, Members,
    Queue, Ring, Skips,
};
use crate::error::Error;
use crate::host::fence::Blocked;
use crate::host::server::ServerInfo;
use crate::host::{Ctx, Owned};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// What a call hands out, for [`check`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Need {
    /// How much the call hands out of sequence values (the values it reserves; a gap skip is
    /// not included: it is charged to its target, `skip`).
    pub(crate) advance: u64,
    /// The call skipped the gap on its target: it waits for its own write (a promoted
    /// replica without it would hand out the same values), and so does every later call on
    /// that target until the replicas acknowledge it ([`Skips`]).
    pub(crate) skip: bool,
    /// The target's id ([`target_id`]): given when the call skipped, or when skips are pending
    /// ([`keyed`]); `None` otherwise (nothing to look up).
    pub(crate) target: Option<u64>,
    /// An IDMP answer: the token's record must be on the replicas before it goes out.
    pub(crate) record: bool,
    /// The time of the last message ID handed out.
    pub(crate) msgid_ms: Option<u64>,
    /// The time of the last UID handed out.
    pub(crate) uid_ms: Option<u64>,
}

/// Whether a call replies now, or waits ([`wait`]) for the replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Now,
    Wait,
}

/// The fence is on here (`imid.fence-replicas` above 0, this node a primary).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// This node is a primary (set at load, then by role changes).
static PRIMARY: AtomicBool = AtomicBool::new(true);
/// How many replicas must be online (`imid.fence-replicas`, `auto` resolved); every replica of
/// the term must acknowledge ([`Members`]).
static REQUIRED: AtomicU64 = AtomicU64::new(0);
/// The server's `min-replicas-to-write` as last read (at load, by the cron, at a role change:
/// contexts with a client), for `auto`. A config's apply callback has no client to read it
/// with (`RedisModule_Call` there crashes the server), so it takes this value.
static MIN_REPLICAS: AtomicU64 = AtomicU64::new(0);
/// Since when (`mono_ms`) the longest-gone member of the term has been offline; [`NONE`]
/// while every member is online.
static GONE_SINCE: AtomicU64 = AtomicU64::new(NONE);
/// The node's count of sequence increases while the fence is on.
static ADVANCED: AtomicU64 = AtomicU64::new(0);
/// The count of the newest sample the replicas acknowledged; [`NONE`] before the first.
static ACKED_ADV: AtomicU64 = AtomicU64::new(NONE);
const NONE: u64 = u64::MAX;
/// Message IDs and UIDs with a time below these may go out at once.
static MSGID_ACKED: AtomicU64 = AtomicU64::new(0);
static UID_ACKED: AtomicU64 = AtomicU64::new(0);
/// A one-shot tick timer is armed.
static TIMER_ARMED: AtomicBool = AtomicBool::new(false);
/// `load` ran (the configs' apply callback may refresh from then on).
static LOADED: AtomicBool = AtomicBool::new(false);
/// The before-sleep event is subscribed.
static SUBSCRIBED: AtomicBool = AtomicBool::new(false);
/// How many gap skips wait for the replicas ([`Skips`]): while 0, calls look nothing up.
static SKIPS_PENDING: AtomicU64 = AtomicU64::new(0);
/// The event loop woke up (its after-sleep event, while subscribed) and its before-sleep event
/// has not run yet: a call that blocks now is stamped, and the replicas asked, by that event in
/// this same iteration, before the server writes to them, so no timer is needed for it.
static AWAKE: AtomicBool = AtomicBool::new(false);

/// Calls that waited for the replicas.
pub(crate) static WAITS: Counter = Counter::new();
/// Waiting calls answered with the error after `imid.fence-timeout`.
pub(crate) static TIMEOUTS: Counter = Counter::new();
/// Calls refused at once (they could not wait, or fewer replicas than required are online).
pub(crate) static REFUSED: Counter = Counter::new();
/// IDMP answers given inside MULTI/EXEC, a script or a function without waiting.
pub(crate) static UNFENCED_IDMP: Counter = Counter::new();

/// What a released call gets.
pub(crate) enum Unblocked {
    /// The replicas acknowledged: its reply.
    Ready(Owned),
    /// Its deadline passed first.
    TimedOut,
    /// This node stopped being a primary first.
    Demoted,
    /// Fewer replicas than required are online (online, required): no acknowledgement can come.
    TooFew(usize, u64),
}

struct State {
    /// The replicas of this primary's term.
    members: Members,
    ring: Ring,
    skips: Skips,
    msgid: Marks,
    uid: Marks,
    queue: Queue<(Blocked, Owned)>,
    /// The offset the last GETACK asked for, and when (ms).
    asked: Option<u64>,
    asked_ms: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    members: Members::new(),
    ring: Ring::new(),
    skips: Skips::new(),
    msgid: Marks::new(),
    uid: Marks::new(),
    queue: Queue::new(),
    asked: None,
    asked_ms: 0,
});

fn state() -> MutexGuard<'static, State> {
    // Main thread only: never contended; a poisoned lock was caught by the guard already and
    // the state is consistent between statements.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn acked_adv() -> Option<u64> {
    Some(ACKED_ADV.load(Relaxed)).filter(|&a| a != NONE)
}

/// May the call reply now, must it wait, or is it refused (an error: nothing may change)? On
/// `Ok`, its sequence increase is counted: the caller must then make its writes (and reply or
/// [`wait`]). One load when the fence is off; the rest out of line, so that what the callers
/// inline stays that load.
#[inline(always)]
pub(crate) fn check(ctx: &Ctx, need: Need) -> Result<Verdict, Error> {
    if !ACTIVE.load(Relaxed) {
        return Ok(Verdict::Now);
    }
    check_on(ctx, need)
}

/// [`check`] with the fence on.
#[inline(never)]
fn check_on(ctx: &Ctx, need: Need) -> Result<Verdict, Error> {
    let adv = ADVANCED.load(Relaxed);
    let gap = seq_gap();
    let acked = acked_adv();
    let seq_ok = need.advance == 0 || within(adv, need.advance, acked, gap);
    let ids_ok = need.msgid_ms.is_none_or(|t| t < MSGID_ACKED.load(Relaxed))
        && need.uid_ms.is_none_or(|t| t < UID_ACKED.load(Relaxed));
    // Its target's gap skip (this call's, or an earlier one not yet acknowledged).
    let keyed = need.skip || need.target.is_some_and(|id| skip_pending(id, acked));
    if seq_ok && ids_ok && !need.record && !keyed {
        let now = adv.saturating_add(need.advance);
        ADVANCED.store(now, Relaxed);
        renew_past_half(ctx, now, acked, gap);
        return Ok(Verdict::Now);
    }
    slow(ctx, need, seq_ok && ids_ok && !keyed)
}

/// Whether calls must look their target up ([`Need::target`]): gap skips are pending.
#[inline(always)]
pub(crate) fn keyed() -> bool {
    SKIPS_PENDING.load(Relaxed) > 0
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
fn skip_pending(id: u64, acked: Option<u64>) -> bool {
    SKIPS_PENDING.load(Relaxed) > 0 && state().skips.pending(id, acked)
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
/// the skip, which is charged to the target; to the node as a whole gap when too many skips
/// are pending already.
fn count_skip(id: Option<u64>, advance: u64) -> u64 {
    let now = ADVANCED.load(Relaxed).saturating_add(advance.max(1));
    let mut st = state();
    match id {
        Some(id) if st.skips.insert(id, now) => {
            SKIPS_PENDING.store(st.skips.len() as u64, Relaxed);
            now
        }
        _ => now.saturating_add(seq_gap()),
    }
}

/// A call that cannot wait (inside MULTI, a script or a function) would skip the gap on its
/// target: the caller stores only the skip (no value handed out) and replicates it, then
/// refuses the call with [`skip_refused`]; a retry once the replicas hold the skip answers.
/// Without this such a target could never advance from a script: every call would be refused
/// and change nothing, the target still marked.
pub(crate) fn skip_only(ctx: &Ctx) -> bool {
    ACTIVE.load(Relaxed) && !ctx.is_replay() && !ctx.can_block()
}

/// [`skip_only`]'s skip was stored and replicated: charged to its target (`id`).
pub(crate) fn skipped_only(ctx: &Ctx, id: u64) {
    REFUSED.add(1);
    ADVANCED.store(count_skip(Some(id), 0), Relaxed);
    arm_tick(ctx);
}

#[cold]
#[inline(never)]
fn slow(ctx: &Ctx, need: Need, within_acked: bool) -> Result<Verdict, Error> {
    // A replay (the AOF at load on a primary) hands nothing out.
    let verdict = if ctx.is_replay() {
        Verdict::Now
    } else if !ctx.can_block() {
        if need.record && within_acked {
            UNFENCED_IDMP.add(1);
            Verdict::Now
        } else {
            REFUSED.add(1);
            return Err(cannot_wait());
        }
    } else if let Some(e) = gone_too_long() {
        REFUSED.add(1);
        return Err(e);
    } else {
        // (With fewer replicas online than required, the next tick, at the end of this event
        // loop iteration, answers it with the error: `tick`.)
        Verdict::Wait
    };
    let now = if need.skip && verdict == Verdict::Wait {
        count_skip(need.target, need.advance)
    } else {
        ADVANCED.load(Relaxed).saturating_add(need.advance)
    };
    ADVANCED.store(now, Relaxed);
    // As on the fast path. An IDMP answer given inside MULTI or a script comes here, never to
    // the fast path: without this, transactions of them (then `WAIT`) got the budget back only
    // from the cron, and were refused after `imid.seq-gap` values.
    renew_past_half(ctx, now, acked_adv(), seq_gap());
    Ok(verdict)
}

/// The call waits for the replicas (after [`check`] said so, and after its writes): its client
/// is blocked and `reply` goes out once they acknowledge, or the fence's error after
/// `imid.fence-timeout`.
pub(crate) fn wait(ctx: &Ctx, reply: Owned) -> Result<(), Error> {
    let timeout = fence_timeout_ms();
    let Some(bc) = ctx.block(timeout) else {
        return Err(cannot_wait());
    };
    WAITS.add(1);
    let deadline = mono_ms().saturating_add(timeout);
    state().queue.push((bc, reply), deadline);
    if !SUBSCRIBED.load(Relaxed) && ctx.subscribe_before_sleep(true) {
        SUBSCRIBED.store(true, Relaxed);
    }
    // Called between this iteration's after-sleep and before-sleep events (a command read in
    // this iteration, or one a released client runs in Redis 8's before-sleep ahead of the
    // event): the before-sleep tick stamps it. Otherwise (just subscribed, a subscription that
    // failed, or a released client's next command run after the event, as Redis 7 and Valkey
    // do) the timer ticks, at the end of this iteration or the next; the cron too.
    if !(SUBSCRIBED.load(Relaxed) && AWAKE.load(Relaxed)) {
        arm_tick(ctx);
    }
    Ok(())
}

/// Whether the fence is on here.
pub(crate) fn active() -> bool {
    ACTIVE.load(Relaxed)
}

/// A monotonic clock in ms (since its first read) for the waiting calls' deadlines and the
/// GETACK pacing: never the IDs' clock (`node::now_ms`), whose steps (a wall clock set
/// forward, or a test-hooks offset) must not time waiting calls out early.
fn mono_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let elapsed = START.get_or_init(std::time::Instant::now).elapsed();
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

/// Which lease a renewal belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lease {
    Msgid,
    Uid,
}

/// A lease renewal to `until` was propagated in the running call (`node::ids`).
pub(crate) fn renewed(ctx: &Ctx, lease: Lease, until: u64) {
    if !ACTIVE.load(Relaxed) {
        return;
    }
    {
        let mut st = state();
        match lease {
            Lease::Msgid => st.msgid.push(until),
            Lease::Uid => st.uid.push(until),
        }
    }
    arm_tick(ctx);
}

/// Arms the one-shot tick timer, unless it is armed already.
fn arm_tick(ctx: &Ctx) {
    if !TIMER_ARMED.swap(true, Relaxed) && !ctx.arm_timer(0) {
        TIMER_ARMED.store(false, Relaxed);
    }
}

/// The one-shot timer fired (a context of its own, outside any event's callback).
pub(crate) fn on_timer(ctx: &Ctx) {
    TIMER_ARMED.store(false, Relaxed);
    tick(ctx);
    // Nobody waits: the before-sleep event is not worth its cost per iteration. Unsubscribed
    // here, never from an event's callback (see `host::fence`).
    if SUBSCRIBED.load(Relaxed) && state().queue.is_empty() && ctx.subscribe_before_sleep(false) {
        SUBSCRIBED.store(false, Relaxed);
        AWAKE.store(false, Relaxed);
    }
}

/// The event loop woke up (subscribed while clients wait): its before-sleep event follows in
/// this iteration.
pub(crate) fn after_sleep() {
    AWAKE.store(true, Relaxed);
}

/// Before the event loop sleeps (subscribed while clients wait): the acknowledgements that
/// arrived in this iteration release their calls, and the calls blocked in it are stamped.
pub(crate) fn before_sleep(ctx: &Ctx) {
    AWAKE.store(false, Relaxed);
    if !state().queue.is_empty() {
        tick(ctx);
    }
}

/// The server's cron: follows `imid.fence-replicas` (and `min-replicas-to-write` under
/// `auto`) and ticks when anything is left to acknowledge or to release. (The cron also keeps
/// the leases renewed while the fence is on: `node::ids::keep_leases`.)
pub(crate) fn cron(ctx: &Ctx) {
    read_min_replicas(ctx);
    follow();
    // While on, a tick every cron tick: it keeps the budget and the leases acknowledged, and
    // reads the replicas of the term, so one that comes online joins at once (not at the next
    // call that waits) and one that left is seen gone (calls beyond what it acknowledged are
    // then refused at once, `gone_too_long`, and a refusal ticks nothing). Off: calls still
    // waiting when the fence went off (here, or in a config's apply callback, which cannot
    // tick) get their replies.
    if ACTIVE.load(Relaxed) || SUBSCRIBED.load(Relaxed) || !state().queue.is_empty() {
        arm_tick(ctx);
    }
    if ACTIVE.load(Relaxed) {
        read_lags();
    }
    if GONE_SINCE.load(Relaxed) != NONE && CLUSTER_MODE.load(Relaxed) {
        drop_migrated(ctx);
    }
}

/// Each online replica's `lag` (`INFO replication`): a member silent for `QUIET_S` or more
/// counts as gone, though its link looks up (a cut drops no connection until `repl-timeout`),
/// so calls past what it acknowledged are refused at once rather than each waiting out
/// `imid.fence-timeout` (which held a client's whole pipeline on an old primary for
/// seconds after a split, away from the new primary).
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
    st.members.lags(&lags, mono_ms());
    GONE_SINCE.store(st.members.gone_since().unwrap_or(NONE), Relaxed);
}

/// In Cluster: members offline now that the cluster shows replicating another primary are
/// dropped from the term (`core::fence::replicating_elsewhere`): they cannot take over here.
/// Without this, a replica that migrated to an orphaned primary (Cluster does that by itself)
/// would hold this primary to its budget until an operator's `FENCE.FORGET`.
fn drop_migrated(ctx: &Ctx) {
    let offline: Vec<String> = state()
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
            let _ = st.members.forget(a);
        }
        GONE_SINCE.store(st.members.gone_since().unwrap_or(NONE), Relaxed);
    }
    ctx.log_notice(&format!(
        "imid: the fence no longer counts {}: the cluster shows it replicating another primary",
        moved.join(", ")
    ));
    arm_tick(ctx);
}

/// Reads `min-replicas-to-write` for `auto` (a context with a client: the cron, OnLoad, a
/// role change).
fn read_min_replicas(ctx: &Ctx) {
    if matches!(FENCE_REPLICAS.with(|v| *v), FenceReplicas::Auto) {
        if let Some(v) = ctx.config_u64(c"min-replicas-to-write") {
            MIN_REPLICAS.store(v, Relaxed);
        }
    }
}

/// Turns the fence on or off as `imid.fence-replicas` (`auto`: the last `min-replicas-to-write`
/// read) and the node's role say; calls nothing in Redis, so that a config's apply callback,
/// whose context has no client, may run it. Returns whether it turned on or off.
fn follow() -> bool {
    let required = match FENCE_REPLICAS.with(|v| *v) {
        FenceReplicas::Count(n) => n,
        FenceReplicas::Auto => MIN_REPLICAS.load(Relaxed),
    };
    REQUIRED.store(required, Relaxed);
    let active = required > 0 && PRIMARY.load(Relaxed);
    let changed = ACTIVE.swap(active, Relaxed) != active;
    if changed {
        // On: a new term for the fence, nothing acknowledged yet; the first tick samples and
        // asks. Off: the calls still waiting get their replies (as without the fence) at the
        // next tick, which the cron arms.
        reset();
    }
    changed
}

/// `imid.fence-replicas` was set (from its apply callback: a context without a client, so
/// nothing here calls into Redis). The fence follows at once, so that calls right after the
/// `CONFIG SET` see the new count; `auto` takes the `min-replicas-to-write` the cron last read
/// (it reads it again within 1/hz s). During OnLoad, `load` reads the config instead.
pub(crate) fn config_applied() {
    if LOADED.load(Relaxed) {
        follow();
    }
}

/// Forgets everything acknowledged and every replica of the term: the node starts over (the
/// fence came on, a new term).
fn reset() {
    let mut st = state();
    st.members.clear();
    GONE_SINCE.store(NONE, Relaxed);
    st.ring.clear();
    st.skips.clear();
    SKIPS_PENDING.store(0, Relaxed);
    st.msgid.clear();
    st.uid.clear();
    st.asked = None;
    ACKED_ADV.store(NONE, Relaxed);
    MSGID_ACKED.store(0, Relaxed);
    UID_ACKED.store(0, Relaxed);
}

/// A replica joined the term: what was acknowledged so far was acknowledged without it, so
/// nothing counts until it (and every other member) acknowledges again. The pending gap
/// skips stay (their counts still say what must be acknowledged); the leases' highest renewal
/// goes out again, as propagated by now, so IDs wait for one round trip, not for the next
/// renewal.
fn restart_acks(st: &mut State) {
    st.ring.clear();
    st.msgid.restart();
    st.uid.restart();
    st.asked = None;
    ACKED_ADV.store(NONE, Relaxed);
    MSGID_ACKED.store(0, Relaxed);
    UID_ACKED.store(0, Relaxed);
}

/// At load: this node's role and the fence's configs (on at once when they say so: a primary
/// restarted under load must not answer unfenced until the first cron tick). No tick is armed
/// here (a timer must not be armed in OnLoad: `entry::load`).
pub(crate) fn load(ctx: &Ctx) {
    PRIMARY.store(ctx.is_primary(), Relaxed);
    read_min_replicas(ctx);
    follow();
    LOADED.store(true, Relaxed);
}

/// This node was promoted (`primary`) or became a replica: what was acknowledged, and by whom,
/// belongs to the old term. A demoted node's waiting calls are answered with the error (Redis
/// also disconnects blocked clients when a primary becomes a replica).
pub(crate) fn role_changed(ctx: &Ctx, primary: bool) {
    PRIMARY.store(primary, Relaxed);
    ACTIVE.store(false, Relaxed);
    reset();
    if !primary {
        let waiting = state().queue.drain();
        for (bc, _) in waiting {
            bc.unblock(Box::new(Unblocked::Demoted));
        }
    }
    read_min_replicas(ctx);
    follow();
    arm_tick(ctx);
}

/// One round: read the offsets, release what they cover, stamp what was propagated since the
/// last round, and ask the replicas to acknowledge when something waits for them.
fn tick(ctx: &Ctx) {
    let active = ACTIVE.load(Relaxed);
    let role = if active { ctx.role() } else { None };
    let Some(role) = role else {
        // Off (or no longer a primary): whoever still waits is answered as without the fence,
        // or, on a replica, with the error.
        let waiting = state().queue.drain();
        let primary = PRIMARY.load(Relaxed);
        for (bc, reply) in waiting {
            bc.unblock(Box::new(if primary {
                Unblocked::Ready(reply)
            } else {
                Unblocked::Demoted
            }));
        }
        return;
    };
    let now_ms = mono_ms();
    let required = usize::try_from(REQUIRED.load(Relaxed)).unwrap_or(usize::MAX);
    let (released, expired, ask) = {
        let mut st = state();
        let mut released = Vec::new();
        if st.members.observe(&role.replicas, now_ms).joined > 0 {
            restart_acks(&mut st);
        }
        GONE_SINCE.store(st.members.gone_since().unwrap_or(NONE), Relaxed);
        if let Some(a) = st.members.acked(required) {
            if let Some(c) = st.ring.ack(a) {
                let prev = acked_adv().unwrap_or(0);
                let acked = prev.max(c);
                ACKED_ADV.store(acked, Relaxed);
                if !st.skips.is_empty() {
                    st.skips.ack(acked);
                    SKIPS_PENDING.store(st.skips.len() as u64, Relaxed);
                }
            }
            st.msgid.ack(a);
            st.uid.ack(a);
            // MSGID.FLOOR's replay raises a replica's UID floor too (`node::ids`).
            let m = st.msgid.acked();
            st.uid.raise(m);
            MSGID_ACKED.store(m, Relaxed);
            UID_ACKED.store(st.uid.acked(), Relaxed);
            released = st.queue.take_acked(a);
        }
        let mut expired = st.queue.take_expired(now_ms);
        // Too few replicas to ever acknowledge: nobody waits for the bound.
        let online = st.members.online();
        let too_few = online < required;
        if too_few {
            expired.extend(st.queue.drain());
        }
        // Everything propagated so far lies at or below the offset just read.
        st.queue.stamp(role.offset);
        st.msgid.stamp(role.offset);
        st.uid.stamp(role.offset);
        st.ring.push(role.offset, ADVANCED.load(Relaxed));
        let needed = [
            st.queue.highest_target(),
            st.ring.newest_offset(),
            st.msgid.highest_target(),
            st.uid.highest_target(),
        ]
        .into_iter()
        .flatten()
        .max();
        // Ask when something new needs acknowledging, and again every 100 ms while anything
        // does (an answer lost with a broken link).
        let ask = needed.is_some_and(|n| {
            st.asked.is_none_or(|a| n > a) || now_ms.saturating_sub(st.asked_ms) >= 100
        });
        if ask {
            st.asked = Some(role.offset);
            st.asked_ms = now_ms;
        }
        (released, ((expired, too_few), online), ask)
    };
    let ((expired, too_few), online) = (expired.0, expired.1);
    for (bc, reply) in released {
        bc.unblock(Box::new(Unblocked::Ready(reply)));
    }
    for (bc, _) in expired {
        bc.unblock(Box::new(if too_few {
            Unblocked::TooFew(online, REQUIRED.load(Relaxed))
        } else {
            Unblocked::TimedOut
        }));
    }
    if ask {
        ctx.request_acks();
    }
}

/// A released call's reply callback: its reply, or the error.
pub(crate) fn reply(ctx: &Ctx) {
    match ctx.blocked_payload::<Unblocked>() {
        Some(Unblocked::Ready(r)) => ctx.reply_owned(r),
        Some(Unblocked::TimedOut) => {
            TIMEOUTS.add(1);
            ctx.reply_error(&timed_out());
        }
        Some(Unblocked::Demoted) => ctx.reply_error(&demoted()),
        Some(Unblocked::TooFew(online, required)) => {
            REFUSED.add(1);
            ctx.reply_error(&too_few(*online, *required));
        }
        None => ctx.reply_error(&crate::error::INTERNAL),
    }
}

/// Redis timed a waiting call out.
pub(crate) fn timeout(ctx: &Ctx) {
    TIMEOUTS.add(1);
    ctx.reply_error(&timed_out());
}

fn timed_out() -> Error {
    let st = state();
    Error::Owned(format!(
        "NOREPLICAS imid: not acknowledged within {} ms by every replica of this primary's term \
         ({}; imid.fence-replicas {}, imid.fence-timeout); nothing was handed out, a retry is \
         safe (with the same IDMP token, if any)",
        fence_timeout_ms(),
        describe(&st.members, mono_ms()),
        REQUIRED.load(Relaxed),
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
    Error::Owned(format!(
        "NOREPLICAS imid: {online} replica(s) online, imid.fence-replicas requires {required}; \
         nothing was handed out"
    ))
}

/// A member has been offline for at least `imid.fence-timeout`: a call that would wait for it
/// is refused at once instead (it would only time out), naming it and what to do.
fn gone_too_long() -> Option<Error> {
    let since = GONE_SINCE.load(Relaxed);
    let now = mono_ms();
    if since == NONE || now.saturating_sub(since) < fence_timeout_ms() {
        return None;
    }
    let st = state();
    let gone: Vec<&Member> = st.members.gone();
    let first = gone.first()?;
    let how = if first.online {
        "has not acknowledged anything"
    } else {
        "has not been connected"
    };
    Some(Error::Owned(format!(
        "NOREPLICAS imid: replica {} of this primary's term {how} for {:.1} s and may hold less \
         than this primary handed out (a failover could promote it); nothing was handed out, a \
         retry is safe once it is back. If it is gone for good: FENCE.FORGET {}",
        first.addr,
        now.saturating_sub(gone_at(first)) as f64 / 1000.0,
        first.addr
    )))
}

fn cannot_wait() -> Error {
    Error::Owned(format!(
        "NOREPLICAS imid: the replicas have not acknowledged enough yet (imid.fence-replicas \
         {}), and a call inside MULTI, a script or a function cannot wait for them; nothing was \
         handed out, retry outside or later",
        REQUIRED.load(Relaxed)
    ))
}

/// [`skip_only`]'s refusal.
pub(crate) fn skip_refused() -> Error {
    Error::Owned(format!(
        "NOREPLICAS imid: this sequence's first value on this node skips imid.seq-gap and must \
         wait until the replicas hold the skip (imid.fence-replicas {}), which a call inside \
         MULTI, a script or a function cannot; the skip was made and sent to them, no value was \
         handed out: retry in a moment",
        REQUIRED.load(Relaxed)
    ))
}

fn demoted() -> Error {
    Error::Static(
        c"NOREPLICAS imid: this node stopped being a primary before its replicas acknowledged; nothing was handed out, retry on the primary",
    )
}

/// The `INFO imid` fields of the fence, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 9] {
    let (waiting, members, online) = {
        let st = state();
        (
            st.queue.len() as u64,
            st.members.len() as u64,
            st.members.online() as u64,
        )
    };
    let active = ACTIVE.load(Relaxed);
    let used = acked_adv().map_or(0, |a| ADVANCED.load(Relaxed).saturating_sub(a));
    [
        (
            "fence_replicas",
            if active { REQUIRED.load(Relaxed) } else { 0 },
        ),
        ("fence_term_replicas", members),
        ("fence_term_replicas_online", online),
        ("fence_waits", WAITS.get()),
        ("fence_waiting", waiting),
        ("fence_timeouts", TIMEOUTS.get()),
        ("fence_refused", REFUSED.get()),
        ("fence_unfenced_idmp", UNFENCED_IDMP.get()),
        ("fence_budget_used", if active { used } else { 0 }),
    ]
}

/// The replicas of this primary's term, for `FENCE.REPLICAS`: each member with its state, and
/// the ms since it joined or went offline.
pub(crate) fn term_replicas() -> Vec<(Member, u64)> {
    let now = mono_ms();
    state()
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
    let forgotten = st.members.forget(addr).map_err(|ForgetError::Online| {
        Error::Owned(format!(
            "ERR replica {addr} is connected to this primary: it counts again at the next \
             reading, so it cannot be forgotten (stop it, or make it replicate another node, \
             first)"
        ))
    })?;
    if forgotten {
        GONE_SINCE.store(st.members.gone_since().unwrap_or(NONE), Relaxed);
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
    if n > 0 && ACTIVE.load(Relaxed) {
        ADVANCED.store(ADVANCED.load(Relaxed).saturating_add(n), Relaxed);
    }
}

/// A key of imid's types appeared under a new name (COPY, RENAME, MOVE): a replica which has
/// not seen the command lacks it there (and would start it at the gap, below the values it
/// holds), so it counts as a whole budget: the next sequence call waits until the replicas
/// hold the command.
pub(crate) fn appeared() {
    advanced(seq_gap().saturating_add(1));
}
