//! MSGID.GEN / ENCODE / DECODE / HASH, and MSGID.FLOOR (the replicated time high-water mark).

use super::{err, int_arg, reply_bulk, reply_fields, Val};
use crate::config::{effective_hash_mode, HashMode};
use crate::core::generator::{GenStats, Generator};
use crate::core::javahash::java_hash22;
use crate::core::msgid::{Fields, MsgId, MAX_HASH, MAX_SEQ, MAX_TIME, MAX_TYPE};
use crate::core::slot::slot_hash22;
use redis_module::{Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue};
use std::sync::{Mutex, MutexGuard};

/// The node's one generator. Commands run on Redis's main thread, so the lock is never
/// contended; it is a Mutex only to make the static `Sync`.
static GENERATOR: Mutex<Generator> = Mutex::new(Generator::new());

fn generator() -> MutexGuard<'static, Generator> {
    // A poisoned lock means a panic elsewhere was already caught by the guard; the
    // generator's state is updated only at the end of `next`, so it is still consistent.
    GENERATOR.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn generator_stats() -> GenStats {
    generator().stats()
}

pub fn high_water() -> u64 {
    generator().high_water()
}

/// The time floor (Unix ms) every ID issued from now on starts at, MSGID or UID.
pub fn floor_ms() -> u64 {
    generator().floor()
}

/// Keeps the time lease ahead of a time UID.GEN issued; the renewed lease, if any, is for the
/// caller to replicate (`replicate_floor`).
pub fn cover(time_ms: u64) -> Option<u64> {
    generator().cover(time_ms)
}

/// Raises the generator's floor (from RDB aux data, AOF or the replication stream).
pub fn raise_floor(ms: u64) {
    generator().raise_floor(ms);
}

/// Writes the time high-water mark to the AOF and to replicas, as `MSGID.FLOOR ms`.
pub fn replicate_floor(ctx: &Context, ms: u64) {
    ctx.replicate("MSGID.FLOOR", &[ms.to_string().as_str()]);
}

/// The target hash under the current `imid.msgid-hash` mode.
fn target_hash(target: &[u8]) -> Result<u32, RedisError> {
    match effective_hash_mode() {
        HashMode::slot => Ok(slot_hash22(target)),
        _ => java_hash22(target).ok_or_else(|| {
            err("target must be valid UTF-8 in java hash mode (imid.msgid-hash java)")
        }),
    }
}

/// MSGID.GEN channel_type target
pub fn gen(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, channel_type, target] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let channel_type = int_arg(channel_type, "channel_type", 0, i64::from(MAX_TYPE))?;
    let hash = target_hash(target.as_slice())?;
    let issued = generator()
        .next(crate::now_ms())
        .map_err(|_| err("message id time field exhausted (2^42-1 ms)"))?;
    if let Some(lease) = issued.renewed_lease {
        // The lease is the effect to persist and replicate; the IDs themselves are not.
        replicate_floor(ctx, lease);
    }
    let fields = Fields::new(
        issued.time,
        u64::from(issued.seq),
        channel_type as u64,
        u64::from(hash),
    )
    .map_err(err)?;
    reply_bulk(ctx, &fields.to_id().to_text())
}

/// MSGID.ENCODE time_ms seq channel_type hash
pub fn encode(_ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, time, seq, channel_type, hash] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let time = int_arg(time, "time_ms", 0, MAX_TIME as i64)?;
    let seq = int_arg(seq, "seq", 0, i64::from(MAX_SEQ))?;
    let channel_type = int_arg(channel_type, "channel_type", 0, i64::from(MAX_TYPE))?;
    let hash = int_arg(hash, "hash", 0, i64::from(MAX_HASH))?;
    let fields =
        Fields::new(time as u64, seq as u64, channel_type as u64, hash as u64).map_err(err)?;
    Ok(RedisValue::StringBuffer(fields.to_id().to_text().to_vec()))
}

/// Parses a message ID argument under the strict rules (shared with OPENID.ENC).
pub fn parse_msgid(arg: &RedisString) -> Result<MsgId, RedisError> {
    MsgId::parse(arg.as_slice()).map_err(err)
}

/// MSGID.DECODE msgid
pub fn decode(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, msgid] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let f = parse_msgid(msgid)?.fields();
    reply_fields(
        ctx,
        &[
            ("time", Val::Int(f.time as i64)),
            ("seq", Val::Int(i64::from(f.seq))),
            ("channel_type", Val::Int(i64::from(f.channel_type))),
            ("hash", Val::Int(i64::from(f.hash))),
        ],
    )
}

/// MSGID.HASH target
pub fn hash(_ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, target] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    Ok(RedisValue::Integer(i64::from(target_hash(
        target.as_slice(),
    )?)))
}

/// How far ahead of this server's clock a client may set the floor (replication and AOF
/// replay may go further: they carry the lease of a primary whose clock may be ahead).
pub const CLIENT_FLOOR_LEAD_MS: u64 = 60_000;

/// MSGID.FLOOR time_ms
///
/// Raises the generator's time floor: IDs issued afterwards have a time at or above it. The
/// primary writes it (renewing its time lease) into the AOF and the replication stream, so that
/// a restarted node or a promoted replica starts above every ID issued before. Never lowers.
///
/// From a client the time may lead this server's clock by at most a minute: the floor is
/// persisted and replicated and can never be lowered, so one mistaken call (microseconds for
/// milliseconds, say) would otherwise move every later ID into the future for good, or past
/// the 42-bit time field, after which MSGID.GEN can only fail.
pub fn floor(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, ms] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    // The range starts at 0, so the cast keeps the value.
    let ms = int_arg(ms, "time_ms", 0, i64::MAX)? as u64;
    let from_client = !ctx
        .get_flags()
        .intersects(ContextFlags::LOADING | ContextFlags::REPLICATED);
    if from_client && ms > crate::now_ms().saturating_add(CLIENT_FLOOR_LEAD_MS) {
        return Err(err(
            "time_ms must be at most 60000 ms ahead of the server clock",
        ));
    }
    raise_floor(ms);
    ctx.replicate_verbatim();
    Ok(RedisValue::SimpleStringStatic("OK"))
}
