//! SEQ.NEXT / GET / MGET / SET / ADVANCE / CONVERT, and the two internal commands IDMP
//! replicates by (SEQ.IDMPSET, its explicit effect; SEQ.IDMPCLOCK, the IDMP clock).
//!
//! Replication (to replicas and the AOF) follows one rule: a write goes as called when replaying
//! it reproduces the primary's effect exactly, else as its explicit effect. SEQ.SET and
//! SEQ.ADVANCE are deterministic given the key's value; SEQ.NEXT is too except for the gap and
//! its IDMP clock (see `handout::reserve`, which SEQ.NEXT shares with SEQ.HNEXT). Nothing is
//! replicated when nothing changed.
//!
//! Every write opens its key once, for writing, and signals it only when it changed it
//! (`Ctx::changed`): a no-op (an older ack, the same value, an IDMP retry) leaves a client's
//! WATCH alone.

use crate::args::{advance_target, limit_key_positions, next_options, seq_token_record, value_arg};
use crate::core::seq::{counter_value, Seq};
use crate::core::to_i64;
use crate::error::{err, Error};
use crate::handout::reserve::{self, IdmpCall};
use crate::host::key::StringKey;
use crate::host::{Arg, Ctx};
use crate::node::{self, SEQ_GAP_SKIPS, SEQ_ISSUED};
use crate::types::seq::key::SeqKey;

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

/// SEQ.NEXT key [COUNT n] [IDMP token]
pub(crate) fn next(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let (count, token) = next_options(opts)?;
    match token {
        None => reserve::next(ctx, key, None, SeqKey::open_write(ctx, key)?, count, None),
        Some(token) => next_idmp(ctx, key, count, token),
    }
}

/// SEQ.NEXT key [COUNT n] IDMP token: `[last, duplicate]`. Kept out of line so that plain
/// SEQ.NEXT stays as it was.
#[inline(never)]
fn next_idmp(ctx: &Ctx, key: &Arg, count: u64, token: &Arg) -> Result<(), Error> {
    let call = IdmpCall::new(ctx, token.bytes(), count)?;
    let k = SeqKey::open_write(ctx, key)?;
    reserve::next(ctx, key, None, k, count, Some((token, call)))
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
    let (ttl, max) = node::idmp_clock::check(ms, ttl, max).map_err(err)?;
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

/// SEQ.GAP gap
///
/// The gap in force from here on in the data (`node::durable`): what a restart from the data up
/// to here, or a promotion of a replica that holds it, skips on each sequence (at least the
/// node's own `imid.seq-gap`). Written by imid to replicas and the AOF as its rate raises or
/// lowers the gap; replayed, it becomes this node's, and goes to its own AOF and replicas in
/// turn. Internal: a client's call is refused (it would claim a gap the data never had), one
/// from a slot migration's import changes nothing (the importing node keeps its own).
pub(crate) fn gap(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, n] = args else {
        return Err(Error::WrongArity);
    };
    let n = n.int_in("gap", 0, 1_000_000_000)?.unsigned_abs();
    if ctx.is_slot_import() {
        ctx.reply_ok();
        return Ok(());
    }
    if !ctx.is_replay() {
        return Err(err(
            "SEQ.GAP is written by imid to replicas and the AOF, not called by clients",
        ));
    }
    node::durable::replayed(n);
    ctx.replicate_verbatim();
    ctx.reply_ok();
    Ok(())
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
    let (entry, dropped) = seq_token_record(record)?;
    let new = Seq::new(entry.last, ctx.is_replay()).ok_or_else(|| err("last out of range"))?;
    let mut k = SeqKey::open_write(ctx, key)?;
    k.set_with_token(new, dropped, entry)?;
    drop(k);
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
    let v = SeqKey::open_read(ctx, key)?.get().map_or(0, Seq::value);
    ctx.reply_int(to_i64(v));
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
        .map(|key| Ok(SeqKey::open_read(ctx, key)?.get().map_or(0, Seq::value)))
        .collect::<Result<Vec<u64>, Error>>()?;
    ctx.reply_array(values.len());
    for v in values {
        ctx.reply_int(to_i64(v));
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
    let mut k = SeqKey::open_write(ctx, key)?;
    let old = k.get();
    if old != Some(new) {
        k.set(new)?;
        drop(k);
        ctx.replicate_verbatim();
        ctx.changed(c"seq.set", key);
    }
    ctx.reply_ok();
    Ok(())
}

/// SEQ.CONVERT key
///
/// Turns an `INCR` counter (a string holding an integer in 0..2^63-1) into a sequence holding
/// its value, in place and at once: its TTL is kept, and SEQ.NEXT continues after the value. A
/// key that is a sequence already is left as it is (the call can be repeated), a missing key
/// stays missing (0). The value is a client's choice, as SEQ.SET's: no gap mark, unless
/// replayed. Deterministic on the same data, so it replicates as called.
pub(crate) fn convert(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key] = args else {
        return Err(Error::WrongArity);
    };
    let wrong = match SeqKey::open_read(ctx, key) {
        Ok(k) => {
            ctx.reply_int(to_i64(k.get().map_or(0, Seq::value)));
            return Ok(());
        }
        Err(e) => e,
    };
    let Some(s) = StringKey::open(ctx, key)? else {
        return Err(wrong);
    };
    let text = s.bytes();
    let value = counter_value(&text)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| {
            err(format_args!(
                "SEQ.CONVERT: the string holds {}, not an integer in 0..9223372036854775807",
                String::from_utf8_lossy(text.get(..40).unwrap_or(&text))
            ))
        })?;
    let new = Seq::new(value, ctx.is_replay()).ok_or_else(|| err("value out of range"))?;
    let expires = s.expires_at();
    s.delete();
    let mut k = SeqKey::open_write(ctx, key)?;
    k.set(new)?;
    if let Some(at) = expires {
        k.expire_at(at);
    }
    drop(k);
    ctx.replicate_verbatim();
    ctx.changed(c"seq.convert", key);
    ctx.reply_int(to_i64(value));
    Ok(())
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
    let mut k = SeqKey::open_write(ctx, key)?;
    let (now, moved) = k.raise(value)?;
    drop(k);
    if moved {
        ctx.replicate_verbatim();
        ctx.changed(c"seq.advance", key);
    }
    ctx.reply_int(to_i64(now));
    Ok(())
}
