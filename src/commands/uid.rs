//! UID.GEN / DECODE / ENCODE: 64-bit numeric IDs under the layout of the `imid.uid-*` configs.
//!
//! UID.GEN shares MSGID's time lease (one high-water mark per node, persisted and replicated as
//! `MSGID.FLOOR`): it starts its time units at the lease's floor and keeps the lease ahead of
//! every UID it issues, so restarts, clock jumps and failovers never reissue a UID either.
//! [`lease_floor`] and [`lease_cover`] are the only two places that touch the lease.

use super::{err, int_arg, reply_fields, Val};
use crate::config::{uid_settings, CLUSTER_MODE};
use crate::core::uid::{Layout, LayoutError, NodeSpec, UidGenerator, UidStats, Widths, MAX_COUNT};
use redis_module::{raw, Context, RedisError, RedisResult, RedisString, RedisValue, Status};
use std::os::raw::{c_char, c_long};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

/// The node's UID generator, built once at load from the configs (which cannot change at
/// runtime). Commands run on Redis's main thread, so the lock is never contended.
static UID: Mutex<Option<UidGenerator>> = Mutex::new(None);

fn uid_gen() -> MutexGuard<'static, Option<UidGenerator>> {
    // A poisoned lock means a panic elsewhere was caught by the guard; the generator updates
    // its state in one step at the end of `issue`, so it is still consistent.
    UID.lock().unwrap_or_else(|e| e.into_inner())
}

fn not_configured() -> RedisError {
    err("UID generator not configured")
}

/// Builds the generator from the `imid.uid-*` configs and checks them together against the
/// server clock and mode. Called from init after the configs are loaded; a refusal fails the
/// load with a log line that says why (for a layout that runs out, when).
pub fn configure(ctx: &Context) -> Status {
    match build(crate::now_ms(), CLUSTER_MODE.load(Ordering::Relaxed)) {
        Ok(g) => {
            *uid_gen() = Some(g);
            Status::Ok
        }
        Err(e) => {
            ctx.log_warning(&format!("imid: {e}; not loading"));
            Status::Err
        }
    }
}

fn build(now_ms: u64, cluster: bool) -> Result<UidGenerator, LayoutError> {
    let (layout, epoch, unit, node) = uid_settings();
    let widths = Widths::parse(&layout)?.unwrap_or(Widths::auto(cluster));
    let layout = Layout::new(widths, epoch, unit)?;
    layout.check_lifetime(now_ms)?;
    let mode = layout.node_mode(NodeSpec::parse(&node)?, cluster)?;
    Ok(UidGenerator::new(layout, mode))
}

/// The `INFO imid` fields of this family, in order.
pub fn info_fields() -> [(&'static str, u64); 3] {
    let g = uid_gen();
    let (stats, ends) = g.as_ref().map_or((UidStats::default(), 0), |g| {
        (g.stats(), g.layout().end_ms())
    });
    [
        ("uid_generated", stats.generated),
        ("uid_borrowed_units", stats.borrowed_units),
        ("uid_time_ends_ms", ends),
    ]
}

/// The shared time floor UID times start from (Unix ms): MSGID's floor, raised from the lease
/// found in RDB aux data, the AOF or the replication stream.
fn lease_floor() -> u64 {
    super::msgid::floor_ms()
}

/// Keeps the shared lease ahead of `time_ms` (the last issued UID's time), writing the renewed
/// lease as `MSGID.FLOOR` to the AOF and to replicas when it moves.
fn lease_cover(ctx: &Context, time_ms: u64) {
    if let Some(lease) = super::msgid::cover(time_ms) {
        super::msgid::replicate_floor(ctx, lease);
    }
}

/// UID.GEN target [COUNT n] [STRING]
///
/// `STRING` replies the decimal text instead of integers: Lua scripts and Functions turn an
/// integer reply into a double, exact only below 2^53, and UIDs are far above that.
pub fn gen(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, target, opts @ ..] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let mut count = None;
    let mut text = false;
    let mut rest = opts;
    while let [name, tail @ ..] = rest {
        let name = name.as_slice();
        match tail {
            [n, tail @ ..] if name.eq_ignore_ascii_case(b"COUNT") => {
                // The range starts at 1, so the cast keeps the value.
                count = Some(int_arg(n, "COUNT", 1, i64::from(MAX_COUNT))? as u32);
                rest = tail;
            }
            tail if name.eq_ignore_ascii_case(b"STRING") => {
                text = true;
                rest = tail;
            }
            _ => return Err(err("syntax error")),
        }
    }
    let floor = lease_floor();
    let run = {
        let mut g = uid_gen();
        let g = g.as_mut().ok_or_else(not_configured)?;
        g.issue(
            target.as_slice(),
            crate::now_ms(),
            floor,
            count.unwrap_or(1),
        )
        .map_err(err)?
    };
    lease_cover(ctx, run.time_ms);
    if count.is_some() {
        raw::reply_with_array(
            ctx.ctx,
            c_long::try_from(run.count()).unwrap_or(c_long::MAX),
        );
        // Written straight into the reply, with no intermediate vector.
        for uid in run.uids() {
            reply_uid(ctx, uid, text);
        }
    } else {
        reply_uid(ctx, run.first(), text);
    }
    Ok(RedisValue::NoReply)
}

