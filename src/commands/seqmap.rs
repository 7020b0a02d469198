//! SEQ.HNEXT / HGET / HMGET / HGETALL / HSCAN / HSET / HDEL / HLEN / HADVANCE, and SEQ.HIDMPSET
//! (the replicated form of SEQ.HNEXT ... IDMP): sequence maps, one key holding many named
//! sequences, each field with exactly the rules of a SEQ key: 0 when missing, 0..2^63-1, NEXT
//! strictly increasing, the gap skipped once after a field came from elsewhere (a missing field
//! on a node that inherited its data counts as such, as a missing SEQ key does).
//!
//! Replication follows the SEQ rule: as called when replay reproduces the effect exactly, else
//! the explicit effect; nothing when nothing changed. SEQ.HNEXT shares the reserve protocol with
//! SEQ.NEXT (`handout::reserve`). Every write opens its key once, for writing, and signals it
//! only when it changed it (`Ctx::changed`), so a no-op leaves a client's WATCH alone.

use crate::args::{
    advance_target, field_arg, limit_key_positions, map_token_record, next_options, value_arg,
    MapRecord,
};
use crate::core::seq::Seq;
use crate::core::seqmap::{Batch, Written};
use crate::core::to_i64;
use crate::error::{err, Error, SYNTAX};
use crate::handout::reserve::{self, Field, IdmpCall};
use crate::host::{Arg, Ctx};
use crate::types::map::key::MapKey;

/// SEQ.HADVANCE's write: the field raised to `to`, never lowered, the call replicated as
/// called and the keyspace event sent when it moved. Returns the field's value after it.
fn advance_field(ctx: &Ctx, key: &Arg, field: &[u8], to: u64) -> Result<Seq, Error> {
    let mut k = MapKey::open_write(ctx, key)?;
    let (new, moved) = k.raise_field(field, to)?;
    drop(k);
    if moved {
        ctx.replicate_verbatim();
        ctx.changed(c"seq.hadvance", key);
    }
    Ok(new)
}

/// SEQ.HNEXT key field [COUNT n] [IDMP token]
pub(crate) fn hnext(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, field_a, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let field = field_arg(field_a)?;
    let (count, token) = next_options(opts)?;
    match token {
        None => {
            let target = Field::open(ctx, key, field)?;
            reserve::next(ctx, key, Some(field_a), target, count, None)
        }
        Some(token) => hnext_idmp(ctx, key, field_a, count, token),
    }
}

/// SEQ.HNEXT key field [COUNT n] IDMP token: `[last, duplicate]`. The token remembers the field
/// and the count themselves, so a token reused for another field or count is refused.
#[inline(never)]
fn hnext_idmp(ctx: &Ctx, key: &Arg, field_a: &Arg, count: u64, token: &Arg) -> Result<(), Error> {
    let field = field_a.bytes();
    let call = IdmpCall::new(ctx, token.bytes(), (field, count))?;
    let target = Field::open(ctx, key, field)?;
    reserve::next(ctx, key, Some(field_a), target, count, Some((token, call)))
}

/// SEQ.HIDMPSET key token last expires dropped COUNT n FIELD field [SET]
/// SEQ.HIDMPSET key token last expires fingerprint dropped [field] (the first form)
///
/// The explicit effect of `SEQ.HNEXT ... IDMP` (with SET: the field is set to `last`, marked
/// when replayed, as SEQ.HSET marks) and of an AOF rewrite (without: the fields came first).
/// Drops the `dropped` oldest tokens and records `token` with its request, the field and
/// COUNT. The first form, which builds before this one wrote, records a fingerprint of the
/// request instead (its field, when given, is set). Internal, as SEQ.IDMPSET.
pub(crate) fn hidmpset(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, record @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let MapRecord {
        entry,
        dropped,
        set: field,
    } = map_token_record(record)?;
    let new = Seq::new(entry.last, ctx.is_replay()).ok_or_else(|| err("last out of range"))?;
    let mut k = MapKey::open_write(ctx, key)?;
    if field.is_none() && k.get().is_none() {
        return Err(err("no such key (a token without a field needs the map)"));
    }
    if let Some(field) = field {
        k.set_field(field, new)?;
    }
    k.record_token(dropped, entry)?;
    drop(k);
    ctx.replicate_verbatim();
    ctx.changed(c"seq.hidmpset", key);
    ctx.reply_ok();
    Ok(())
}

/// SEQ.HGET key field
pub(crate) fn hget(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, field] = args else {
        return Err(Error::WrongArity);
    };
    let field = field_arg(field)?;
    let k = MapKey::open_read(ctx, key)?;
    let v = k.get().and_then(|m| m.get(field)).map_or(0, Seq::value);
    ctx.reply_int(to_i64(v));
    Ok(())
}

/// `key field [field ...]` of SEQ.HMGET and SEQ.HDEL: the key and the field names, each checked.
fn key_and_fields(args: &[Arg]) -> Result<(&Arg, Vec<&[u8]>), Error> {
    let [_, key, fields @ ..] = args else {
        return Err(Error::WrongArity);
    };
    if fields.is_empty() {
        return Err(Error::WrongArity);
    }
    let names = fields
        .iter()
        .map(field_arg)
        .collect::<Result<Vec<&[u8]>, Error>>()?;
    Ok((key, names))
}

