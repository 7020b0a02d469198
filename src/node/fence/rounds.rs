//! The rounds and when they run: a round ([`tick`]) reads `ROLE`, releases what the replicas
//! hold and asks them for more; it runs from the one-shot timers ([`on_timer`]), before the
//! event loop sleeps ([`before_sleep`], where the AOF's samples are taken too), and from the
//! cron ([`cron`]); imid's own fsync of the AOF ([`fsynced`]); a released call's reply and its
//! free ([`reply_released`], [`freed`]).

use super::errors::{demoted, not_durable, timed_out, too_few};
use super::state::{
    arm_deadline, arm_tick, fsync_failed, mono_ms, publish, release, release_ready, state,
    subscribe, Released, State, Unblocked, COUNTS, LOOP, NONE, PUBLISHED,
};
use super::term::{drop_migrated, follow_term, prune_facks, read_min_replicas};
use crate::config::{seq_gap, CLUSTER_MODE, FENCE_ACK};
use crate::core::durable::Level;
use crate::core::fence::{info_replica, Reading};
use crate::host::aof::FSYNCER;
use crate::host::fence::Timer;
use crate::host::server::ServerInfo;
use crate::host::Ctx;
use crate::node::durable;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
        (st.queue.is_empty(), PUBLISHED.aof() && aof_pending(&st))
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
/// will not postpone its write (this iteration's replies go out after it); imid's own thread
/// fsyncs it (`host::aof`, [`fsynced`]).
pub(crate) fn before_sleep(ctx: &Ctx) {
    LOOP.awake.store(false, Relaxed);
    if PUBLISHED.aof() {
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
pub(super) fn aof_pending(st: &State) -> bool {
    let c = &st.local.channel;
    st.queue.waits_for_aof()
        || PUBLISHED.advanced.load(Relaxed) > c.renew_at(seq_gap())
        || c.renewal_pending()
        || c.gap_pending()
        || c.skips() > 0
}

/// Before the event loop sleeps, with the AOF gate on: where nothing propagated so far can be
/// postponed, a sample (its point written at once) and the calls waiting for that released;
/// then an fsync for the next iteration, when one is wanted.
pub(super) fn aof_upkeep(ctx: &Ctx) {
    let advanced = PUBLISHED.advanced.load(Relaxed);
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
pub(super) fn start_fsync(ctx: &Ctx) {
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

/// The server's cron: follows the configs, and while the gate is on runs a round every tick
/// (so a replica that comes online joins at once and one that left is seen gone), reads the
/// replicas' lags and measures the rate for the gap. Off, it releases the calls still waiting
/// from when it was on.
pub(crate) fn cron(ctx: &Ctx) {
    read_min_replicas(ctx);
    super::follow::upkeep(ctx, ctx.is_primary());
    // The AOF's settings follow their config events; read again once a second besides, should
    // an event have been missed (five CONFIG GETs: not every tick).
    static REFRESHED: AtomicU64 = AtomicU64::new(0);
    let now = mono_ms();
    if now.saturating_sub(REFRESHED.load(Relaxed)) >= 1000 {
        REFRESHED.store(now, Relaxed);
        durable::refresh(ctx);
    }
    follow_term();
    // What replicas report fsynced is read by a command filter, registered once the fence is
    // first on (until then every command would pay for it).
    if PUBLISHED.fence() {
        ctx.watch_replconf();
    }
    let waiting = !state().queue.is_empty();
    if PUBLISHED.active() || LOOP.subscribed.load(Relaxed) || waiting {
        arm_tick(ctx);
    }
    if PUBLISHED.fence() {
        read_lags();
    }
    if PUBLISHED.gone_since.load(Relaxed) != NONE && CLUSTER_MODE.load(Relaxed) {
        drop_migrated(ctx);
    }
    if PUBLISHED.active() {
        gap_upkeep(ctx);
    }
    prune_facks();
}

/// The gap in force, raised or lowered as the node's rate and its acknowledgers' rounds say
/// (`node::durable::next_record`): a new `SEQ.GAP` record to the AOF and the replicas, noted
/// with each acknowledger. Not while writes are paused (nothing may be propagated then).
pub(super) fn gap_upkeep(ctx: &Ctx) {
    if ctx.writes_paused() || !ctx.is_primary() {
        return;
    }
    let round_ms = {
        let st = state();
        let aof = PUBLISHED.aof().then(|| st.local.round_ms()).flatten();
        let fence = PUBLISHED
            .fence()
            .then(|| st.book.channel.round_ms())
            .flatten();
        aof.max(fence).unwrap_or(0)
    };
    let Some(gap) = durable::next_record(PUBLISHED.advanced.load(Relaxed), mono_ms(), round_ms)
    else {
        return;
    };
    ctx.replicate_int(c"SEQ.GAP", crate::core::to_i64(gap));
    durable::written(gap);
    COUNTS.gap_records.add(1);
    let mut st = state();
    if PUBLISHED.fence() {
        st.book.channel.gap_written(gap);
    }
    if PUBLISHED.aof() {
        st.local.channel.gap_written(gap);
    }
    publish(&st);
    drop(st);
    arm_tick(ctx);
}

/// Each online replica's `lag` (`INFO replication`): one silent for `core::fence::QUIET_S`
/// counts as gone though its link looks up, so calls beyond what it acknowledged are refused
/// at once rather than each waiting out `imid.fence-timeout`.
pub(super) fn read_lags() {
    let Some(info) = ServerInfo::read(c"replication") else {
        return;
    };
    let n = info
        .int_field(c"connected_slaves")
        .unwrap_or(0)
        .clamp(0, 1024);
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

/// One fence round ([`Book::round`]) on the offsets `ROLE` shows (with what each replica last
/// reported fsynced), then the calls it released or timed out answered and the replicas asked
/// for more (`REPLCONF GETACK *`). The bookkeeping is Redis-free: `core::fence::Book` for the
/// replicas, `core::durable::Local` for the AOF, each counting a `core::fence::Channel`, and
/// the waiting calls' `core::fence::Queue`; rounds run before the event loop sleeps while
/// something waits, from one-shot timers, and from the cron.
/// Off, or on a replica, whoever still waits for the replicas is answered as without the fence.
pub(super) fn tick(ctx: &Ctx) {
    let role = if PUBLISHED.fence() { ctx.role() } else { None };
    if !PUBLISHED.fence() {
        // Off: nothing to wait for from the replicas any more.
        release_ready(&mut state());
    }
    let (round, too_few, required) = match role {
        Some(role) => {
            let mut st = state();
            let required = usize::try_from(st.required).unwrap_or(usize::MAX);
            let advanced = PUBLISHED.advanced.load(Relaxed);
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
    let Some(round) = round else {
        return;
    };
    for (addr, n) in &round.shared {
        ctx.log_warning(&format!(
            "imid: {n} replicas announce the address {addr} (replica-announce-ip/-port, or a \
             replica restarted under another's address): the fence cannot tell them apart, so it \
             counts them by the lowest acknowledgement among them, and while fewer than {n} are \
             connected as a replica gone; give each replica its own address"
        ));
    }
    if round.ask {
        ctx.request_acks();
    }
}

/// The calls past their deadline answered with what they still miss; with fewer replicas
/// online than required, every call waiting for them.
pub(super) fn expire(too_few: Option<usize>, required: u64) {
    let expired = {
        let mut st = state();
        let acked = if PUBLISHED.fence() {
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
pub(super) fn with_fsynced(
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

/// A released call's reply callback: its reply, or the error.
pub(crate) fn reply_released(ctx: &Ctx) {
    let Some(released) = ctx.blocked_payload::<Released>() else {
        return ctx.reply_error(&crate::error::INTERNAL);
    };
    released.replied.set(true);
    // FENCE.FORGET's probe is no fenced call: not in the fence's counts.
    if !matches!(released.what, Unblocked::Forget(..)) {
        COUNTS.replied.add(1);
    }
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
        Unblocked::Forget(addr, found) => match super::term::forget_probed(ctx, addr, found) {
            Ok(f) => ctx.reply_int(i64::from(f)),
            Err(e) => ctx.reply_error(&e),
        },
    }
}

/// A released call's payload is freed: counted as dropped when no reply callback ran (its
/// client was gone). Runs in the free callback: nothing here calls Redis or can panic.
pub(crate) fn freed(released: &Released) {
    if !released.replied.get() && !matches!(released.what, Unblocked::Forget(..)) {
        COUNTS.dropped.add(1);
    }
}
