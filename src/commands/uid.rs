//! UID.GEN / DECODE / ENCODE: 64-bit numeric IDs under the layout of the `imid.uid-*` configs,
//! and UID.FLOOR (the replicated UID time high-water mark).
//!
//! UID.GEN has a time lease of its own (`node::ids::issue_uid`), persisted and replicated as
//! `UID.FLOOR`, so restarts, clock jumps, failovers and slot moves never reissue a UID; its
//! borrowing never moves message IDs. Like MSGID.GEN it replicates nothing but the lease's
//! renewals: the IDs are not state.

use crate::config::CLUSTER_MODE;
use crate::core::uid::{Field, Layout, LayoutSpec, Run, TimeUnit, MAX_BATCH};
use crate::core::{decimal, to_i64};
use crate::error::{err, Error, SYNTAX};
use crate::handout;
use crate::host::{Answer, Arg, Ctx, FieldValue, Reply};
use crate::node::ids;
use std::sync::atomic::Ordering;

/// The `INFO imid` fields of this family, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 5] {
    let (stats, ends) = ids::uid_stats();
    [
        ("uid_generated", stats.generated),
        ("uid_borrowed_units", stats.borrowed_units),
        ("uid_time_ends_ms", ends),
        ("uid_lease_renewals", ids::uid_lease_renewals()),
        ("uid_high_water_ms", ids::uid_high_water()),
    ]
}

/// UID.FLOOR time_ms
///
/// Raises the node's UID time floor (Unix ms): UIDs issued afterwards have a time at or above
/// it (rounded up to the layout's unit). The primary writes it, renewing its UID lease, into the
/// AOF and the replication stream. Never lowers; the message-ID floor is not touched.
///
/// As MSGID.FLOOR: from a client at most a minute ahead of the server clock; from any source
/// at most 2^63-1 (the UID lease's cap).
pub(crate) fn floor(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    handout::floor::apply(
        ctx,
        args,
        "UID.FLOOR",
        ids::UID_LEASE_CAP,
        ids::raise_uid_floor,
    )
}

/// UID.GEN target [COUNT n] [STRING]
///
/// `STRING` replies the decimal text instead of integers: Lua scripts and Functions turn an
/// integer reply into a double, exact only below 2^53, and UIDs lie far above that.
pub(crate) fn gen(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, target, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    if opts.is_empty() {
        return handout::ids::gen_uid(ctx, target);
    }
    let mut count = None;
    let mut text = false;
    let mut rest = opts;
    // The last COUNT wins, as in Redis's own option parsing.
    while let [name, tail @ ..] = rest {
        match tail {
            [n, tail @ ..] if name.is("COUNT") => {
                count = Some(n.int_in("COUNT", 1, i64::from(MAX_BATCH))?);
                rest = tail;
            }
            tail if name.is("STRING") => {
                text = true;
                rest = tail;
            }
            _ => return Err(SYNTAX),
        }
    }
    // COUNT is in 1..10000, so the conversion keeps it.
    let n = count.map_or(1, |c| u32::try_from(c).unwrap_or(1));
    let array = count.is_some();
    handout::ids::gen_uids(ctx, target, n, |run| Uids { run, text, array })
}

/// UID.GEN's reply with options: the run (with COUNT an array of it, else its first UID), each
/// an integer or (STRING) its decimal text.
struct Uids {
    run: Run,
    text: bool,
    array: bool,
}

impl Uids {
    fn one(&self, uid: u64) -> Reply {
        if self.text {
            Reply::Bulk(uid.to_string().into_bytes())
        } else {
            Reply::Int(to_i64(uid))
        }
    }
}

impl Answer for Uids {
    /// Written straight into the reply, with no intermediate vector.
    fn write(&self, ctx: &Ctx) {
        if !self.array {
            return reply_uid(ctx, self.run.first(), self.text);
        }
        ctx.reply_array(usize::try_from(self.run.count()).unwrap_or(0));
        for uid in self.run.uids() {
            reply_uid(ctx, uid, self.text);
        }
    }
    fn keep(&self) -> Reply {
        if self.array {
            Reply::Array(self.run.uids().map(|u| self.one(u)).collect())
        } else {
            self.one(self.run.first())
        }
    }
}