/// SEQ.HMGET key field [field ...]
pub(crate) fn hmget(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let (key, names) = key_and_fields(args)?;
    let k = MapKey::open_read(ctx, key)?;
    let m = k.get();
    ctx.reply_array(names.len());
    for f in names {
        ctx.reply_int(to_i64(m.and_then(|m| m.get(f)).map_or(0, Seq::value)));
    }
    Ok(())
}

/// SEQ.HLEN key
pub(crate) fn hlen(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key] = args else {
        return Err(Error::WrongArity);
    };
    let k = MapKey::open_read(ctx, key)?;
    ctx.reply_int(to_i64(k.get().map_or(0, |m| m.len() as u64)));
    Ok(())
}

/// SEQ.HGETALL key: field, value, ... (a map in RESP3).
pub(crate) fn hgetall(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key] = args else {
        return Err(Error::WrongArity);
    };
    let k = MapKey::open_read(ctx, key)?;
    let Some(m) = k.get() else {
        ctx.reply_map(0);
        return Ok(());
    };
    ctx.reply_map(m.len());
    for (name, s) in m.iter() {
        ctx.reply_bulk(name);
        ctx.reply_int(to_i64(s.value()));
    }
    Ok(())
}

/// A SCAN cursor: an unsigned decimal, as Redis's own cursors.
fn cursor_arg(a: &Arg) -> Result<u64, Error> {
    let b = a.bytes();
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return Err(err("invalid cursor"));
    }
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| err("invalid cursor"))
}

/// SEQ.HSCAN key cursor [COUNT n]: [next cursor, [field, value, ...]], the next cursor "0" at
/// the end. Every field present for the whole iteration is returned at least once (see
/// `SeqMap::scan`).
pub(crate) fn hscan(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, cursor, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let cursor = cursor_arg(cursor)?;
    let mut count = 10usize;
    let mut rest = opts;
    while let [name, tail @ ..] = rest {
        match tail {
            [n, tail @ ..] if name.is("COUNT") => {
                count = usize::try_from(n.int_in("COUNT", 1, i64::MAX)?).unwrap_or(usize::MAX);
                rest = tail;
            }
            _ => return Err(SYNTAX),
        }
    }
    let k = MapKey::open_read(ctx, key)?;
    let mut page: Vec<(&[u8], u64)> = Vec::new();
    let next = match k.get() {
        Some(m) => m.scan(cursor, count, |n, s| page.push((n, s.value()))),
        None => 0,
    };
    ctx.reply_array(2);
    ctx.reply_bulk(next.to_string().as_bytes());
    ctx.reply_array(page.len() * 2);
    for (name, v) in page {
        ctx.reply_bulk(name);
        ctx.reply_int(to_i64(v));
    }
    Ok(())
}

/// SEQ.HSET key field value [field value ...] -> the number of fields added.
///
/// Every pair is checked before anything changes, and the whole write fits the map before the
/// first field is set. A repeated field takes its last value, as in HSET. A value this process
/// did not choose (AOF replay, the primary's stream) is marked for the gap; a client's write
/// clears the mark.
pub(crate) fn hset(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, key, pairs @ ..] = args else {
        return Err(Error::WrongArity);
    };
    if pairs.is_empty() || pairs.len() % 2 != 0 {
        return Err(Error::WrongArity);
    }
    let mark = ctx.is_replay();
    let mut parsed: Vec<(&[u8], Seq)> = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks_exact(2) {
        let [f, v] = pair else { continue };
        let name = field_arg(f)?;
        let value = value_arg(v)?;
        let s = Seq::new(value, mark).ok_or_else(|| err("value out of range"))?;
        parsed.push((name, s));
    }
    let batch = Batch::new(parsed.into_iter());
    let mut k = MapKey::open_write(ctx, key)?;
    let Written { added, changed, .. } = k.set_batch(&batch)?;
    if changed {
        drop(k);
        ctx.replicate_verbatim();
        ctx.changed(c"seq.hset", key);
    }
    ctx.reply_int(to_i64(added));
    Ok(())
}

/// SEQ.HDEL key field [field ...] -> the number of fields removed. Removing the last field
/// deletes the key and publishes `seq.hdel` then `del`, as HDEL does for a Redis hash.
pub(crate) fn hdel(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let (key, names) = key_and_fields(args)?;
    let mut k = MapKey::open_write(ctx, key)?;
    let present = k
        .get()
        .is_some_and(|m| names.iter().any(|n| m.get(n).is_some()));
    let mut removed = 0u64;
    if present {
        let m = k.get_or_create()?;
        for n in &names {
            removed += u64::from(m.remove(n));
        }
        let emptied = m.is_empty();
        if emptied {
            k.delete();
        }
        drop(k);
        ctx.replicate_verbatim();
        ctx.changed(c"seq.hdel", key);
        if emptied {
            ctx.deleted(key);
        }
    }
    ctx.reply_int(to_i64(removed));
    Ok(())
}

/// SEQ.HADVANCE key field value [LIMIT seqkey] -> max(current, value), `value` first clamped
/// to the SEQ key `seqkey` (see `args::advance_target`). Keeps the field's gap mark, as
/// SEQ.ADVANCE does.
pub(crate) fn hadvance(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        limit_key_positions(ctx, args, 4);
        return Ok(());
    }
    let [_, key, field, value, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let field = field_arg(field)?;
    let to = advance_target(ctx, value, opts)?;
    let new = advance_field(ctx, key, field, to)?;
    ctx.reply_int(to_i64(new.value()));
    Ok(())
}
