//! Deliver to an inbox: a member added to a sorted set kept to its newest `cap` members, as
//! ZADD then ZPOPMIN of the excess would (IM.SEND's inboxes, IM.CHANGE's change log), each
//! signalled and notified as those commands do.

use crate::error::Error;
use crate::host::zset::{Member, ZsetKey};
use crate::host::{Arg, Ctx};

/// ZADD inbox score member, then ZPOPMIN of what exceeds the cap, on the open key `z` (named
/// `inbox`); the highest score dropped, if any (the caller raises its trimmed marker to it).
pub(crate) fn add_and_trim(
    ctx: &Ctx,
    z: &mut ZsetKey,
    inbox: &Arg,
    score: f64,
    member: &Member,
    cap: u64,
) -> Result<Option<f64>, Error> {
    let added = z.add(score, member)?;
    let excess = (z.len() as u64).saturating_sub(cap);
    let mut top = None;
    for _ in 0..excess {
        match z.pop_min() {
            Some(dropped) => top = Some(dropped),
            None => break,
        }
    }
    if added {
        ctx.zset_changed(c"zadd", inbox);
    }
    if top.is_some() {
        ctx.zset_changed(c"zpopmin", inbox);
    }
    Ok(top)
}
