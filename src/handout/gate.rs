//! The runner: a call that hands something out is checked by the gate (`node::fence`: the
//! replicas of the term, the node's own AOF) before it changes anything, makes its writes, then
//! is answered now or waits until what it handed out is held. The only place the gate is asked
//! and answered.

use crate::error::Error;
use crate::host::{Answer, Ctx};
use crate::node::fence::{self, Outgoing, Verdict};

/// Hands out what `need` says: the gate refuses the call (nothing changed), or lets it through;
/// then `write` makes the call's writes and returns its reply, which goes out now or once the
/// acknowledgers hold what it handed out. An error from `write` is the call's reply (the
/// commands check everything `write` could refuse before they come here).
#[inline(always)]
pub(crate) fn run<R: Answer>(
    ctx: &Ctx,
    need: Outgoing,
    write: impl FnOnce() -> Result<R, Error>,
) -> Result<(), Error> {
    let verdict = enter(ctx, need)?;
    let reply = write()?;
    leave(ctx, verdict, &reply)
}

/// [`run`] in two steps, for the hand-out layer's own hot paths (SEQ.NEXT, MSGID.GEN, UID.GEN),
/// where a closure the compiler declines to inline costs every call: the gate's verdict, before
/// anything changes ...
#[inline(always)]
pub(super) fn enter(ctx: &Ctx, need: Outgoing) -> Result<Verdict, Error> {
    fence::check(ctx, need)
}

/// ... and the answer, after the writes: now, or once what the call handed out is held.
#[inline(always)]
pub(super) fn leave(
    ctx: &Ctx,
    verdict: Verdict,
    reply: &(impl Answer + ?Sized),
) -> Result<(), Error> {
    verdict.answer(ctx, reply)
}

/// An IDMP retry's reply (nothing written): it waits for the token's record as the first call
/// does, which may have waited in vain.
#[inline]
pub(crate) fn retry(ctx: &Ctx, reply: &(impl Answer + ?Sized)) -> Result<(), Error> {
    fence::check(ctx, Outgoing::RETRY)?.answer(ctx, reply)
}

/// A read of what the gate protects (IM.SYNC's messages and seqs, IM.UNREAD's count, IM.PULL's
/// changes): answered once every sequence increase it may show is held
/// (`node::fence::check_read`).
#[inline]
pub(crate) fn read(ctx: &Ctx, reply: &(impl Answer + ?Sized)) -> Result<(), Error> {
    fence::check_read(ctx)?.answer(ctx, reply)
}
