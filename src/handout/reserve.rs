//! Reserve sequence values, with an IDMP token: the reserve protocol's Redis side, for every
//! command that hands out sequence values. `core::reserve::plan` decides; [`plan`] asks it and
//! says what the call needs from the gate; [`Reservation::store`] stores the block; [`next`] is
//! SEQ.NEXT and SEQ.HNEXT whole (through the runner). IM.SEND and IM.CHANGE take [`plan`] and
//! [`Reservation::store`] and write and replicate the rest themselves. The two data types'
//! adapters ([`Target`] for a sequence key and for a map's [`Field`]) are here too.
//!
//! Replication: as called when replaying the call reproduces its effect exactly (a replay never
//! applies the gap; an IDMP call decides by the IDMP clock replicas replay, `node::idmp_clock`),
//! else its explicit effect: `SEQ.SET key last` / `SEQ.HSET key field last` for a plain call,
//! `SEQ.IDMPSET key token last expires count dropped` / `SEQ.HIDMPSET key token last expires
//! dropped COUNT count FIELD field SET` for an IDMP one. A retry changes and replicates nothing,
//! and leaves a client's WATCH alone: the key is signalled only when it changed.

use super::gate;
use crate::core::idmp::{FieldRequest, MapTokens, Request, SeqTokens};
use crate::core::reserve::{self, Idmp, Node, Plan, Record, Refusal, Store};
use crate::core::seq::Seq;
use crate::core::seqmap::Located;
use crate::core::to_i64;
use crate::error::{err, Error, INTERNAL};
use crate::host::{Answer, Arg, Ctx, Reply};
use crate::node::fence::{self, Outgoing};
use crate::node::idmp_clock::{self, CallClock};
use crate::node::{self, SEQ_GAP_SKIPS, SEQ_ISSUED};
use crate::types::map::key::MapKey;
use crate::types::seq::key::SeqKey;
use std::ffi::CStr;

/// The write side of a reservation's target (a sequence key, a field of a map).
pub(crate) trait Target: Store {
    /// The names its writes go by.
    const NAMES: Names;
    /// Stores the new state and, with IDMP, records the token (not charged: the call's
    /// [`Outgoing`] charges the gate).
    fn commit(&mut self, s: Seq, record: Option<Record<Self::Request>>) -> Result<(), Error>;
}

/// The names a target's writes go by: the keyspace event of a reservation (`seq.next`), the
/// command its plain effect replicates as (`SEQ.SET key last`, `SEQ.HSET key field last`) and
/// that command's event, and the command of its IDMP effect (`SEQ.IDMPSET`).
pub(crate) struct Names {
    pub(crate) event: &'static CStr,
    set: &'static CStr,
    set_event: &'static CStr,
    idmpset: &'static CStr,
}

/// A sequence key as the target of SEQ.NEXT (IM.SEND's seq): its tokens remember the COUNT.
impl Store for SeqKey<'_> {
    type Request = u64;
    #[inline(always)]
    fn state(&self) -> Option<Seq> {
        self.get()
    }
    fn tokens(&self) -> Option<&SeqTokens> {
        self.window()
    }
}

impl Target for SeqKey<'_> {
    const NAMES: Names = Names {
        event: c"seq.next",
        set: c"SEQ.SET",
        set_event: c"seq.set",
        idmpset: c"SEQ.IDMPSET",
    };
    #[inline(always)]
    fn commit(&mut self, s: Seq, record: Option<Record<u64>>) -> Result<(), Error> {
        match record {
            None => self.store(s),
            Some(r) => self.store_with_token(s, r.dropped, r.entry),
        }
    }
}

/// One field of a map key, as the target of SEQ.HNEXT (IM.CHANGE's kind): located once (one
/// hash and one probe for the read and the write).
pub(crate) struct Field<'k, 'a> {
    key: MapKey<'a>,
    name: &'k [u8],
    at: Option<Located>,
}

impl<'k, 'a> Field<'k, 'a> {
    /// Opens `key` for writing and locates the field `name` in it.
    #[inline(always)]
    pub(crate) fn open(ctx: &'a Ctx, key: &'a Arg, name: &'k [u8]) -> Result<Field<'k, 'a>, Error> {
        let key = MapKey::open_write(ctx, key)?;
        let at = key.get().map(|m| m.locate(name));
        Ok(Field { key, name, at })
    }
}

/// Its tokens remember the field and the COUNT.
impl Store for Field<'_, '_> {
    type Request = FieldRequest;
    #[inline(always)]
    fn state(&self) -> Option<Seq> {
        self.key
            .get()
            .zip(self.at.as_ref())
            .and_then(|(m, at)| m.state(at))
    }
    fn tokens(&self) -> Option<&MapTokens> {
        self.key.get().and_then(|m| m.tokens.as_deref())
    }
}

