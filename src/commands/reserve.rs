//! The reserve protocol's Redis side, written once for every command that hands out sequence
//! values (SEQ.NEXT, SEQ.HNEXT; IM.SEND takes `settle` and `finish` alone): run `core::reserve::plan` on the call's target, then store,
//! replicate, signal, count and reply as the plan says.
//!
//! Replication: as called when replaying the call reproduces its effect exactly (a replay never
//! applies the gap; an IDMP call decides by the IDMP clock replicas replay, `node::idmp_clock`),
//! else its explicit effect: `SEQ.SET key last` / `SEQ.HSET key field last` for a plain call,
//! `SEQ.IDMPSET key token last expires count dropped` / `SEQ.HIDMPSET key token last expires
//! dropped COUNT count FIELD field SET` for an IDMP one (the value set to `last`, the `dropped`
//! oldest tokens dropped, the token recorded with its absolute expiry and its request). A retry changes nothing and replicates nothing. The key is opened
//! once, for writing, and signalled only when it changed (`Ctx::changed`), so a retry leaves a
//! client's WATCH alone.

use crate::config::seq_gap;
use crate::core::reserve::{self, Idmp, Node, Plan, Record, Refusal, Store};
use crate::core::seq::Seq;
use crate::core::to_i64;
use crate::error::{err, Error};
use crate::host::{Arg, Ctx, Reply};
use crate::node::fence::{self, Need, Verdict};
use crate::node::idmp_clock::CallClock;
use crate::node::{self, SEQ_GAP_SKIPS, SEQ_ISSUED};
use std::ffi::CStr;

/// The write side of a reservation's target (a sequence key, a field of a map).
pub(crate) trait Target: Store {
    /// Stores the new state and, with IDMP, records the token.
    fn commit(&mut self, s: Seq, record: Option<Record<Self::Request>>) -> Result<(), Error>;
}

/// What differs between the commands that reserve: their keyspace event, their explicit
/// effects, and what a reused token's request may differ in.
pub(crate) struct Kind {
    pub(crate) event: &'static CStr,
    /// The plain call's effect (`SEQ.SET key last`, `SEQ.HSET key field last`).
    pub(crate) set: &'static CStr,
    /// The IDMP call's effect.
    pub(crate) idmpset: &'static CStr,
    /// What a request under a reused token may differ in, for the refusal.
    pub(crate) request: &'static str,
    /// The keyspace event of `set` (a call that stored only its gap skip: `fence::skip_only`).
    pub(crate) set_event: &'static CStr,
}

/// The node as the protocol sees it from this call.
struct Here<'c>(&'c Ctx);

impl Node for Here<'_> {
    #[inline]
    fn missing(&self) -> Seq {
        node::missing()
    }
    #[inline]
    fn gap(&self) -> u64 {
        seq_gap()
    }
    #[inline]
    fn is_replay(&self) -> bool {
        self.0.is_replay()
    }
}

