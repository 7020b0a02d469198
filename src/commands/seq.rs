//! SEQ.NEXT / GET / MGET / SET / ADVANCE.
//!
//! Replication (to replicas and the AOF) follows one rule: a write goes as called when replaying
//! it reproduces the primary's effect exactly, else as its explicit effect `SEQ.SET key value`.
//! SEQ.SET and SEQ.ADVANCE are deterministic given the key's value, and so is SEQ.NEXT except
//! for the never-reissue gap: a SEQ.NEXT that skipped the gap replicates `SEQ.SET`, every other
//! one goes as called, and a SEQ.NEXT replayed from the primary or the AOF never applies the gap.
//! Nothing is replicated when nothing changed.

use crate::config::seq_gap;
use crate::core::seq::{NextError, Seq, MAX_COUNT, MAX_VALUE};
use crate::error::{err, Error, SYNTAX};
use crate::glue::{Arg, Ctx};
use crate::node::{self, SEQ_GAP_SKIPS, SEQ_ISSUED};
use crate::seq_type::SeqKey;

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

/// SEQ.NEXT key [COUNT n]
pub(crate) fn next(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let mut count = 1;
    let mut rest = opts;
    // The last COUNT wins, as in Redis's own option parsing.
    while let [name, tail @ ..] = rest {
        match tail {
            [n, tail @ ..] if name.is("COUNT") => {
                count = n.int_in("COUNT", 1, MAX_COUNT as i64)?.unsigned_abs();
                rest = tail;
            }
            _ => return Err(SYNTAX),
        }
    }
    let k = SeqKey::open(ctx, key, true)?;
    let old = current(&k);
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
    k.set(n.state)?;
    drop(k);
    if n.skipped_gap {
        ctx.replicate_key_int(c"SEQ.SET", key, int(n.last));
        SEQ_GAP_SKIPS.add(1);
    } else {
        ctx.replicate_verbatim();
    }
    ctx.notify(c"seq.next", key);
    // A replay hands nothing out: the primary did.
    if !replay {
        SEQ_ISSUED.add(count);
    }
    ctx.reply_int(int(n.last));
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
    // Read first, write only on a change: Redis signals every key opened for writing as
    // modified when it is closed, which would break a client's WATCH on a no-op.
    if SeqKey::open(ctx, key, false)?.get() != Some(new) {
        SeqKey::open(ctx, key, true)?.set(new)?;
        ctx.replicate_verbatim();
        ctx.notify(c"seq.set", key);
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

/// SEQ.ADVANCE key value [LIMIT seqkey]
///
/// Keeps the gap mark: an acknowledged read position says nothing about values lost in a
/// crash, so the next SEQ.NEXT must still skip.
pub(crate) fn advance(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, value, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let value = advance_target(ctx, value, opts)?;
    // Read first, write only on a change (see SET): an older acknowledgement must not touch
    // the key, or it would break a client's WATCH.
    let old = current(&SeqKey::open(ctx, key, false)?);
    let new = old
        .advance(value)
        .ok_or_else(|| err("value out of range"))?;
    if new.value() != old.value() {
        SeqKey::open(ctx, key, true)?.set(new)?;
        ctx.replicate_verbatim();
        ctx.notify(c"seq.advance", key);
    }
    ctx.reply_int(int(new.value()));
    Ok(())
}
