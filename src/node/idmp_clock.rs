//! The IDMP clock: the time, token lifetime and window size that the IDMP calls (`SEQ.NEXT ...
//! IDMP`, `SEQ.HNEXT ... IDMP`, IM.SEND's token) decide by, shared with replicas and the AOF so
//! that a replay decides alike.
//!
//! A replica or the AOF replaying a call with its own clock and configs could decide otherwise
//! (whether a token still counts, which tokens to drop). So a primary decides by this clock,
//! and writes it as `SEQ.IDMPCLOCK ms ttl-ms max` just before the first call that uses it and
//! changes its key ([`CallClock`]); a replay decides by the clock last replayed, and the call
//! replicates verbatim. When the clock moves, and where it cannot be shared: [`for_call`].

use crate::config::{seq_idmp_max, seq_idmp_ttl_ms};
pub(crate) use crate::core::idmp::Clock;
use crate::core::to_i64;
use crate::error::{err, Error};
use crate::host::{server, Ctx, WriteOrigin};
use std::sync::{Mutex, MutexGuard};

/// How far the wall clock must run ahead of the IDMP clock before the clock moves to it.
const STEP_MS: u64 = 1000;

struct State {
    /// The clock last used or replayed (`verbatim` unused here).
    clock: Option<Clock>,
    /// Whether `clock` was written to the streams opened since the last fork.
    sent: bool,
    /// A replay found no clock (warned once).
    warned: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    clock: None,
    sent: false,
    warned: false,
});

fn state() -> MutexGuard<'static, State> {
    // Commands run on Redis's main thread; a poisoned lock was caught by the guard already and
    // the state is written only whole.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The clock one IDMP call decides by, not yet the node's: [`for_call`] reads it, and
/// [`CallClock::commit`] (called only once the call has changed its key) makes it the node's
/// clock and writes it to the streams where they need it. A call that fails (WRONGTYPE, an
/// overflow, a reused token, a full map) or answers a retry never commits, so it writes
/// nothing, as docs/durability.md says of any error; a later call decides afresh.
#[must_use]
pub(crate) struct CallClock {
    clock: Clock,
    update: Update,
}

/// What committing a [`CallClock`] does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Update {
    /// Nothing: a local clock, or the node's, already written.
    Nothing,
    /// Write the node's clock (unchanged) to the streams opened since the last fork.
    Send,
    /// Move the node's clock to this call's and write it.
    Move,
}

impl CallClock {
    /// The clock the call decides by.
    pub(crate) fn clock(&self) -> Clock {
        self.clock
    }

    /// The call changed its key: its clock becomes the node's, written first where needed (it
    /// must precede the call in the streams, so commit before replicating the call).
    pub(crate) fn commit(self, ctx: &Ctx) {
        if self.update == Update::Nothing {
            return;
        }
        let mut st = state();
        if self.update == Update::Move {
            st.clock = Some(self.clock);
        } else if st.sent {
            return;
        }
        write_clock(ctx, &mut st, self.clock);
    }
}

/// The clock of one IDMP call (see [`CallClock`]), or the refusal of a clock whose tokens could
/// not be written back (expiring past 2^63-1 ms: `core::idmp::MAX_EXPIRES_MS`).
///
/// - A replay (the primary's stream, the AOF at load) takes the clock last replayed. Should
///   there be none (no correct stream lacks it), the call decides by this node's own clock and
///   configs, and a warning is logged once.
/// - Where IDMP calls cannot replicate as called, and for a client's write on a writable
///   replica, the wall clock and the configs, nothing written: an atomic slot migration's
///   stream drops keyless commands, so on a cluster node of Valkey 9 or Redis 8.4+ IDMP keeps
///   its explicit effect.
/// - Else (a primary's call) the clock; a moved clock, or one not written since the last fork,
///   is written as `SEQ.IDMPCLOCK` when the call commits. The clock follows the wall clock when
///   that reads a second or more past it (never back), and the configs when they change: at
///   most one `SEQ.IDMPCLOCK` a second. Every fork ([`on_fork_born`]) marks it unsent, so a
///   stream that starts from a snapshot gets it again; an RDB file carries it in its aux data
///   (`types::seq::aux`).
///
/// A clock whose tokens would expire past 2^63-1 ms is refused wherever it enters (here, and
/// [`check`] for `SEQ.IDMPCLOCK` and an RDB file's aux data): the streams write an expiry as a
/// signed integer.
pub(crate) fn for_call(ctx: &Ctx) -> Result<CallClock, Error> {
    let call = clock_for(ctx);
    if Clock::fits(call.clock.now_ms, call.clock.ttl_ms) {
        Ok(call)
    } else {
        Err(err(format_args!(
            "IDMP clock {} ms plus the token lifetime {} ms passes 2^63-1 ms: a token's expiry could not be written back",
            call.clock.now_ms, call.clock.ttl_ms
        )))
    }
}

