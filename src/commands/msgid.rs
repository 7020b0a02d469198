//! MSGID.GEN / ENCODE / DECODE / HASH, MSGID.FLOOR (the replicated time high-water mark;
//! `commands::floor`), and MSGID.PROMISE (a slot migration's source's promise, carried inside
//! the migration).

use crate::config::{effective_hash_mode, HashMode, CLUSTER_MODE};
use crate::core::javahash::java_hash22;
use crate::core::msgid::{Fields, MsgId, MAX_HASH, MAX_SEQ, MAX_TIME, MAX_TYPE};
use crate::core::slot::{key_slot, slot_hash22, slot_of_hash22};
use crate::core::to_i64;
use crate::error::{err, Error};
use crate::host::cluster::NODE_ID_LEN;
use crate::host::{Arg, Ctx, FieldValue};
use crate::node::fence::{self, Need};
use crate::node::promises::Leases;
use crate::node::{cluster, ids};
use std::sync::atomic::Ordering;

/// The `INFO imid` fields of this family, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 5] {
    let g = ids::msgid_stats();
    [
        ("msgid_generated", g.generated),
        ("msgid_borrowed_ms", g.borrowed_ms),
        ("msgid_clock_regressions", g.clock_regressions),
        ("msgid_lease_renewals", ids::lease_renewals()),
        ("msgid_high_water_ms", ids::high_water()),
    ]
}

/// The target hash under `mode` (the effective `imid.msgid-hash`).
fn target_hash(mode: &HashMode, target: &[u8]) -> Result<u32, Error> {
    match mode {
        HashMode::slot => Ok(slot_hash22(target)),
        _ => java_hash22(target).ok_or_else(|| {
            err("target must be valid UTF-8 in java hash mode (imid.msgid-hash java)")
        }),
    }
}

fn channel_type_arg(arg: &Arg) -> Result<u64, Error> {
    arg.int_in("channel_type", 0, i64::from(MAX_TYPE))
        .map(i64::unsigned_abs)
}

/// MSGID.GEN channel_type target
pub(crate) fn gen(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, channel_type, target] = args else {
        return Err(Error::WrongArity);
    };
    let (text, time) = new_id(ctx, channel_type, target)?;
    // At once while the ID's time lies inside the lease the replicas acknowledged.
    let need = Need::default().with_ids(Some(time), None);
    fence::check(ctx, need)?.answer(ctx, &text[..])
}

/// What MSGID.GEN does, for IM.SEND too: checks both arguments, then issues the ID, as text,
/// with its time (for the fence).
#[inline(always)]
pub(crate) fn new_id(
    ctx: &Ctx,
    channel_type: &Arg,
    target: &Arg,
) -> Result<([u8; crate::core::msgid::TEXT_LEN], u64), Error> {
    let channel_type = channel_type_arg(channel_type)?;
    let mode = effective_hash_mode();
    let hash = target_hash(&mode, target.bytes())?;
    // In cluster mode the target's slot, for slot adoption (node::cluster); in slot mode the
    // hash already carries it.
    let slot = CLUSTER_MODE.load(Ordering::Relaxed).then(|| match mode {
        HashMode::slot => slot_of_hash22(hash),
        _ => key_slot(target.bytes()),
    });
    let issued = ids::issue_msgid(ctx, slot)
        .map_err(|_| err("message id time field exhausted (2^42-1 ms)"))?;
    let fields = Fields::new(
        issued.time,
        u64::from(issued.seq),
        channel_type,
        u64::from(hash),
    )
    .map_err(err)?;
    Ok((fields.to_id().to_text(), issued.time))
}

/// MSGID.ENCODE time_ms seq channel_type hash
pub(crate) fn encode(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, time, seq, channel_type, hash] = args else {
        return Err(Error::WrongArity);
    };
    let time = time.int_in("time_ms", 0, MAX_TIME as i64)?.unsigned_abs();
    let seq = seq.int_in("seq", 0, i64::from(MAX_SEQ))?.unsigned_abs();
    let channel_type = channel_type_arg(channel_type)?;
    let hash = hash.int_in("hash", 0, i64::from(MAX_HASH))?.unsigned_abs();
    let fields = Fields::new(time, seq, channel_type, hash).map_err(err)?;
    ctx.reply_bulk(&fields.to_id().to_text());
    Ok(())
}

/// Parses a message ID argument under the strict rules (shared with OPENID.ENC).
pub(crate) fn parse_msgid(arg: &Arg) -> Result<MsgId, Error> {
    MsgId::parse(arg.bytes()).map_err(err)
}

/// MSGID.DECODE msgid
pub(crate) fn decode(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, msgid] = args else {
        return Err(Error::WrongArity);
    };
    let f = parse_msgid(msgid)?.fields();
    ctx.reply_fields(&[
        ("time", FieldValue::Int(to_i64(f.time))),
        ("seq", FieldValue::Int(i64::from(f.seq))),
        ("channel_type", FieldValue::Int(i64::from(f.channel_type))),
        ("hash", FieldValue::Int(i64::from(f.hash))),
    ]);
    Ok(())
}

/// MSGID.HASH target
pub(crate) fn hash(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, target] = args else {
        return Err(Error::WrongArity);
    };
    ctx.reply_int(i64::from(target_hash(
        &effective_hash_mode(),
        target.bytes(),
    )?));
    Ok(())
}

/// MSGID.FLOOR time_ms
///
/// Raises the node's message-ID time floor, and its UID floor with it: IDs issued afterwards
/// have a time at or above it. The primary writes it (renewing its message-ID lease) into the
/// AOF and the replication stream, so that a restarted node or a promoted replica starts above
/// every ID issued before. Never lowers. (Raising the UID floor too keeps AOF files and
/// replication streams of earlier versions, whose one lease covered UIDs, covering them.) The
/// rules every FLOOR command shares are in `commands::floor`; at most 2^42 here (the end of the
/// 42-bit time field, the lease's cap: every message ID is below it).
pub(crate) fn floor(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    super::floor::apply(
        ctx,
        args,
        "MSGID.FLOOR",
        ids::MSGID_LEASE_CAP,
        ids::raise_floor,
    )
}

/// MSGID.PROMISE key node-id msgid-ms uid-ms
///
/// Internal: the promise of a Redis 8.4+ atomic slot migration's source (`node::promises`),
/// carried to the target inside the migration (`node::ids`, `node::migration`); `key` is a key
/// of a migrating slot, which is what routes it into the migration, and is not touched.
/// Replayed, it records `node-id`'s promise as if heard over the bus (the target adopts it when
/// it takes the slots over; the source's replicas and AOF just note it). It changes no key and
/// replicates nothing: a replica of the target gets it from the target's stream as applied.
/// A client's call is refused after the argument checks.
pub(crate) fn promise(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, _key, node, msgid, uid] = args else {
        return Err(Error::WrongArity);
    };
    let node = node.bytes();
    if node.len() != NODE_ID_LEN {
        return Err(err(format_args!(
            "node-id must be a cluster node ID ({NODE_ID_LEN} characters)"
        )));
    }
    let msgid = msgid.int_in("msgid-ms", 0, i64::MAX)?.unsigned_abs();
    let uid = uid.int_in("uid-ms", 0, i64::MAX)?.unsigned_abs();
    if !ctx.is_replay() {
        return Err(err(
            "MSGID.PROMISE is written by imid into slot migrations, not called by clients",
        ));
    }
    cluster::carried(ctx, node, Leases { msgid, uid });
    ctx.reply_ok();
    Ok(())
}