impl Target for Field<'_, '_> {
    const NAMES: Names = Names {
        event: c"seq.hnext",
        set: c"SEQ.HSET",
        set_event: c"seq.hset",
        idmpset: c"SEQ.HIDMPSET",
    };
    #[inline(always)]
    fn commit(&mut self, s: Seq, record: Option<Record<FieldRequest>>) -> Result<(), Error> {
        let (name, at) = (self.name, self.at.take());
        self.key.update(|m| match at {
            Some(at) => m.store(name, at, s),
            None => m.set(name, s),
        })?;
        if let Some(r) = record {
            self.key.record_token(r.dropped, r.entry)?;
        }
        Ok(())
    }
}

/// The node as the protocol sees it from this call.
struct ThisNode<'c>(&'c Ctx);

impl Node for ThisNode<'_> {
    #[inline]
    fn missing(&self) -> Seq {
        node::missing()
    }
    #[inline]
    fn gap(&self) -> u64 {
        node::durable::skip_gap()
    }
    #[inline]
    fn is_replay(&self) -> bool {
        self.0.is_replay()
    }
}

/// An IDMP call: its token, the request a retry must repeat, and the clock it decides by (read
/// once, the node's only once the call changed its key: [`CallClock`]).
pub(crate) struct IdmpCall<'a, R: Request> {
    request: Idmp<'a, R>,
    clock: CallClock,
}

impl<'a, R: Request> IdmpCall<'a, R> {
    pub(crate) fn new(ctx: &Ctx, token: &'a [u8], ask: R::Ask<'a>) -> Result<Self, Error> {
        let clock = idmp_clock::for_call(ctx)?;
        let request = Idmp {
            token,
            ask,
            clock: clock.clock(),
        };
        Ok(IdmpCall { request, clock })
    }
}

/// SEQ.NEXT and SEQ.HNEXT: `count` values of `target` (the key `key`, a map's `field`), with
/// `idmp` (the token argument and its call) when given; replies the last value, or `[last,
/// duplicate]` with IDMP.
#[inline(always)]
pub(crate) fn next<T: Target>(
    ctx: &Ctx,
    key: &Arg,
    field: Option<&Arg>,
    target: T,
    count: u64,
    idmp: Option<(&Arg, IdmpCall<'_, T::Request>)>,
) -> Result<(), Error> {
    let (token, call) = idmp.unzip();
    let r = match plan(ctx, target, (key, field), count, call)? {
        Planned::Retry(last) => return gate::retry(ctx, &IdmpReply(last, true)),
        Planned::Reserve(r) => r,
    };
    let verdict = gate::enter(ctx, r.need())?;
    let block = r.store(ctx)?;
    replicate::<T>(ctx, (key, field), token, &block, count);
    signal_and_count::<T>(ctx, key, &block, count);
    match block.effect {
        Some(_) => gate::leave(ctx, verdict, &IdmpReply(block.last, false)),
        None => gate::leave(ctx, verdict, &to_i64(block.last)),
    }
}

/// What [`plan`] found. Returned once per call, on the stack: boxing the big variant would cost
/// every call an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Planned<T: Target> {
    /// A retry: the token's first call replied this; nothing changes. Its answer waits for the
    /// record as a first one does (`gate::retry`): the first call may have waited in vain.
    Retry(u64),
    /// Values to reserve, once the gate lets the call through.
    Reserve(Reservation<T>),
}

/// A planned reservation, not stored yet: what the gate must allow, and the write.
pub(crate) struct Reservation<T: Target> {
    target: T,
    plan: reserve::Reservation<T::Request>,
    idmp: Option<CallClock>,
    need: Outgoing,
}

/// A stored reservation: what to replicate, count and reply.
pub(crate) struct Block {
    /// The block's last value.
    pub(crate) last: u64,
    /// With IDMP, the explicit effect's integers: `last expires dropped`.
    pub(crate) effect: Option<[i64; 3]>,
    /// Replaying the call as called reproduces it.
    pub(crate) as_called: bool,
    skipped_gap: bool,
    replay: bool,
}

/// The protocol's decision for every command that reserves: plans `count` values on `target`
/// (at `key`, a map's `field`), and what the gate must allow for them. Nothing changes here,
/// but for one case: a call that skips the gap and cannot wait for the replicas (inside MULTI,
/// a script or a function) stores and replicates only its gap skip and is refused.
#[inline(always)]
pub(crate) fn plan<'a, T: Target>(
    ctx: &Ctx,
    mut target: T,
    at: (&Arg, Option<&Arg>),
    count: u64,
    idmp: Option<IdmpCall<'a, T::Request>>,
) -> Result<Planned<T>, Error> {
    let request = idmp.as_ref().map(|i| &i.request);
    let p = reserve::plan(&target, &ThisNode(ctx), count, request).map_err(refusal::<T>)?;
    let r = match p {
        Plan::Duplicate(last) => return Ok(Planned::Retry(last)),
        Plan::Reserve(r) => r,
    };
    // The gate's part, before anything changes; a replay hands nothing out (the primary did).
    let need = if r.replay {
        Outgoing::default()
    } else {
        let skip = r.next.skipped_gap;
        let target_id = (skip || fence::skips_pending())
            .then(|| fence::target_id(at.0.bytes(), at.1.map(Arg::bytes)));
        if skip && fence::store_skip_alone(ctx) {
            let raised = r.next.last.saturating_sub(count);
            target.commit(Seq::new(raised, false).ok_or(INTERNAL)?, None)?;
            drop(target);
            fence::charge_stored_skip(ctx, target_id.unwrap_or_default());
            return Err(refuse_skip::<T>(ctx, at, raised));
        }
        Outgoing {
            values: count,
            skip,
            target: target_id,
            record: idmp.is_some(),
            ..Outgoing::default()
        }
    };
    Ok(Planned::Reserve(Reservation {
        target,
        plan: r,
        idmp: idmp.map(|i| i.clock),
        need,
    }))
}

