//! The call gate: what a call hands out ([`Outgoing`]), whether it answers now, waits or is refused
//! ([`check`], [`check_read`]), and its answer ([`Verdict::answer`]: written now, or kept while
//! its client waits). The sequence increases a write made without handing them out
//! ([`charge_raise`], [`key_appeared`]).

use super::errors::{aof_cannot_wait, cannot_wait, gone_too_long};
use super::state::{
    arm_deadline, arm_tick, mono_ms, publish, state, subscribe, COUNTS, LOOP, PUBLISHED,
};
use crate::config::{fence_timeout_ms, seq_gap};
use crate::core::durable::Level;
use crate::core::fence::{Lease, Wait};
use crate::error::Error;
use crate::host::{Answer, Ctx, Reply};
use crate::node::durable;
use std::sync::atomic::Ordering::Relaxed;

/// What a call hands out, for [`check`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Outgoing {
    /// How many sequence values the call reserves (a gap skip is charged to its target).
    pub(crate) values: u64,
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

impl Outgoing {
    /// An IDMP answer alone (a retry's): its record must be held.
    pub(crate) const RETRY: Outgoing = Outgoing {
        values: 0,
        skip: false,
        target: None,
        record: true,
        msgid_ms: None,
        uid_ms: None,
    };

    /// This need and the IDs the call hands out: a message ID of time `msgid_ms`, UIDs up to
    /// time `uid_ms`.
    pub(crate) fn with_ids(self, msgid_ms: Option<u64>, uid_ms: Option<u64>) -> Outgoing {
        Outgoing {
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

/// May the call reply now, must it wait, or is it refused (nothing may change then)? On `Ok`
/// its sequence increase is counted, and the caller makes its writes, then answers. One load
/// when the gate is off; the rest out of line, so that what the callers inline stays that load.
#[inline(always)]
pub(crate) fn check(ctx: &Ctx, need: Outgoing) -> Result<Verdict, Error> {
    if !PUBLISHED.active() {
        return Ok(Verdict::Now);
    }
    // The common case, inlined (the caller's constant fields fold away): values within the
    // budget, no record, no IDs, no gap skip anywhere.
    if !need.record
        && !need.skip
        && need.msgid_ms.is_none()
        && need.uid_ms.is_none()
        && PUBLISHED.skips.load(Relaxed) == 0
    {
        let now = PUBLISHED.advanced.load(Relaxed).saturating_add(need.values);
        if now <= PUBLISHED.limit.load(Relaxed) {
            PUBLISHED.advanced.store(now, Relaxed);
            renew_past_half(ctx, now);
            return Ok(Verdict::Now);
        }
    }
    check_on(ctx, need)
}

/// [`check`] with the gate on.
#[inline(never)]
pub(super) fn check_on(ctx: &Ctx, need: Outgoing) -> Result<Verdict, Error> {
    if PUBLISHED.stale() && PUBLISHED.fence() && !ctx.is_replay() {
        COUNTS.refused.add(1);
        return Err(super::follow::refusal());
    }
    let adv = PUBLISHED.advanced.load(Relaxed);
    let limit = PUBLISHED.limit.load(Relaxed);
    let seq_ok = need.values == 0 || adv.saturating_add(need.values) <= limit;
    let ids_ok = need
        .msgid_ms
        .is_none_or(|t| t < PUBLISHED.msgid_acked.load(Relaxed))
        && need
            .uid_ms
            .is_none_or(|t| t < PUBLISHED.uid_acked.load(Relaxed));
    // Its target's gap skip (this call's, or an earlier one not yet held).
    let skip = need.skip || need.target.is_some_and(skip_pending);
    // A record: the replicas must acknowledge its write; the AOF must not postpone it.
    let record_ok = !need.record || (!PUBLISHED.fence() && durable::record_now());
    if seq_ok && ids_ok && !skip && record_ok {
        let now = adv.saturating_add(need.values);
        PUBLISHED.advanced.store(now, Relaxed);
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
    if !PUBLISHED.active() || ctx.is_replay() {
        return Ok(Verdict::Now);
    }
    read_check(ctx)
}

#[inline(never)]
pub(super) fn read_check(ctx: &Ctx) -> Result<Verdict, Error> {
    let replicas =
        PUBLISHED.fence() && !state().fence_acked_count_covers(PUBLISHED.advanced.load(Relaxed));
    let aof = PUBLISHED.aof() && !durable::written_now();
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

/// Whether calls must look their target up ([`Outgoing::target`]): gap skips are pending.
#[inline(always)]
pub(crate) fn skips_pending() -> bool {
    PUBLISHED.skips.load(Relaxed) > 0
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
pub(super) fn skip_pending(id: u64) -> bool {
    if !skips_pending() {
        return false;
    }
    let st = state();
    (PUBLISHED.fence() && st.book.channel.skip_pending(id))
        || (PUBLISHED.aof() && st.local.channel.skip_pending(id))
}

/// Half the budget used (the node's count `now` past the acknowledgers' renewal point):
/// refresh it before a call has to wait.
#[inline(always)]
pub(super) fn renew_past_half(ctx: &Ctx, now: u64) {
    if now > PUBLISHED.renew_at.load(Relaxed) {
        arm_tick(ctx);
    }
}

/// The node's count after a call that skipped the gap on its target (`id`) and hands out
/// `advance` values: counted at least once, so that a sample (and its acknowledgement) covers
/// the skip; charged to the target with each acknowledger on.
pub(super) fn count_skip(id: Option<u64>, advance: u64) -> u64 {
    let count = PUBLISHED
        .advanced
        .load(Relaxed)
        .saturating_add(advance.max(1));
    let gap = seq_gap();
    let mut st = state();
    let mut now = count;
    if PUBLISHED.fence() {
        now = now.max(st.book.channel.charge_skip(id, count, gap));
    }
    if PUBLISHED.aof() {
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
    PUBLISHED.fence() && !ctx.is_replay() && !ctx.can_block()
}

/// [`store_skip_alone`]'s skip was stored and replicated: charged to its target (`id`).
pub(crate) fn charge_stored_skip(ctx: &Ctx, id: u64) {
    COUNTS.refused.add(1);
    PUBLISHED.advanced.store(count_skip(Some(id), 0), Relaxed);
    arm_tick(ctx);
}

/// What a call that cannot answer at once waits for, from each acknowledger on: the replicas
/// when their budget, lease, a skip or a record needs them; the AOF, fsynced for a value (the
/// budget, a lease, a skip), written (or, unsynced under `always`, fsynced) for a record.
pub(super) fn what_to_wait_for(need: Outgoing) -> Wait {
    let adv = PUBLISHED.advanced.load(Relaxed);
    let gap = seq_gap();
    let st = state();
    let beyond = |limit: u64, (m, u): (u64, u64), skip: bool| {
        (need.values > 0 && adv.saturating_add(need.values) > limit)
            || need.msgid_ms.is_some_and(|t| t >= m)
            || need.uid_ms.is_some_and(|t| t >= u)
            || skip
    };
    let skip_of = |pending: bool| need.skip || need.target.is_some() && pending;
    let replicas = PUBLISHED.fence() && {
        let c = &st.book.channel;
        let skip = skip_of(need.target.is_some_and(|t| c.skip_pending(t)));
        need.record || beyond(c.limit(gap), c.ids_acked(), skip)
    };
    let aof = PUBLISHED.aof().then(|| {
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
/// replicas hold inside MULTI or a script, answer now. Inside MULTI, a script or a function
/// nothing can wait, so such a call is refused instead, unless all it lacks is the replicas'
/// copy of an IDMP record or an AOF write Redis makes before its reply (both counted).
#[cold]
#[inline(never)]
pub(super) fn wait_or_refuse(ctx: &Ctx, need: Outgoing) -> Result<Verdict, Error> {
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
        count_skip(need.target, need.values)
    } else {
        PUBLISHED.advanced.load(Relaxed).saturating_add(need.values)
    };
    PUBLISHED.advanced.store(now, Relaxed);
    // As on the fast path: IDMP answers inside MULTI or a script come only here, and without
    // this got the budget back only from the cron.
    renew_past_half(ctx, now);
    Ok(verdict)
}

/// The call waits for `w`: its client is blocked, and `reply` goes out once that is held, or
/// the gate's error after `imid.fence-timeout` (the deadline timer runs the round that times
/// it out). A waiting call is answered by one path only: the round that releases it, times it
/// out or finds the node demoted unblocks it, and the reply callback writes what that round
/// decided; Redis keeps no timeout of its own for it (`host::fence`, `Ctx::block`).
pub(super) fn wait(ctx: &Ctx, w: Wait, reply: Reply) -> Result<(), Error> {
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

/// A lease renewal to `until` was propagated in the running call (`node::ids`).
pub(crate) fn renewed(ctx: &Ctx, lease: Lease, until: u64) {
    if PUBLISHED.active() {
        let mut st = state();
        if PUBLISHED.fence() {
            st.book.channel.renewed(lease, until);
        }
        if PUBLISHED.aof() {
            st.local.channel.renewed(lease, until);
        }
        drop(st);
        arm_tick(ctx);
    }
}

/// A write raised sequence values by `n` without handing them out (SEQ.SET, SEQ.ADVANCE, their
/// map forms, an internal SEQ.IDMPSET from a client): counted, so that the next call that hands
/// out values waits for an acknowledgement covering it (a promoted replica or a restart that
/// never saw the raise would otherwise hand out values above the old ones only by the gap).
#[inline]
pub(crate) fn charge_raise(n: u64) {
    if n > 0 && PUBLISHED.active() {
        let now = PUBLISHED.advanced.load(Relaxed).saturating_add(n);
        PUBLISHED.advanced.store(now, Relaxed);
    }
}

/// A key of imid's types appeared under a new name (COPY, RENAME, MOVE): a replica which has
/// not seen the command lacks it there (and would start it at the gap, below the values it
/// holds), so it counts as a whole budget: the next sequence call waits until the
/// acknowledgers hold the command.
pub(crate) fn key_appeared() {
    charge_raise(
        durable::skip_gap()
            .max(durable::stream_gap())
            .saturating_add(1),
    );
}
