//! Raise an ID family's floor: the FLOOR commands' shared rules (MSGID.FLOOR, UID.FLOOR), the
//! replicated time high-water marks of the two ID families (`node::ids`).

use crate::core::to_i64;
use crate::error::{err, Error};
use crate::host::{Arg, Ctx};
use crate::node;

/// How far ahead of this server's clock a client may set the floor (replication and AOF
/// replay may go further: they carry the lease of a primary whose clock may be ahead).
pub(crate) const CLIENT_FLOOR_LEAD_MS: u64 = 60_000;

/// A FLOOR command (`MSGID.FLOOR`, `UID.FLOOR`): `time_ms` in `0..=cap` from any source, at
/// most [`CLIENT_FLOOR_LEAD_MS`] ahead of the server clock from a client; then `raise`, and
/// the command is replicated as called.
pub(crate) fn apply(
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
    let max = to_i64(cap);
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
