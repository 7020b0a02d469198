//! SEQ.NEXT / GET / MGET / SET / ADVANCE.
//!
//! Every write replicates (and so persists in the AOF) its effect as `SEQ.SET key value`,
//! never the command as called: replaying SEQ.NEXT on a replica or from the AOF could only
//! agree with the primary by luck. Nothing is replicated when nothing changed.

use super::{err, int_arg};
use crate::config::seq_gap;
use crate::core::seq::{NextError, Seq, MAX_COUNT, MAX_VALUE};
use crate::seq_type::{Found, SeqKey};
use crate::stats::Counter;
use redis_module::{raw, Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue};
use std::ffi::CStr;
use std::os::raw::c_longlong;
use std::sync::atomic::{AtomicBool, Ordering};

/// Values handed out by SEQ.NEXT (the sum of the counts), for `INFO imid`.
pub static ISSUED: Counter = Counter::new();
/// First NEXTs that skipped `imid.seq-gap` values after a load or a replication.
pub static GAP_SKIPS: Counter = Counter::new();

/// Set once this process has loaded data it did not write itself: an RDB or AOF at startup,
/// a full sync from a primary, or a change of replication role. From then on a sequence key
/// that is missing may be one whose writes were lost (created after the snapshot, or after
/// the last write that reached this replica), so it is treated like a loaded key at 0: its
/// first SEQ.NEXT skips the gap. A node that started empty and was never a replica starts
/// new sequences at 1. Never cleared: a lost key can be used again at any later time.
static INHERITED: AtomicBool = AtomicBool::new(false);

/// Called from the loading and role-change server events (see `events`).
pub fn mark_inherited() {
    INHERITED.store(true, Ordering::Relaxed);
}

/// The `INFO imid` fields of this family, in order.
pub fn info_fields() -> [(&'static str, u64); 3] {
    [
        ("seq_issued", ISSUED.get()),
        ("seq_gap_skips", GAP_SKIPS.get()),
        (
            "seq_missing_keys_skip_gap",
            u64::from(INHERITED.load(Ordering::Relaxed)),
        ),
    ]
}

fn value_arg(arg: &RedisString) -> Result<u64, RedisError> {
    // The range starts at 0, so the cast keeps the value.
    int_arg(arg, "value", 0, MAX_VALUE as i64).map(|v| v as u64)
}

/// The state a write starts from: a missing key is 0, marked for the gap when this node
/// inherited its data (see `INHERITED`).
fn current(found: Found) -> Seq {
    match found {
        Found::Missing => Seq::new(0, INHERITED.load(Ordering::Relaxed)).unwrap_or_default(),
        Found::Seq(s) => s,
    }
}

/// What a read sees: a missing key is 0.
fn value_of(found: Found) -> u64 {
    match found {
        Found::Missing => 0,
        Found::Seq(s) => s.value(),
    }
}

fn reply_int(v: u64) -> RedisResult {
    // Sequence values are at most 2^63-1 by construction.
    Ok(RedisValue::Integer(i64::try_from(v).unwrap_or(i64::MAX)))
}

/// Replicates (and so persists) `SEQ.SET key value`.
///
/// Straight through `RedisModule_Replicate` with the format `sl`: Redis takes a reference to the
/// key argument and formats the integer itself. The crate's `Context::replicate` first copies
/// every argument into a new module string (plus a Rust `String` for the value and a `CString`
/// for the name); with AOF and replicas off that copying was a third of SEQ.NEXT's instructions
/// (callgrind, bench/RESULTS.md).
/// A keyspace event of class `d` (module types; `notify-keyspace-events` must include it),
/// named after the command, e.g. `seq.next`. Costs a flag test when notifications are off.
fn notify(ctx: &Context, event: &CStr, key: &RedisString) {
    // SAFETY: ctx.ctx is the live context of the running command, event a NUL-terminated
    // static string, key.inner a live argument string; Redis copies what it keeps.
    unsafe {
        if let Some(f) = raw::RedisModule_NotifyKeyspaceEvent {
            f(
                ctx.ctx,
                raw::REDISMODULE_NOTIFY_MODULE,
                event.as_ptr(),
                key.inner,
            );
        }
    }
}

fn replicate_set(ctx: &Context, key: &RedisString, value: u64) {
    // Sequence values are at most 2^63-1 by construction, so they fit a long long.
    let value = c_longlong::try_from(value).unwrap_or(c_longlong::MAX);
    // SAFETY: ctx.ctx is the live context of the running command and key.inner a live string
    // of it; Replicate is filled in at load; "sl" consumes exactly one RedisModuleString* and
    // one long long, both passed. Replicate only fails for an unknown command name, and
    // SEQ.SET is ours.
    unsafe {
        if let Some(replicate) = raw::RedisModule_Replicate {
            replicate(
                ctx.ctx,
                c"SEQ.SET".as_ptr(),
                c"sl".as_ptr(),
                key.inner,
                value,
            );
        }
    }
}

/// SEQ.NEXT key [COUNT n]
pub fn next(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, opts @ ..] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let mut count = 1;
    let mut rest = opts;
    while let [name, tail @ ..] = rest {
        match (name.as_slice().eq_ignore_ascii_case(b"COUNT"), tail) {
            (true, [n, tail @ ..]) => {
                count = int_arg(n, "COUNT", 1, MAX_COUNT as i64)? as u64;
                rest = tail;
            }
            _ => return Err(err("syntax error")),
        }
    }
    let gap = seq_gap();
    let k = SeqKey::write(ctx, key)?;
    let n = current(k.get()?).next(count, gap).map_err(|e| match e {
        NextError::Overflow => err("sequence overflow"),
        NextError::ZeroCount => err("COUNT must be an integer in 1..1000000"),
    })?;
    k.set(n.state)?;
    replicate_set(ctx, key, n.last);
    notify(ctx, c"seq.next", key);
    ISSUED.add(count);
    if n.skipped_gap {
        GAP_SKIPS.add(1);
    }
    reply_int(n.last)
}

