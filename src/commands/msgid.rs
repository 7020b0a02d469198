//! MSGID.GEN / ENCODE / DECODE / HASH, and MSGID.FLOOR (the replicated time high-water mark).

use crate::config::{effective_hash_mode, HashMode, CLUSTER_MODE};
use crate::core::javahash::java_hash22;
use crate::core::msgid::{Fields, MsgId, MAX_HASH, MAX_SEQ, MAX_TIME, MAX_TYPE};
use crate::core::slot::{key_slot, slot_hash22, slot_of_hash22};
use crate::error::{err, Error};
use crate::glue::{Arg, Ctx, Val};
use crate::node::{self, cluster, ids};
use std::sync::atomic::Ordering;

/// The `INFO imid` fields of this family, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 9] {
    let g = ids::msgid_stats();
    [
        ("msgid_generated", g.generated),
        ("msgid_borrowed_ms", g.borrowed_ms),
        ("msgid_clock_regressions", g.clock_regressions),
        ("msgid_lease_renewals", ids::lease_renewals()),
        ("msgid_high_water_ms", ids::high_water()),
        ("cluster_peer_lease_ms", cluster::peer_lease()),
        ("cluster_slot_adoptions", cluster::ADOPTIONS.get()),
        ("cluster_leases_refused", cluster::REFUSED.get()),
        ("cluster_slots_importing", cluster::importing()),
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
    ctx.reply_bulk(&fields.to_id().to_text());
    Ok(())
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
        ("time", Val::Int(i64::try_from(f.time).unwrap_or(i64::MAX))),
        ("seq", Val::Int(i64::from(f.seq))),
        ("channel_type", Val::Int(i64::from(f.channel_type))),
        ("hash", Val::Int(i64::from(f.hash))),
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

/// How far ahead of this server's clock a client may set the floor (replication and AOF
/// replay may go further: they carry the lease of a primary whose clock may be ahead).
pub(crate) const CLIENT_FLOOR_LEAD_MS: u64 = 60_000;

/// MSGID.FLOOR time_ms
///
/// Raises the node's message-ID time floor, and its UID floor with it: IDs issued afterwards
/// have a time at or above it. The primary writes it (renewing its message-ID lease) into the
/// AOF and the replication stream, so that a restarted node or a promoted replica starts above
/// every ID issued before. Never lowers. (Raising the UID floor too keeps AOF files and
/// replication streams of earlier versions, whose one lease covered UIDs, covering them.)
///
/// From a client the time may lead this server's clock by at most a minute: the floor is
/// persisted and replicated and can never be lowered, so one mistaken call (microseconds for
/// milliseconds, say) would otherwise move every later ID into the future for good. From any
/// source it must be at most 2^42 (the end of the 42-bit time field, the lease's cap: every
/// message ID is below it): no correct writer produces more, so a replayed or replicated one
/// is refused (and logged) like a client's.
pub(crate) fn floor(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    apply_floor(
        ctx,
        args,
        "MSGID.FLOOR",
        ids::MSGID_LEASE_CAP,
        ids::raise_floor,
    )
}

/// A FLOOR command (`MSGID.FLOOR`, `UID.FLOOR`): `time_ms` in `0..=cap` from any source, at
/// most [`CLIENT_FLOOR_LEAD_MS`] ahead of the server clock from a client; then `raise`, and
/// the command is replicated as called.
pub(crate) fn apply_floor(
    ctx: &Ctx,
    args: &[Arg],
    name: &str,
    cap: u64,
    raise: fn(u64) -> Result<(), Error>,
) -> Result<(), Error> {
    let [_, ms] = args else {
        return Err(Error::WrongArity);
    };
    // An atomic slot migration's snapshot starts with the source's marks (it is written by
    // our AOF rewrite). They cover every ID the source issued in all its slots and reach 5 s
    // past its last, so applying them would put this node's IDs up to 5 s ahead per migration,
    // adding up when slots move back and forth. The source's promise, adopted for the moving
    // slots as for any import (node::cluster), is what keeps this node above the source's IDs;
    // so the marks are taken as read, changing nothing and replicating nothing.
    if ctx.is_slot_import() {
        ctx.reply_ok();
        return Ok(());
    }
    let from_client = !ctx.is_replay();
    let max = i64::try_from(cap).unwrap_or(i64::MAX);
    let ms = match ms.int_in("time_ms", 0, max) {
        Ok(v) => v.unsigned_abs(),
        Err(e) => {
            if !from_client {
                ctx.log_warning(&format!(
                    "imid: refused {name} {} from the AOF or the primary: not a time in 0..{max} ms; the floor is unchanged",
                    String::from_utf8_lossy(ms.bytes())
                ));
            }
            return Err(e);
        }
    };
    if from_client && ms > node::now_ms().saturating_add(CLIENT_FLOOR_LEAD_MS) {
        return Err(err(
            "time_ms must be at most 60000 ms ahead of the server clock",
        ));
    }
    raise(ms)?;
    ctx.replicate_verbatim();
    ctx.reply_ok();
    Ok(())
}
