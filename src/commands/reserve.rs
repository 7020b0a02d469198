//! The reserve protocol's Redis side, written once for every command that hands out sequence
//! values (SEQ.NEXT, SEQ.HNEXT): run `core::reserve::plan` on the call's target, then store,
//! replicate, signal, count and reply as the plan says.
//!
//! Replication: as called when replaying the call reproduces its effect exactly (a replay never
//! applies the gap; an IDMP call decides by the IDMP clock replicas replay, `node::idmp_clock`),
//! else its explicit effect: `SEQ.SET key last` / `SEQ.HSET key field last` for a plain call,
//! `SEQ.IDMPSET key token last expires fingerprint dropped` / `SEQ.HIDMPSET ... field` for an
//! IDMP one (the value set to `last`, the `dropped` oldest tokens dropped, the token recorded
//! with its absolute expiry). A retry changes nothing and replicates nothing. The key is opened
//! once, for writing, and signalled only when it changed (`Ctx::changed`), so a retry leaves a
//! client's WATCH alone.

use crate::config::seq_gap;
use crate::core::int;
use crate::core::reserve::{self, Idmp, Node, Plan, Record, Refusal, Store};
use crate::core::seq::Seq;
use crate::error::{err, Error};
use crate::host::Owned;
use crate::host::{Arg, Ctx};
use crate::node::fence::{self, Need, Verdict};
use crate::node::{self, SEQ_GAP_SKIPS, SEQ_ISSUED};
use std::ffi::CStr;

/// The write side of a reservation's target (a sequence key, a field of a map).
pub(crate) trait Target: Store {
    /// Stores the new state and, with IDMP, records the token.
    fn commit(&mut self, s: Seq, record: Option<Record>) -> Result<(), Error>;
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
pub(crate) fn reserve(
    ctx: &Ctx,
    kind: &Kind,
    key: &Arg,
    field: Option<&Arg>,
    mut target: impl Target,
    count: u64,
    idmp: Option<(&Arg, Idmp)>,
) -> Result<(), Error> {
    let plan = reserve::plan(&target, &Here(ctx), count, idmp.as_ref().map(|(_, i)| i))
        .map_err(|r| refusal(r, kind))?;
    let r = match plan {
        Plan::Duplicate(last) => {
            // The token's record may not have reached the replicas yet (its first call may
            // have waited in vain): the answer waits for them as a first one does.
            let need = Need {
                record: true,
                ..Need::default()
            };
            return match fence::check(ctx, need)? {
                Verdict::Now => {
                    reply_idmp(ctx, last, true);
                    Ok(())
                }
                Verdict::Wait => fence::wait(ctx, idmp_reply(last, true)),
            };
        }
        Plan::Reserve(r) => r,
    };
    let last = r.next.last;
    // The fence, before anything changes (a refusal changes nothing). A replay hands nothing
    // out (the primary did).
    let verdict = if r.replay {
        Verdict::Now
    } else {
        let skipped = if r.next.skipped_gap { seq_gap() } else { 0 };
        let need = Need {
            advance: count.saturating_add(skipped),
            record: idmp.is_some(),
            ..Need::default()
        };
        fence::check(ctx, need)?
    };
    let effect = r.record.as_ref().map(|rec| {
        [
            int(last),
            int(rec.entry.expires_ms),
            rec.entry.fingerprint as i64,
            int(rec.dropped as u64),
        ]
    });
    target.commit(r.next.state, r.record)?;
    drop(target);
    if r.as_called {
        ctx.replicate_verbatim();
    } else {
        match (idmp, effect) {
            (Some((token, _)), Some(ints)) => {
                ctx.replicate_token(kind.idmpset, key, token, ints, field)
            }
            _ => match field {
                None => ctx.replicate_key_int(kind.set, key, int(last)),
                Some(f) => ctx.replicate_key_arg_int(kind.set, key, f, int(last)),
            },
        }
    }
    if r.next.skipped_gap {
        SEQ_GAP_SKIPS.add(1);
    }
    ctx.changed(kind.event, key);
    if !r.replay {
        SEQ_ISSUED.add(count);
    }
    match (verdict, effect.is_some()) {
        (Verdict::Now, true) => reply_idmp(ctx, last, false),
        (Verdict::Now, false) => ctx.reply_int(int(last)),
        (Verdict::Wait, true) => return fence::wait(ctx, idmp_reply(last, false)),
        (Verdict::Wait, false) => return fence::wait(ctx, Owned::Int(int(last))),
    }
    Ok(())
}

/// `[last, duplicate]`, kept for a call that waits.
fn idmp_reply(last: u64, duplicate: bool) -> Owned {
    Owned::Array(vec![
        Owned::Int(int(last)),
        Owned::Int(i64::from(duplicate)),
    ])
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

/// `[last, duplicate]`.
fn reply_idmp(ctx: &Ctx, last: u64, duplicate: bool) {
    ctx.reply_array(2);
    ctx.reply_int(int(last));
    ctx.reply_int(i64::from(duplicate));
}