/// UIDs are below 2^63 by construction (the widths sum to 63).
fn as_i64(uid: u64) -> i64 {
    i64::try_from(uid).unwrap_or(i64::MAX)
}

/// One UID as an integer, or as its decimal text.
fn reply_uid(ctx: &Context, uid: u64, text: bool) {
    if text {
        let mut buf = [0u8; 20];
        let digits = decimal(uid, &mut buf);
        raw::reply_with_string_buffer(ctx.ctx, digits.as_ptr().cast::<c_char>(), digits.len());
    } else {
        raw::reply_with_long_long(ctx.ctx, as_i64(uid));
    }
}

/// The decimal digits of `v`, written at the end of `buf` (20 digits hold any u64).
fn decimal(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[at..];
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_matches_to_string() {
        let mut buf = [0u8; 20];
        for v in [
            0,
            1,
            9,
            10,
            4095,
            117_831_765_636_153_344,
            i64::MAX as u64,
            u64::MAX,
        ] {
            assert_eq!(super::decimal(v, &mut buf), v.to_string().as_bytes());
        }
    }
}

/// The current layout (fixed at load).
fn layout() -> Result<Layout, RedisError> {
    uid_gen()
        .as_ref()
        .map(|g| *g.layout())
        .ok_or_else(not_configured)
}

/// UID.DECODE uid
pub fn decode(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, uid] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    // The range starts at 0, so the cast keeps the value.
    let uid = int_arg(uid, "uid", 0, i64::MAX)? as u64;
    let f = layout()?.decode(uid);
    reply_fields(
        ctx,
        &[
            ("time", Val::Int(as_i64(f.time_ms))),
            ("node", Val::Int(as_i64(f.node))),
            ("seq", Val::Int(as_i64(f.seq))),
        ],
    )
}

/// UID.ENCODE time_ms node seq
pub fn encode(_ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, time, node, seq] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let layout = layout()?;
    let time = match time.parse_integer() {
        // Non-negative, so the cast keeps the value.
        Ok(t) if t >= 0 => t as u64,
        _ => {
            return Err(err(format_args!(
                "time_ms must be an integer in {}..{}",
                layout.epoch_ms(),
                layout.last_ms()
            )))
        }
    };
    // node_max and seq_max are below 2^63 (the widths sum to 63), the ranges start at 0.
    let node = int_arg(node, "node", 0, as_i64(layout.node_max()))? as u64;
    let seq = int_arg(seq, "seq", 0, as_i64(layout.seq_max()))? as u64;
    let uid = layout.encode(time, node, seq).map_err(err)?;
    Ok(RedisValue::Integer(as_i64(uid)))
}