/// One UID as an integer, or as its decimal text.
fn reply_uid(ctx: &Ctx, uid: u64, text: bool) {
    if text {
        let mut buf = [0u8; 20];
        ctx.reply_bulk(decimal(uid, &mut buf));
    } else {
        ctx.reply_int(to_i64(uid));
    }
}

/// The layout in force (fixed at load).
fn layout() -> Result<Layout, Error> {
    ids::uid_layout().ok_or_else(|| err("UID generator not configured"))
}

/// `[LAYOUT name-or-spec [EPOCH ms] [UNIT unit]]`: another layout to read or build IDs with,
/// resolved as the configs are (an explicit EPOCH or UNIT overrides a named layout's; widths
/// without them take 2026-01-01 and ms), or the node's own. No lifetime check: reading the IDs
/// of a scheme that has run out is what it is for. The node's config is not touched.
fn layout_option(opts: &[Arg]) -> Result<Layout, Error> {
    let [word, spec, rest @ ..] = opts else {
        return if opts.is_empty() {
            layout()
        } else {
            Err(SYNTAX)
        };
    };
    if !word.is("LAYOUT") {
        return Err(SYNTAX);
    }
    let text = std::str::from_utf8(spec.bytes()).map_err(|_| SYNTAX)?;
    let spec = match LayoutSpec::parse(text) {
        Ok(Some(s)) => s,
        Ok(None) => LayoutSpec::auto(CLUSTER_MODE.load(Ordering::Relaxed)),
        Err(e) => return Err(err(format_args!("LAYOUT: {e}"))),
    };
    let mut epoch = None;
    let mut unit: Option<TimeUnit> = None;
    let mut rest = rest;
    while let [name, value, tail @ ..] = rest {
        if name.is("EPOCH") && epoch.is_none() {
            epoch = Some(value.int_in("EPOCH", 0, i64::MAX)?.unsigned_abs());
        } else if name.is("UNIT") && unit.is_none() {
            let t = std::str::from_utf8(value.bytes()).map_err(|_| SYNTAX)?;
            unit = Some(TimeUnit::parse(t).map_err(|_| {
                err("UNIT must be ms, s, or a whole number of them (e.g. 10ms, 2s), at most 1 day")
            })?);
        } else {
            return Err(SYNTAX);
        }
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(SYNTAX);
    }
    spec.resolve(epoch, unit)
        .map_err(|e| err(format_args!("LAYOUT: {e}")))
}

/// UID.DECODE uid [LAYOUT name-or-spec [EPOCH ms] [UNIT unit]]
///
/// The time (Unix ms), then the node and seq fields in the layout's order.
pub(crate) fn decode(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, uid, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let uid = uid.int_in("uid", 0, i64::MAX)?.unsigned_abs();
    let layout = layout_option(opts)?;
    let f = layout.decode(uid);
    let [a, b, c] = layout.order().fields().map(|field| {
        let v = match field {
            Field::Time => f.time_ms,
            Field::Node => f.node,
            Field::Seq => f.seq,
        };
        (field.name(), FieldValue::Int(to_i64(v)))
    });
    ctx.reply_fields(&[a, b, c]);
    Ok(())
}

/// UID.ENCODE time_ms node seq [LAYOUT name-or-spec [EPOCH ms] [UNIT unit]]
pub(crate) fn encode(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, time, node, seq, opts @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let layout = layout_option(opts)?;
    let time = match time.int() {
        Some(t) if t >= 0 => t.unsigned_abs(),
        _ => {
            return Err(err(format_args!(
                "time_ms must be an integer in {}..{}",
                layout.epoch_ms(),
                layout.last_ms()
            )))
        }
    };
    let node = node
        .int_in("node", 0, to_i64(layout.node_max()))?
        .unsigned_abs();
    let seq = seq
        .int_in("seq", 0, to_i64(layout.seq_max()))?
        .unsigned_abs();
    let uid = layout.encode(time, node, seq).map_err(err)?;
    ctx.reply_int(to_i64(uid));
    Ok(())
}
