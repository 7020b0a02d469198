//! SEQ.NEXT / GET / MGET / SET / ADVANCE, and SEQ.IDMPSET (the replicated form of IDMP).
//!
//! Replication (to replicas and the AOF) follows one rule: a write goes as called when replaying
//! it reproduces the primary's effect exactly, else as its explicit effect `SEQ.SET key value`.
//! SEQ.SET and SEQ.ADVANCE are deterministic given the key's value, and so is SEQ.NEXT except
//! for the never-reissue gap: a SEQ.NEXT that skipped the gap replicates `SEQ.SET`, every other
//! one goes as called, and a SEQ.NEXT replayed from the primary or the AOF never applies the gap.
//! Nothing is replicated when nothing changed.
//!
//! `SEQ.NEXT ... IDMP token` decides by the clock (a token's expiry) and two configs (which tokens
//! to drop). It decides by the IDMP clock (`node::idmp_clock`), which the primary writes to
//! replicas and the AOF as `SEQ.IDMPCLOCK ms ttl-ms max` before the first call that uses it, so
//! replay decides alike and the call replicates as called. Where that cannot hold it replicates
//! its explicit effect, `SEQ.IDMPSET key token last expires fingerprint dropped`, which sets the
//! value to `last`, drops the `dropped` oldest tokens and records the token with its absolute
//! expiry: when the call skipped the gap (replay never does), and on a Valkey 9 cluster node
//! (see `node::idmp_clock`). A duplicate changes nothing and replicates nothing (but the clock,
//! when it moved).
//!
//! Every write opens its key once, for writing, and signals it only when it changed it
//! (`Ctx::changed`): a no-op (an older ack, the same value, an IDMP retry) leaves a client's
//! WATCH alone.

use crate::config::seq_gap;
use crate::core::idmp::{fingerprint, Entry, Lookup};
use crate::core::seq::{Next, NextError, Seq, MAX_BLOCK, MAX_VALUE};
use crate::error::{err, Error, SYNTAX};
use crate::glue::{Arg, Ctx};
use crate::node::idmp_clock::Clock;
use crate::node::{self, SEQ_GAP_SKIPS, SEQ_ISSUED};
use crate::seq_type::{check_token, SeqKey};
use std::ffi::CStr;

/// The `INFO imid` fields of this family, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 6] {
    let exposure = node::exposure::current();
    [
        ("seq_issued", SEQ_ISSUED.get()),
        ("seq_gap_skips", SEQ_GAP_SKIPS.get()),
        ("seq_missing_keys_skip_gap", u64::from(node::inherited())),
        ("seq_issued_since_snapshot", exposure.issued),
        ("seq_gap_skips_since_snapshot", exposure.skips),
        ("seq_exposure_exceeds_gap", u64::from(exposure.exceeds_gap)),
    ]
}

pub(crate) fn value_arg(arg: &Arg) -> Result<u64, Error> {
    // The range starts at 0, so the conversion keeps the value.
    arg.int_in("value", 0, MAX_VALUE as i64)
        .map(|v| v.unsigned_abs())
}

/// The state a write starts from: a missing key is 0, marked for the gap when this node
/// inherited its data (see `node::inherited`).
fn current(k: &SeqKey) -> Seq {
    k.get()
        .unwrap_or_else(|| Seq::new(0, node::inherited()).unwrap_or_default())
}

/// Sequence values are at most 2^63-1 by construction.
pub(crate) fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// SEQ.NEXT key [COUNT n] [IDMP token]
pub(crate) fn next(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let (count, token) = next_options(opts)?;
    if let Some(token) = token {
        return next_idmp(ctx, key, count, token);
    }
    let mut k = SeqKey::open(ctx, key, true)?;
    let (n, replay) = reserve(ctx, &k, count)?;
    k.set(n.state)?;
    drop(k);
    next_done(ctx, key, c"seq.next", n, replay, count, || {
        ctx.replicate_key_int(c"SEQ.SET", key, int(n.last))
    });
    Ok(())
}

/// The end of a plain NEXT (SEQ.NEXT's, SEQ.HNEXT's) that stored its reservation: replicated
/// as called, or by `effect` when it skipped the gap (replay could not know it was due);
/// counted (a replay hands nothing out: the primary did), signalled as `event`, replied.
#[inline(always)]
pub(crate) fn next_done(
    ctx: &Ctx,
    key: &Arg,
    event: &CStr,
    n: Next,
    replay: bool,
    count: u64,
    effect: impl FnOnce(),
) {
    if n.skipped_gap {
        effect();
        SEQ_GAP_SKIPS.add(1);
    } else {
        ctx.replicate_verbatim();
    }
    ctx.changed(event, key);
    if !replay {
        SEQ_ISSUED.add(count);
    }
    ctx.reply_int(int(n.last));
}