/// One reserving call on `target` (the key `key`, a map's `field`): `count` values, with
/// `idmp` (the token argument and its request) when given; replies the last value, or
/// `[last, duplicate]` with IDMP.
#[inline(always)]
pub(crate) fn reserve<T: Target>(
    ctx: &Ctx,
    kind: &Kind,
    key: &Arg,
    field: Option<&Arg>,
    mut target: T,
    count: u64,
    idmp: Option<(&Arg, Idmp<'_, T::Request>, CallClock)>,
) -> Result<(), Error> {
    let (s, verdict) = match settle(
        ctx,
        kind,
        &mut target,
        (key, field),
        count,
        idmp.as_ref().map(|(_, i, _)| i),
        |need| fence::check(ctx, need),
    )? {
        Settled::Skipped(value) => {
            drop(target);
            return Err(skipped_only(ctx, kind, key, field, value));
        }
        Settled::Duplicate(last) => {
            // The token's record may not have reached the replicas yet (its first call may
            // have waited in vain): the answer waits for them as a first one does.
            return match fence::check(ctx, RETRY)? {
                Verdict::Now => {
                    reply_idmp(ctx, last, true);
                    Ok(())
                }
                Verdict::Wait => fence::wait(ctx, idmp_reply(last, true)),
            };
        }
        Settled::Stored(s, verdict) => (s, verdict),
    };
    drop(target);
    let last = s.last;
    // Only now, with the key changed, does the call's IDMP clock become the node's and reach
    // the streams (before the call itself): a refused call wrote nothing.
    let token = idmp.map(|(token, _, clock)| {
        clock.commit(ctx);
        token
    });
    if s.as_called {
        ctx.replicate_verbatim();
    } else {
        match (token, s.effect) {
            // A sequence key's request is its COUNT, which SEQ.IDMPSET takes as the
            // fingerprint; a map's is the field and the COUNT.
            (Some(token), Some([last, expires, dropped])) => match field {
                None => ctx.replicate_token(
                    kind.idmpset,
                    key,
                    token,
                    [last, expires, to_i64(count), dropped],
                ),
                Some(f) => ctx.replicate_field_token(
                    kind.idmpset,
                    key,
                    token,
                    [last, expires, dropped],
                    to_i64(count),
                    f,
                ),
            },
            _ => match field {
                None => ctx.replicate_key_int(kind.set, key, to_i64(last)),
                Some(f) => ctx.replicate_key_arg_int(kind.set, key, f, to_i64(last)),
            },
        }
    }
    finish(ctx, kind, key, &s, count);
    match (verdict, s.effect.is_some()) {
        (Verdict::Now, true) => reply_idmp(ctx, last, false),
        (Verdict::Now, false) => ctx.reply_int(to_i64(last)),
        (Verdict::Wait, true) => return fence::wait(ctx, idmp_reply(last, false)),
        (Verdict::Wait, false) => return fence::wait(ctx, Reply::Int(to_i64(last))),
    }
    Ok(())
}

/// What [`settle`] did.
pub(crate) enum Settled<C> {
    /// A retry: the token's first call replied this; nothing changed.
    Duplicate(u64),
    /// The call cannot wait and would skip the gap (`fence::skip_only`): only the skip was
    /// stored (the target raised to this value, unmarked), nothing handed out; the caller
    /// replicates it and refuses the call ([`skipped_only`]).
    Skipped(u64),
    /// Values reserved and stored, and what the check found.
    Stored(Stored, C),
}

/// A stored reservation: what to replicate, count and reply.
pub(crate) struct Stored {
    /// The block's last value.
    pub(crate) last: u64,
    /// With IDMP, the explicit effect's integers: `last expires dropped`.
    pub(crate) effect: Option<[i64; 3]>,
    /// Replaying the call as called reproduces it.
    pub(crate) as_called: bool,
    skipped_gap: bool,
    replay: bool,
}

/// The protocol's decision and its store, for every command that reserves (SEQ.NEXT and
/// SEQ.HNEXT through [`reserve`], IM.SEND directly, which replicates and replies on its own):
/// runs `core::reserve::plan` on `target` and, when it reserves, `check` with what the fence
/// must allow for the reservation (what else the command must find in order before it writes
/// anything, the fence's verdict among it: its error refuses the call, nothing stored; its
/// value is handed back), then stores what it reserved. Nothing is replicated, signalled or counted here ([`finish`]
/// does the latter two; the caller commits the IDMP clock before it replicates).
#[inline(always)]
pub(crate) fn settle<T: Target, C>(
    ctx: &Ctx,
    kind: &Kind,
    target: &mut T,
    at: (&Arg, Option<&Arg>),
    count: u64,
    idmp: Option<&Idmp<'_, T::Request>>,
    check: impl FnOnce(Need) -> Result<C, Error>,
) -> Result<Settled<C>, Error> {
    let plan = reserve::plan(target, &Here(ctx), count, idmp).map_err(|r| refusal(r, kind))?;
    let r = match plan {
        Plan::Duplicate(last) => return Ok(Settled::Duplicate(last)),
        Plan::Reserve(r) => r,
    };
    // The fence's part, before anything changes (a refusal changes nothing); a replay hands
    // nothing out (the primary did).
    let need = if r.replay {
        Need::default()
    } else {
        let skip = r.next.skipped_gap;
        let target_id =
            (skip || fence::keyed()).then(|| fence::target_id(at.0.bytes(), at.1.map(Arg::bytes)));
        if skip && fence::skip_only(ctx) {
            let raised = r.next.last.saturating_sub(count);
            let state = Seq::new(raised, false).ok_or(crate::error::INTERNAL)?;
            target.commit(state, None)?;
            fence::skipped_only(ctx, target_id.unwrap_or_default());
            return Ok(Settled::Skipped(raised));
        }
        Need {
            advance: count,
            skip,
            target: target_id,
            record: idmp.is_some(),
            ..Need::default()
        }
    };
    let checked = check(need)?;
    let last = r.next.last;
    let effect = r.record.as_ref().map(|rec| {
        [
            to_i64(last),
            to_i64(rec.entry.expires_ms),
            to_i64(rec.dropped as u64),
        ]
    });
    target.commit(r.next.state, r.record)?;
    Ok(Settled::Stored(
        Stored {
            last,
            effect,
            as_called: r.as_called,
            skipped_gap: r.next.skipped_gap,
            replay: r.replay,
        },
        checked,
    ))
}

/// After a stored reservation (and its replication): the gap counter, the key signalled with
/// its keyspace event, the values counted.
#[inline(always)]
pub(crate) fn finish(ctx: &Ctx, kind: &Kind, key: &Arg, s: &Stored, count: u64) {
    if s.skipped_gap {
        SEQ_GAP_SKIPS.add(1);
    }
    ctx.changed(kind.event, key);
    if !s.replay {
        SEQ_ISSUED.add(count);
    }
}

/// After [`Settled::Skipped`]: replicates the skip (`SEQ.SET key value`, `SEQ.HSET key field
/// value`), signals and counts it, and returns the refusal.
pub(crate) fn skipped_only(
    ctx: &Ctx,
    kind: &Kind,
    key: &Arg,
    field: Option<&Arg>,
    value: u64,
) -> Error {
    match field {
        None => ctx.replicate_key_int(kind.set, key, to_i64(value)),
        Some(f) => ctx.replicate_key_arg_int(kind.set, key, f, to_i64(value)),
    }
    ctx.changed(kind.set_event, key);
    SEQ_GAP_SKIPS.add(1);
    fence::skip_refused()
}

fn refusal(r: Refusal, kind: &Kind) -> Error {
    match r {
        Refusal::Overflow => err("sequence overflow"),
        Refusal::ZeroCount => err("COUNT must be an integer in 1..1000000"),
        Refusal::Conflict => err(format_args!(
            "IDMP token already used on this key with another {} (a retry must repeat its request)",
            kind.request
        )),
        Refusal::Token => err("IDMP token must be 1..64 bytes"),
    }
}

/// What an IDMP retry's answer needs from the fence: its record on the replicas.
pub(crate) const RETRY: Need = Need {
    advance: 0,
    skip: false,
    target: None,
    record: true,
    msgid_ms: None,
    uid_ms: None,
};

/// `[last, duplicate]`, kept for a call that waits.
fn idmp_reply(last: u64, duplicate: bool) -> Reply {
    Reply::Array(vec![
        Reply::Int(to_i64(last)),
        Reply::Int(i64::from(duplicate)),
    ])
}

/// `[last, duplicate]`.
fn reply_idmp(ctx: &Ctx, last: u64, duplicate: bool) {
    ctx.reply_array(2);
    ctx.reply_int(to_i64(last));
    ctx.reply_int(i64::from(duplicate));
}
