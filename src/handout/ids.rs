//! Issue an ID: a message ID (MSGID.GEN, IM.SEND's) or UIDs (UID.GEN, IM.SEND's), each with
//! its time, which the gate must find inside the lease the acknowledgers hold before the ID goes
//! out ([`gen_msgid`], [`gen_uid`]: through the runner).

use super::gate;
use crate::config::{effective_hash_mode, HashMode, CLUSTER_MODE};
use crate::core::javahash::java_hash22;
use crate::core::msgid::{Fields, TEXT_LEN};
use crate::core::slot::{key_slot, slot_hash22, slot_of_hash22};
use crate::core::to_i64;
use crate::core::uid::Run;
use crate::error::{err, Error};
use crate::host::{Answer, Arg, Ctx};
use crate::node::fence::Outgoing;
use crate::node::ids;
use std::sync::atomic::Ordering;

/// A message ID's text.
pub(crate) type MsgIdText = [u8; TEXT_LEN];

/// The target hash under `mode` (the effective `imid.msgid-hash`); MSGID.HASH's answer.
pub(crate) fn target_hash(mode: &HashMode, target: &[u8]) -> Result<u32, Error> {
    match mode {
        HashMode::slot => Ok(slot_hash22(target)),
        _ => java_hash22(target).ok_or_else(|| {
            err("target must be valid UTF-8 in java hash mode (imid.msgid-hash java)")
        }),
    }
}

/// Issues a message ID for `target` (its hash checked first), as text, with its time.
#[inline(always)]
pub(crate) fn msgid(
    ctx: &Ctx,
    channel_type: u64,
    target: &[u8],
) -> Result<(MsgIdText, u64), Error> {
    let mode = effective_hash_mode();
    let hash = target_hash(&mode, target)?;
    // In cluster mode the target's slot, for slot adoption (node::cluster); in slot mode the
    // hash already carries it.
    let slot = CLUSTER_MODE.load(Ordering::Relaxed).then(|| match mode {
        HashMode::slot => slot_of_hash22(hash),
        _ => key_slot(target),
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

/// MSGID.GEN: a message ID, answered at once while its time lies inside the lease the
/// acknowledgers hold.
#[inline(always)]
pub(crate) fn gen_msgid(ctx: &Ctx, channel_type: u64, target: &[u8]) -> Result<(), Error> {
    let (text, time) = msgid(ctx, channel_type, target)?;
    let verdict = gate::enter(ctx, Outgoing::default().with_ids(Some(time), None))?;
    gate::leave(ctx, verdict, &text[..])
}

/// In cluster mode the slot of `target`: the node field in slot mode, and slot adoption. Its
/// bytes are read only then.
fn uid_slot(target: &Arg) -> Option<u16> {
    CLUSTER_MODE
        .load(Ordering::Relaxed)
        .then(|| key_slot(target.bytes()))
}

/// Issues one UID for `target`, with its time: the common call, on a path of its own, with the
/// run's length a constant the compiler folds through the inlined generator.
#[inline(always)]
pub(crate) fn uid(ctx: &Ctx, target: &Arg) -> Result<(u64, u64), Error> {
    match uid_slot(target) {
        None => ids::issue_one_uid(ctx),
        slot => ids::issue_uid(ctx, slot, 1).map(|run| (run.first(), run.time_ms)),
    }
}

/// UID.GEN target: one UID, answered as MSGID.GEN's ID is.
#[inline(always)]
pub(crate) fn gen_uid(ctx: &Ctx, target: &Arg) -> Result<(), Error> {
    let (id, time) = uid(ctx, target)?;
    let verdict = gate::enter(ctx, Outgoing::default().with_ids(None, Some(time)))?;
    gate::leave(ctx, verdict, &to_i64(id))
}

/// UID.GEN target COUNT n / STRING: a run of `n` UIDs, answered as `reply` makes it of them.
pub(crate) fn gen_uids<R: Answer>(
    ctx: &Ctx,
    target: &Arg,
    n: u32,
    reply: impl FnOnce(Run) -> R,
) -> Result<(), Error> {
    let run = ids::issue_uid(ctx, uid_slot(target), n)?;
    let need = Outgoing::default().with_ids(None, Some(run.time_ms));
    gate::run(ctx, need, || Ok(reply(run)))
}