fn clock_for(ctx: &Ctx) -> CallClock {
    let origin = ctx.write_origin();
    let nothing = |clock| CallClock {
        clock,
        update: Update::Nothing,
    };
    // A client's write on a writable replica stays on that node: its own clock and configs,
    // the primary's clock untouched (later replays decide by it).
    if origin == WriteOrigin::ReplicaClient
        || (origin == WriteOrigin::Primary && server::atomic_migration_possible())
    {
        return nothing(local(false));
    }
    let mut st = state();
    if origin == WriteOrigin::Replay {
        if let Some(c) = st.clock {
            let update = if st.sent {
                Update::Nothing
            } else {
                Update::Send
            };
            return CallClock { clock: c, update };
        }
        if !st.warned {
            st.warned = true;
            ctx.log_warning(
                "imid: an IDMP call was replayed before any SEQ.IDMPCLOCK; it decides by this node's clock and configs",
            );
        }
        return nothing(local(false));
    }
    let real = super::now_ms();
    let (ttl_ms, max) = (seq_idmp_ttl_ms(), seq_idmp_max());
    match st.clock {
        Some(c)
            if c.ttl_ms == ttl_ms && c.max == max && real < c.now_ms.saturating_add(STEP_MS) =>
        {
            let update = if st.sent {
                Update::Nothing
            } else {
                Update::Send
            };
            CallClock { clock: c, update }
        }
        prev => CallClock {
            clock: Clock {
                now_ms: prev.map_or(real, |p| p.now_ms.max(real)),
                ttl_ms,
                max,
                verbatim: true,
            },
            update: Update::Move,
        },
    }
}

/// The wall clock and the configs, for a call replicated by its explicit effect.
fn local(verbatim: bool) -> Clock {
    Clock {
        now_ms: super::now_ms(),
        ttl_ms: seq_idmp_ttl_ms(),
        max: seq_idmp_max(),
        verbatim,
    }
}

/// Writes `SEQ.IDMPCLOCK` (nothing reaches a stream while the server loads).
fn write_clock(ctx: &Ctx, st: &mut State, c: Clock) {
    ctx.replicate_ints(c"SEQ.IDMPCLOCK", &clock_ints(&c));
    st.sent = !ctx.is_loading();
}

fn clock_ints(c: &Clock) -> [i64; 3] {
    [to_i64(c.now_ms), to_i64(c.ttl_ms), to_i64(c.max as u64)]
}

/// A replayed `SEQ.IDMPCLOCK` (or the clock of an RDB file's aux data, `sent` false): the
/// clock later replays decide by. The command itself replicates verbatim (a replica's AOF).
pub(crate) fn replayed(now_ms: u64, ttl_ms: u64, max: usize, sent: bool) {
    let mut st = state();
    st.clock = Some(Clock {
        now_ms,
        ttl_ms,
        max,
        verbatim: true,
    });
    st.sent = sent;
}

/// A fork: the streams that start with it (a full sync, a rewritten AOF) have no clock yet.
pub(crate) fn on_fork_born() {
    state().sent = false;
}

/// The clock to save in RDB aux data, as (ms, ttl ms, max); `None` before any IDMP call.
pub(crate) fn saved() -> Option<(u64, u64, u64)> {
    state().clock.map(|c| (c.now_ms, c.ttl_ms, c.max as u64))
}

/// A whole IDMP clock as it enters from outside (`SEQ.IDMPCLOCK`, an RDB file's aux data):
/// [`bounds`], and a token recorded by it must expire at or before 2^63-1 ms
/// (`core::idmp::MAX_EXPIRES_MS`), or its expiry could not be written back.
pub(crate) fn check(now_ms: u64, ttl_ms: u64, max: u64) -> Result<(u64, usize), String> {
    let (ttl_ms, max) = bounds(ttl_ms, max)?;
    if Clock::fits(now_ms, ttl_ms) {
        Ok((ttl_ms, max))
    } else {
        Err(format!(
            "ms + ttl-ms must be at most {} (a token's expiry is written back as a signed 64-bit integer)",
            crate::core::idmp::MAX_EXPIRES_MS
        ))
    }
}

/// The lifetime (ms) and window size of an IDMP clock, in the ranges of `imid.seq-idmp-ttl`
/// (in ms) and `imid.seq-idmp-max`.
pub(crate) fn bounds(ttl_ms: u64, max: u64) -> Result<(u64, usize), String> {
    let (lo, hi) = crate::config::SEQ_IDMP_TTL.range;
    let ttl_range = lo.unsigned_abs().saturating_mul(1000)..=hi.unsigned_abs().saturating_mul(1000);
    if !ttl_range.contains(&ttl_ms) {
        return Err(format!(
            "ttl-ms must be in {}..{}",
            ttl_range.start(),
            ttl_range.end()
        ));
    }
    let (lo, hi) = crate::config::SEQ_IDMP_MAX.range;
    match usize::try_from(max) {
        Ok(m) if (lo.unsigned_abs()..=hi.unsigned_abs()).contains(&max) => Ok((ttl_ms, m)),
        _ => Err(format!("max must be in {lo}..{hi}")),
    }
}