/// One NEXT on an open key: the reservation, and whether the call is a replay.
#[inline(always)]
fn reserve(ctx: &Ctx, k: &SeqKey, count: u64) -> Result<(Next, bool), Error> {
    reserve_from(ctx, current(k), count)
}

/// One NEXT from the state `old` (a SEQ key's, a map field's): the reservation, and whether
/// the call is a replay.
#[inline(always)]
pub(crate) fn reserve_from(ctx: &Ctx, old: Seq, count: u64) -> Result<(Next, bool), Error> {
    // Only a marked state can make replay differ, so only then is the context asked whether
    // this call is itself a replay (a replica's and an AOF's keys are all marked).
    let replay = old.needs_gap() && ctx.is_replay();
    let n = if replay {
        old.replay_next(count)
    } else {
        old.next(count, seq_gap())
    }
    .map_err(|e| match e {
        NextError::Overflow => err("sequence overflow"),
        NextError::ZeroCount => err("COUNT must be an integer in 1..1000000"),
    })?;
    Ok((n, replay))
}

/// SEQ.NEXT key [COUNT n] IDMP token: `[last, duplicate]`. Kept out of line so that plain
/// SEQ.NEXT stays as it was.
#[inline(never)]
fn next_idmp(ctx: &Ctx, key: &Arg, count: u64, token: &Arg) -> Result<(), Error> {
    let clock = node::idmp_clock::for_call(ctx);
    let fp = fingerprint(b"", count);
    let mut k = SeqKey::open(ctx, key, true)?;
    let lookup = k
        .window()
        .map_or(Lookup::Miss, |w| w.lookup(token.bytes(), fp, clock.now_ms));
    if answered(ctx, lookup, "COUNT")? {
        return Ok(());
    }
    let (n, replay) = reserve(ctx, &k, count)?;
    let dropped = k.window().map_or(0, |w| w.plan(clock.now_ms, clock.max));
    let entry = token_entry(token, n.last, clock.expires_ms(), fp)?;
    k.set_with_token(n.state, dropped, entry)?;
    drop(k);
    let r = Reserved::new(clock, n, replay, count, fp, dropped);
    idmp_reserved(ctx, c"SEQ.IDMPSET", c"seq.next", key, token, None, r);
    Ok(())
}

/// What an IDMP call that reserved decided (SEQ.NEXT's, SEQ.HNEXT's), for [`idmp_reserved`].
pub(crate) struct Reserved {
    clock: Clock,
    next: Next,
    replay: bool,
    count: u64,
    fingerprint: u64,
    /// How many of the oldest tokens the call dropped.
    dropped: usize,
}

impl Reserved {
    pub(crate) fn new(
        clock: Clock,
        next: Next,
        replay: bool,
        count: u64,
        fingerprint: u64,
        dropped: usize,
    ) -> Reserved {
        Reserved {
            clock,
            next,
            replay,
            count,
            fingerprint,
            dropped,
        }
    }
}

/// The end of an IDMP call that reserved: replicated as called after the clock it decided by,
/// or as its explicit effect (`effect`, with `field` for a map) where replay could not reproduce
/// it (the gap skipped, a clock that is not replicated: see `node::idmp_clock`); counted,
/// signalled, replied `[last, 0]`.
pub(crate) fn idmp_reserved(
    ctx: &Ctx,
    effect: &CStr,
    event: &CStr,
    key: &Arg,
    token: &Arg,
    field: Option<&Arg>,
    r: Reserved,
) {
    let n = r.next;
    if n.skipped_gap || !r.clock.verbatim {
        ctx.replicate_token(
            effect,
            key,
            token,
            [
                int(n.last),
                int(r.clock.expires_ms()),
                r.fingerprint as i64,
                int(r.dropped as u64),
            ],
            field,
        );
        if n.skipped_gap {
            SEQ_GAP_SKIPS.add(1);
        }
    } else {
        ctx.replicate_verbatim();
    }
    ctx.changed(event, key);
    if !r.replay {
        SEQ_ISSUED.add(r.count);
    }
    reply_idmp(ctx, n.last, false);
}