/// SEQ.GET key
pub fn get(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let found = SeqKey::read(ctx, key)?.get()?;
    reply_int(value_of(found))
}

/// SEQ.MGET key [key ...]
///
/// One key of another type fails the whole command (unlike MGET's nil), so a client never
/// mistakes a misconfigured key for a sequence at 0.
pub fn mget(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, keys @ ..] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    if keys.is_empty() {
        return Err(RedisError::WrongArity);
    }
    let values = keys
        .iter()
        .map(|key| {
            let found = SeqKey::read(ctx, key)?.get()?;
            Ok(RedisValue::Integer(
                i64::try_from(value_of(found)).unwrap_or(i64::MAX),
            ))
        })
        .collect::<Result<Vec<_>, RedisError>>()?;
    Ok(RedisValue::Array(values))
}

/// SEQ.SET key value
///
/// A value this process did not choose itself (AOF replay, the primary's stream) is marked
/// so that the first SEQ.NEXT skips the gap; a client's SET clears the mark.
pub fn set(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, value] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let value = value_arg(value)?;
    let from_elsewhere = ctx
        .get_flags()
        .intersects(ContextFlags::LOADING | ContextFlags::REPLICATED);
    let new = Seq::new(value, from_elsewhere).ok_or_else(|| err("value out of range"))?;
    // Read first, write only on a change: Redis signals every key opened for writing as
    // modified when it is closed, which would break a client's WATCH on a no-op.
    let old = SeqKey::read(ctx, key)?.get()?;
    if old != Found::Seq(new) {
        SeqKey::write(ctx, key)?.set(new)?;
        replicate_set(ctx, key, value);
        notify(ctx, c"seq.set", key);
    }
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// SEQ.ADVANCE key value
///
/// Keeps the gap mark: an acknowledged read position says nothing about values lost in a
/// crash, so the next SEQ.NEXT must still skip.
pub fn advance(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, value] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let value = value_arg(value)?;
    // Read first, write only on a change (see SET): an older acknowledgement must not touch
    // the key, or it would break a client's WATCH.
    let old = current(SeqKey::read(ctx, key)?.get()?);
    let new = old
        .advance(value)
        .ok_or_else(|| err("value out of range"))?;
    if new.value() != old.value() {
        SeqKey::write(ctx, key)?.set(new)?;
        replicate_set(ctx, key, new.value());
        notify(ctx, c"seq.advance", key);
    }
    reply_int(new.value())
}
