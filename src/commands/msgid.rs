//! MSGID.GEN / ENCODE / DECODE / HASH, MSGID.FLOOR (the replicated time high-water mark;
//! `commands::floor`), and MSGID.PROMISE (a slot migration's source's promise, carried inside
//! the migration).

use crate::args::{channel_type_arg, msgid_arg};
use crate::config::effective_hash_mode;
use crate::core::msgid::{Fields, MAX_HASH, MAX_SEQ, MAX_TIME};
use crate::core::to_i64;
use crate::error::{err, Error};
use crate::handout::{self, ids::target_hash};
use crate::host::cluster::NODE_ID_LEN;
use crate::host::{Arg, Ctx, FieldValue};
use crate::node::promises::Leases;
use crate::node::{cluster, ids};

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

/// MSGID.GEN channel_type target
pub(crate) fn gen(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, channel_type, target] = args else {
        return Err(Error::WrongArity);
    };
    handout::ids::gen_msgid(ctx, channel_type_arg(channel_type)?, target.bytes())
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

/// MSGID.DECODE msgid
pub(crate) fn decode(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, msgid] = args else {
        return Err(Error::WrongArity);
    };
    let f = msgid_arg(msgid)?.fields();
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
    handout::floor::apply(
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