/// SEQ.IDMPCLOCK ms ttl-ms max
///
/// The IDMP clock as the primary wrote it (`node::idmp_clock`): replayed from the primary or the
/// AOF, later IDMP calls decide by it. Written to this node's AOF in turn. Internal: a client's
/// call is refused (it would move a clock the primary owns), and one from a slot migration's
/// import (Valkey 9) changes nothing: the importing node keeps its own clock.
pub(crate) fn idmpclock(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, ms, ttl, max] = args else {
        return Err(Error::WrongArity);
    };
    let ms = ms.int_in("ms", 0, i64::MAX)?.unsigned_abs();
    let ttl = ttl.int_in("ttl-ms", 0, i64::MAX)?.unsigned_abs();
    let max = max.int_in("max", 0, i64::MAX)?.unsigned_abs();
    let (ttl, max) = node::idmp_clock::bounds(ttl, max).map_err(err)?;
    if ctx.is_slot_import() {
        ctx.reply_ok();
        return Ok(());
    }
    if !ctx.is_replay() {
        return Err(err(
            "SEQ.IDMPCLOCK is written by imid to replicas and the AOF, not called by clients",
        ));
    }
    node::idmp_clock::replayed(ms, ttl, max, !ctx.is_loading());
    ctx.replicate_verbatim();
    ctx.reply_ok();
    Ok(())
}

/// `[COUNT n] [IDMP token]` of SEQ.NEXT and SEQ.HNEXT: the block size (1 without COUNT) and the
/// token. The last COUNT wins, as in Redis's own option parsing; IDMP names one request, so
/// twice is refused.
pub(crate) fn next_options(opts: &[Arg]) -> Result<(u64, Option<&Arg>), Error> {
    let mut count = 1;
    let mut token = None;
    let mut rest = opts;
    while let [name, tail @ ..] = rest {
        match tail {
            [n, tail @ ..] if name.is("COUNT") => {
                count = n.int_in("COUNT", 1, MAX_BLOCK as i64)?.unsigned_abs();
                rest = tail;
            }
            [t, tail @ ..] if name.is("IDMP") => {
                token = Some(idmp_token(t, token)?);
                rest = tail;
            }
            [] if name.is("IDMP") => return Err(idmp_missing()),
            _ => return Err(SYNTAX),
        }
    }
    Ok((count, token))
}

/// The token of an `IDMP token` option, refused when one was given already or it breaks the
/// length rule (shared by SEQ.NEXT and SEQ.HNEXT).
fn idmp_token<'a>(t: &'a Arg, given: Option<&Arg>) -> Result<&'a Arg, Error> {
    if given.is_some() {
        return Err(err("IDMP given twice"));
    }
    check_token(t.bytes()).map_err(err)?;
    Ok(t)
}

/// `IDMP` as the last argument.
fn idmp_missing() -> Error {
    err("IDMP needs a token (1..64 bytes)")
}

/// What a lookup decides before anything is reserved: a live token with the same request is
/// answered here (`true`: the call is done); one used for another request is refused, the
/// error naming what differs (`what`); a miss goes on to reserve (`false`).
pub(crate) fn answered(ctx: &Ctx, lookup: Lookup, what: &str) -> Result<bool, Error> {
    match lookup {
        Lookup::Hit(last) => {
            reply_idmp(ctx, last, true);
            Ok(true)
        }
        Lookup::Conflict => Err(err(format_args!(
            "IDMP token already used on this key with another {what} (a retry must repeat its request)"
        ))),
        Lookup::Miss => Ok(false),
    }
}

/// The recorded token of SEQ.IDMPSET and SEQ.HIDMPSET, `token last expires fingerprint
/// dropped`: the entry, and how many of the oldest tokens to drop first.
pub(crate) fn token_record(args: &[Arg]) -> Result<(Entry, usize), Error> {
    let [token, last, expires, fp, dropped] = args else {
        return Err(Error::WrongArity);
    };
    check_token(token.bytes()).map_err(err)?;
    let last = last
        .int_in("last", 0, MAX_VALUE as i64)
        .map(i64::unsigned_abs)?;
    let expires = expires.int_in("expires", 0, i64::MAX)?.unsigned_abs();
    let fp = fp
        .int()
        .ok_or_else(|| err("fingerprint must be an integer"))? as u64;
    let dropped = usize::try_from(dropped.int_in("dropped", 0, i64::MAX)?).unwrap_or(usize::MAX);
    let entry = token_entry(token, last, expires, fp)?;
    Ok((entry, dropped))
}

/// The window entry of `token` (its length was checked when parsed; refused again here rather
/// than trusted).
pub(crate) fn token_entry(
    token: &Arg,
    last: u64,
    expires_ms: u64,
    fp: u64,
) -> Result<Entry, Error> {
    Entry::new(token.bytes(), last, expires_ms, fp)
        .ok_or_else(|| err("IDMP token must be 1..64 bytes"))
}

/// `[last, duplicate]`.
pub(crate) fn reply_idmp(ctx: &Ctx, last: u64, duplicate: bool) {
    ctx.reply_array(2);
    ctx.reply_int(int(last));
    ctx.reply_int(i64::from(duplicate));
}