impl<T: Target> Reservation<T> {
    /// What the gate must allow for it ([`gate::run`]).
    #[inline(always)]
    pub(crate) fn need(&self) -> Outgoing {
        self.need
    }

    /// Stores the block; the target is closed before this returns. The IDMP clock becomes the
    /// node's and reaches the streams, ahead of whatever the caller replicates.
    #[inline(always)]
    pub(crate) fn store(self, ctx: &Ctx) -> Result<Block, Error> {
        let Reservation {
            mut target,
            plan: r,
            idmp,
            ..
        } = self;
        let block = Block {
            last: r.next.last,
            effect: r.record.as_ref().map(|rec| {
                let dropped = to_i64(rec.dropped as u64);
                [to_i64(r.next.last), to_i64(rec.entry.expires_ms), dropped]
            }),
            as_called: r.as_called,
            skipped_gap: r.next.skipped_gap,
            replay: r.replay,
        };
        target.commit(r.next.state, r.record)?;
        drop(target);
        if let Some(clock) = idmp {
            clock.commit(ctx);
        }
        Ok(block)
    }
}

/// A stored block replicated: as called when that reproduces it, else its explicit effect.
fn replicate<T: Target>(
    ctx: &Ctx,
    (key, field): (&Arg, Option<&Arg>),
    token: Option<&Arg>,
    block: &Block,
    count: u64,
) {
    if block.as_called {
        return ctx.replicate_verbatim();
    }
    // A sequence key's request is its COUNT, which SEQ.IDMPSET takes as the fingerprint; a
    // map's is the field and the COUNT.
    match (token, block.effect, field) {
        (Some(token), Some([last, expires, dropped]), None) => ctx.replicate_token(
            T::NAMES.idmpset,
            key,
            token,
            [last, expires, to_i64(count), dropped],
        ),
        (Some(token), Some([last, expires, dropped]), Some(f)) => {
            let effect = [last, expires, dropped];
            ctx.replicate_field_token(T::NAMES.idmpset, key, token, effect, to_i64(count), f)
        }
        _ => replicate_set::<T>(ctx, (key, field), block.last),
    }
}

/// `SEQ.SET key value` / `SEQ.HSET key field value`.
fn replicate_set<T: Target>(ctx: &Ctx, (key, field): (&Arg, Option<&Arg>), value: u64) {
    match field {
        None => ctx.replicate_key_int(T::NAMES.set, key, to_i64(value)),
        Some(f) => ctx.replicate_key_arg_int(T::NAMES.set, key, f, to_i64(value)),
    }
}

/// After a stored block: the key signalled with its keyspace event, the gap skip and the values
/// counted for `INFO imid`.
#[inline(always)]
pub(crate) fn signal_and_count<T: Target>(ctx: &Ctx, key: &Arg, block: &Block, count: u64) {
    if block.skipped_gap {
        SEQ_GAP_SKIPS.add(1);
    }
    ctx.changed(T::NAMES.event, key);
    if !block.replay {
        SEQ_ISSUED.add(count);
    }
}

/// A call that cannot wait stored only its gap skip (the target raised to `value`, nothing
/// handed out: `fence::store_skip_alone`): the skip replicated, signalled and counted, and the
/// call refused, so that its retry, once the replicas hold the skip, answers.
#[cold]
fn refuse_skip<T: Target>(ctx: &Ctx, at: (&Arg, Option<&Arg>), value: u64) -> Error {
    replicate_set::<T>(ctx, at, value);
    ctx.changed(T::NAMES.set_event, at.0);
    SEQ_GAP_SKIPS.add(1);
    fence::skip_refused()
}

fn refusal<T: Target>(r: Refusal) -> Error {
    match r {
        Refusal::Overflow => err("sequence overflow"),
        Refusal::ZeroCount => err("COUNT must be an integer in 1..1000000"),
        Refusal::Conflict => err(format_args!(
            "IDMP token already used on this key with another {} (a retry must repeat its request)",
            T::Request::NAME
        )),
        Refusal::Token => err("IDMP token must be 1..64 bytes"),
    }
}

/// An IDMP call's reply: `[last, duplicate]`.
struct IdmpReply(u64, bool);

impl Answer for IdmpReply {
    fn write(&self, ctx: &Ctx) {
        ctx.reply_array(2);
        ctx.reply_int(to_i64(self.0));
        ctx.reply_int(i64::from(self.1));
    }
    fn keep(&self) -> Reply {
        Reply::Array(vec![
            Reply::Int(to_i64(self.0)),
            Reply::Int(i64::from(self.1)),
        ])
    }
}
