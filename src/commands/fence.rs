//! The fence's operator commands (`node::fence`, docs/durability.md "The fence"): which
//! replicas this primary's term counts, and forgetting one that is gone for good.

use crate::core::to_i64;
use crate::error::{err, Error};
use crate::host::{Arg, Ctx, FieldValue};
use crate::node::fence;

/// FENCE.REPLICAS
///
/// Every replica of this primary's term, each as fields: `addr` (`ip:port`, as the replica
/// announces itself), `online` (1 or 0), `acked_offset` (the replication offset it
/// acknowledged last), `for_ms` (how long it has been online, or offline), `replicas` (how
/// many replicas announced that address at once this term: more than 1 is a misconfiguration
/// the fence counts by the lowest of them) and `connected` (how many are connected now).
/// Empty on a replica, and while the fence is off.
pub(crate) fn replicas(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_] = args else {
        return Err(Error::WrongArity);
    };
    let list = fence::term_replicas();
    ctx.reply_array(list.len());
    for (m, for_ms) in &list {
        ctx.reply_fields(&[
            ("addr", FieldValue::Bulk(m.addr.as_bytes())),
            ("online", FieldValue::Int(i64::from(m.online))),
            ("acked_offset", FieldValue::Int(to_i64(m.ack))),
            ("for_ms", FieldValue::Int(to_i64(*for_ms))),
            ("replicas", FieldValue::Int(to_i64(m.width as u64))),
            ("connected", FieldValue::Int(to_i64(m.connected as u64))),
        ]);
    }
    Ok(())
}

/// FENCE.FORGET addr
///
/// The replica at `addr` (`ip:port`, as FENCE.REPLICAS shows it) is gone for good: the fence
/// stops counting it. 1 when it was a replica of the term, 0 when not; an error for one that
/// is connected now, and for one that anything answers at its address, or that gives no answer
/// there within 1 s (it may be running behind a partition: `node::fence::term::forget`). It
/// counts again from the moment it attaches again.
pub(crate) fn forget(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, addr] = args else {
        return Err(Error::WrongArity);
    };
    let Ok(addr) = std::str::from_utf8(addr.bytes()) else {
        return Err(err(
            "replica address must be ip:port as FENCE.REPLICAS shows it",
        ));
    };
    // Answered now (no such member), or once the probe of its address is done.
    if let Some(forgotten) = fence::forget(ctx, addr)? {
        ctx.reply_int(i64::from(forgotten));
    }
    Ok(())
}

/// FENCE.STALE [CLEAR]
///
/// Without CLEAR: the address of the primary this node followed, without having synced from
/// it, when it was promoted (nil when not stale). A stale primary hands out nothing
/// (docs/durability.md, "A stale candidate"). CLEAR: an operator says that primary's data is
/// gone for good, and this node hands out from its own again; 1 when it was stale, 0 when not.
pub(crate) fn stale(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    match args {
        [_] => {
            match fence::stale() {
                Some(m) => ctx.reply_bulk(m.as_bytes()),
                None => ctx.reply_null(),
            }
            Ok(())
        }
        [_, what] if what.bytes().eq_ignore_ascii_case(b"CLEAR") => {
            ctx.reply_int(i64::from(fence::clear_stale(ctx)));
            Ok(())
        }
        [_, _] => Err(err("FENCE.STALE takes no argument or CLEAR")),
        _ => Err(Error::WrongArity),
    }
}