/// SEQ.IDMPSET key token last expires fingerprint dropped
///
/// The explicit effect of `SEQ.NEXT ... IDMP` (replicas, the AOF) and of an AOF rewrite: sets
/// the value to `last` (marked when replayed, as SEQ.SET), drops the `dropped` oldest tokens,
/// and records `token` with `last`, its absolute expiry (unix ms) and the request's
/// fingerprint. Internal: documented, but not for clients.
pub(crate) fn idmpset(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, record @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let (entry, dropped) = token_record(record)?;
    let new = Seq::new(entry.last, ctx.is_replay()).ok_or_else(|| err("last out of range"))?;
    SeqKey::open(ctx, key, true)?.set_with_token(new, dropped, entry)?;
    ctx.replicate_verbatim();
    ctx.changed(c"seq.idmpset", key);
    ctx.reply_ok();
    Ok(())
}

/// SEQ.GET key
pub(crate) fn get(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key] = args else {
        return Err(Error::WrongArity);
    };
    let v = SeqKey::open(ctx, key, false)?.get().map_or(0, Seq::value);
    ctx.reply_int(int(v));
    Ok(())
}

/// SEQ.MGET key [key ...]
///
/// One key of another type fails the whole command (unlike MGET's nil), so a client never
/// mistakes a misconfigured key for a sequence at 0.
pub(crate) fn mget(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, keys @ ..] = args else {
        return Err(Error::WrongArity);
    };
    if keys.is_empty() {
        return Err(Error::WrongArity);
    }
    let values = keys
        .iter()
        .map(|key| Ok(SeqKey::open(ctx, key, false)?.get().map_or(0, Seq::value)))
        .collect::<Result<Vec<u64>, Error>>()?;
    ctx.reply_array(values.len());
    for v in values {
        ctx.reply_int(int(v));
    }
    Ok(())
}

/// SEQ.SET key value
///
/// A value this process did not choose itself (AOF replay, the primary's stream) is marked
/// so that the first SEQ.NEXT skips the gap; a client's SET clears the mark.
pub(crate) fn set(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, value] = args else {
        return Err(Error::WrongArity);
    };
    let value = value_arg(value)?;
    let new = Seq::new(value, ctx.is_replay()).ok_or_else(|| err("value out of range"))?;
    // Signalled and replicated only on a change (see the module comment).
    let mut k = SeqKey::open(ctx, key, true)?;
    if k.get() != Some(new) {
        k.set(new)?;
        drop(k);
        ctx.replicate_verbatim();
        ctx.changed(c"seq.set", key);
    }
    ctx.reply_ok();
    Ok(())
}

/// The value an ADVANCE moves to: `value`, clamped to the current value of the sequence
/// `LIMIT seqkey` names when given (a missing key counts as 0, a key of another type is
/// WRONGTYPE). The LIMIT key is declared read-only in the key specs, so Cluster requires it in
/// the slot of the advanced key and ACL key patterns apply to it. Replay reads the same value
/// there (sequence values replicate exactly), so the call still replicates as called.
pub(crate) fn advance_target(ctx: &Ctx, value: &Arg, opts: &[Arg]) -> Result<u64, Error> {
    let value = value_arg(value)?;
    match opts {
        [] => Ok(value),
        [limit, seqkey] if limit.is("LIMIT") => {
            let cap = SeqKey::open(ctx, seqkey, false)?
                .get()
                .map_or(0, Seq::value);
            Ok(value.min(cap))
        }
        _ => Err(SYNTAX),
    }
}

/// Answers Redis's keys position request for a command whose LIMIT key follows the keyword
/// LIMIT at argument `from` or later (as its key spec says; see `glue::registry::limit_key`).
pub(crate) fn limit_key_positions(ctx: &Ctx, args: &[Arg], from: usize) {
    ctx.key_at(1);
    let limit = args
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, a)| a.is("LIMIT"))
        .map(|(i, _)| i + 1);
    if let Some(i) = limit.filter(|&i| i < args.len()) {
        ctx.key_at(i);
    }
}

/// SEQ.ADVANCE key value [LIMIT seqkey]
///
/// Keeps the gap mark: an acknowledged read position says nothing about values lost in a
/// crash, so the next SEQ.NEXT must still skip.
pub(crate) fn advance(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        limit_key_positions(ctx, args, 3);
        return Ok(());
    }
    let [_, key, value, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let value = advance_target(ctx, value, opts)?;
    // An older acknowledgement changes nothing, so it neither signals the key (a client's
    // WATCH) nor replicates (see the module comment).
    let mut k = SeqKey::open(ctx, key, true)?;
    let old = current(&k);
    let new = old
        .advance(value)
        .ok_or_else(|| err("value out of range"))?;
    if new.value() != old.value() {
        k.set(new)?;
        drop(k);
        ctx.replicate_verbatim();
        ctx.changed(c"seq.advance", key);
    }
    ctx.reply_int(int(new.value()));
    Ok(())
}
