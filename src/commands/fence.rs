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
/// acknowledged last), `for_ms` (how long it has been online, or offline). Empty on a
/// replica, and while the fence is off.
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
        ]);
    }
    Ok(())
}

/// FENCE.FORGET addr
///
/// The replica at `addr` (`ip:port`, as FENCE.REPLICAS shows it) is gone for good: the fence
/// stops counting it. 1 when it was a replica of the term, 0 when not; an error for one that
/// is connected now. It counts again from the moment it attaches again.
pub(crate) fn forget(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, addr] = args else {
        return Err(Error::WrongArity);
    };
    let Ok(addr) = std::str::from_utf8(addr.bytes()) else {
        return Err(err(
            "replica address must be ip:port as FENCE.REPLICAS shows it",
        ));
    };
    let forgotten = fence::forget(ctx, addr)?;
    ctx.reply_int(i64::from(forgotten));
    Ok(())
}
