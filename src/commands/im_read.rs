//! The read side of the IM flow, natively: IM.SYNC (`examples/lua/sync.lua`), IM.READ
//! (`read.lua`), IM.PULL (`pull.lua`) and IM.CHANGE (`change.lua`), each with its script's
//! arguments without `numkeys`, its replies and the data it stores (the scripts stay, as the way
//! to change the storage model); IM.UNREAD and IM.READBY have no script; IM.CHANGESET is
//! IM.CHANGE's replicated form. The rules and error texts are `core::read`'s.
//!
//! IM.SYNC seq inbox trimmed last limit
//! IM.READ read inbox seq user upto
//! IM.UNREAD read inbox user
//! IM.READBY read seq member [member ...]
//! IM.PULL seqs trimmed log [log ...] kind seq [kind seq ...]
//! IM.CHANGE seqs trimmed log kind change cap
//!
//! Each handler's doc says its rules: what it checks before it writes, whether it waits on the
//! fence (docs/durability.md, `handout::gate`), and how it replicates.

use crate::args::value_arg;
use crate::core::read;
use crate::core::send;
use crate::core::seq::Seq;
use crate::core::{decimal, to_i64};
use crate::error::{err, Error, INTERNAL, WRONGTYPE};
use crate::handout::gate;
use crate::handout::inbox::add_and_trim;
use crate::handout::reserve::{self, signal_and_count, Field, Planned};
use crate::host::zset::{Member, ZsetKey};
use crate::host::{Answer, Arg, Ctx, Reply};
use crate::types::map::key::MapKey;
use crate::types::seq::key::SeqKey;

/// A SEQ key's value, as SEQ.GET reads it (0 when missing).
fn seq_value(ctx: &Ctx, key: &Arg) -> Result<u64, Error> {
    Ok(SeqKey::open_read(ctx, key)?.get().map_or(0, Seq::value))
}

/// `n` as a count of rows (saturated).
fn rows(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// IM.SYNC seq inbox trimmed last limit -> `[max_seq, cursor, complete, trimmed_through,
/// [seq, member, ...]]`, as sync.lua: the inbox's messages after `last`, at most `limit`.
///
/// The fence (docs/durability.md): on a primary with `imid.fence-replicas` above 0, IM.SYNC
/// (and IM.PULL, IM.UNREAD) reply only once the replicas of the term hold every sequence
/// increase this node made (`handout::gate::read`): they wait for them as IM.SEND does, so no
/// reader is shown a message, a seq or a change that a failover could take back.
pub(crate) fn sync(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        key_range(ctx, args, 1, 3);
        return Ok(());
    }
    let [_, seq, inbox, trimmed, last, limit] = args else {
        return Err(read::layout("sync", "seq inbox trimmed last limit"));
    };
    let last = read::sync_int(last.bytes(), "last seq")?;
    let limit = read::sync_limit(limit.bytes())?;
    let max_seq = seq_value(ctx, seq)?;
    let trimmed = seq_value(ctx, trimmed)?;
    // One row more than the page tells whether anything remains after it.
    let z = ZsetKey::open_read(ctx, inbox)?;
    let exists = z.len() > 0;
    let mut page = z.range_above(send::score(last), None, rows(limit.saturating_add(1)));
    drop(z);
    let complete = page.len() <= rows(limit);
    page.truncate(rows(limit));
    let page_last = page.last().map(|(_, s)| read::score_int(*s).unsigned_abs());
    let reply = SyncReply {
        max_seq,
        cursor: read::sync_cursor(last, page_last, complete, max_seq, exists),
        complete,
        trimmed,
        page,
    };
    gate::read(ctx, &reply)
}

struct SyncReply {
    max_seq: u64,
    cursor: u64,
    complete: bool,
    trimmed: u64,
    page: Vec<(Member, f64)>,
}

impl Answer for SyncReply {
    fn write(&self, ctx: &Ctx) {
        ctx.reply_array(5);
        ctx.reply_int(to_i64(self.max_seq));
        ctx.reply_int(to_i64(self.cursor));
        ctx.reply_int(i64::from(self.complete));
        ctx.reply_int(to_i64(self.trimmed));
        ctx.reply_array(self.page.len().saturating_mul(2));
        for (m, s) in &self.page {
            ctx.reply_int(read::score_int(*s));
            ctx.reply_bulk(m.bytes());
        }
    }
    fn keep(&self) -> Reply {
        let mut page = Vec::with_capacity(self.page.len().saturating_mul(2));
        for (m, s) in &self.page {
            page.push(Reply::Int(read::score_int(*s)));
            page.push(Reply::Bulk(m.bytes().to_vec()));
        }
        Reply::Array(vec![
            Reply::Int(to_i64(self.max_seq)),
            Reply::Int(to_i64(self.cursor)),
            Reply::Int(i64::from(self.complete)),
            Reply::Int(to_i64(self.trimmed)),
            Reply::Array(page),
        ])
    }
}

/// Answers Redis's keys position request: arguments `first..=last` are keys (those the call
/// has: a call too short for its layout names fewer, and is refused when it runs).
fn key_range(ctx: &Ctx, args: &[Arg], first: usize, last: usize) {
    for i in first..=last.min(args.len().saturating_sub(1)) {
        ctx.key_at(i);
    }
}

/// IM.READ read inbox seq user upto -> `[cursor, unread]`, as read.lua: the user's field of the
/// read map raised to `upto` clamped to the conversation's seq (SEQ.HADVANCE ... LIMIT), then
/// the inbox's messages above it counted, the user's own left out ([`count_unread`]).
///
/// All or nothing: every argument and both keys' types are checked before the cursor is written
/// (read.lua finds a wrong type only when it reaches the key, after writing what came before);
/// an inbox that is also the read map would have to hold two types: WRONGTYPE at once. It
/// waits for nothing on the fence (a read cursor is the client's own, clamped to the
/// conversation's seq). It replicates as called when it moved the cursor (replay clamps to the
/// same seq and finds the same cursor), nothing otherwise.
pub(crate) fn read(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        key_range(ctx, args, 1, 3);
        return Ok(());
    }
    let [_, map, inbox, seq, user, upto] = args else {
        return Err(read::layout("read", "read inbox seq user upto"));
    };
    let user = read::name_arg(user.bytes(), "user")?;
    let upto = upto
        .int_in("upto", 0, crate::core::seq::MAX_VALUE as i64)?
        .unsigned_abs();
    let to = upto.min(seq_value(ctx, seq)?);
    // The inbox's type before anything is written; an inbox that is also the read map would
    // have to be both.
    let inbox_missing = ZsetKey::open_read(ctx, inbox)?.len() == 0;
    if inbox_missing && inbox.bytes() == map.bytes() {
        return Err(WRONGTYPE);
    }
    // SEQ.HADVANCE ... LIMIT's write: replicated as called when it moved the cursor.
    let mut k = MapKey::open_write(ctx, map)?;
    let (cursor, moved) = k.raise_field(user, to)?;
    drop(k);
    if moved {
        ctx.replicate_verbatim();
        ctx.changed(c"seq.hadvance", map);
    }
    let cursor = cursor.value();
    let unread = count_unread(ctx, inbox, cursor, user)?;
    ctx.reply_array(2);
    ctx.reply_int(to_i64(cursor));
    ctx.reply_int(to_i64(unread));
    Ok(())
}

/// The messages of `inbox` above `cursor` that `user` did not send (a user's own messages are
/// never unread: the member's sender is the user): the newest
/// [`read::UNREAD_WALK`] looked at one by one (who sent each is in its member), the rest, if
/// any, counted by ZCOUNT (O(log n)) whoever sent them.
fn count_unread(ctx: &Ctx, inbox: &Arg, cursor: u64, user: &[u8]) -> Result<u64, Error> {
    let z = ZsetKey::open_read(ctx, inbox)?;
    let mut others = 0u64;
    let (walked, all) = z.walk_down(send::score(cursor), read::UNREAD_WALK, |m| {
        if !send::sent_by(m, user) {
            others = others.saturating_add(1);
        }
    });
    drop(z);
    let above = if all {
        None
    } else {
        Some(ctx.zcount_above(inbox, cursor)?)
    };
    Ok(read::unread(others, walked as u64, above))
}

/// IM.UNREAD read inbox user -> the unread count IM.READ would reply, without moving anything
/// (IM.READ's count without the write; no script):
/// read-only (replicas serve it), one conversation per call, for a badge (pipelined across
/// conversations, also in Cluster). It waits on the fence as IM.SYNC does, so it counts no
/// message a reader could not be shown yet.
pub(crate) fn unread(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        key_range(ctx, args, 1, 2);
        return Ok(());
    }
    let [_, map, inbox, user] = args else {
        return Err(read::layout("unread", "read inbox user"));
    };
    let user = read::name_arg(user.bytes(), "user")?;
    let cursor = MapKey::open_read(ctx, map)?.field(user).value();
    let n = count_unread(ctx, inbox, cursor, user)?;
    gate::read(ctx, &to_i64(n))
}

/// IM.READBY read seq member [member ...] -> `[read, lowest]`: how many of the members named
/// have a read cursor at or past `seq` (each argument counts once per time it is given), and
/// the lowest cursor among them ("read by all" when it is at or past `seq`; every message up to
/// it is read by all of them): the read receipts of one message, with no script. One map lookup
/// per member; read-only.
pub(crate) fn readby(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        key_range(ctx, args, 1, 1);
        return Ok(());
    }
    let [_, map, seq, members @ ..] = args else {
        return Err(read::layout("readby", "read seq member [member ...]"));
    };
    if members.is_empty() {
        return Err(read::layout("readby", "read seq member [member ...]"));
    }
    let seq = seq
        .int_in("seq", 0, crate::core::seq::MAX_VALUE as i64)?
        .unsigned_abs();
    for m in members {
        read::name_arg(m.bytes(), "member")?;
    }
    let k = MapKey::open_read(ctx, map)?;
    let m = k.get();
    let (mut count, mut lowest) = (0u64, u64::MAX);
    for member in members {
        let v = m.and_then(|m| m.get(member.bytes())).map_or(0, Seq::value);
        if v >= seq {
            count = count.saturating_add(1);
        }
        lowest = lowest.min(v);
    }
    drop(k);
    ctx.reply_array(2);
    ctx.reply_int(to_i64(count));
    ctx.reply_int(to_i64(lowest));
    Ok(())
}

/// IM.PULL seqs trimmed log [log ...] kind seq [kind seq ...] -> `[kind, seq, reset, [seq,
/// change, ...], ...]` for each kind whose seq is above the client's, as pull.lua.
///
/// A change log records its kind (`kind|<kind>` at score +inf, written by its first IM.CHANGE):
/// IM.PULL and IM.CHANGE refuse a log that records another kind, so a kind paired with another
/// kind's log by position is an error, not a silent mix-up. It waits on the fence as IM.SYNC
/// does.
pub(crate) fn pull(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, rest @ ..] = args else {
        return Err(Error::WrongArity);
    };
    if ctx.keys_position_request() {
        if let Ok(n) = read::pull_kinds(rest.len()) {
            key_range(ctx, args, 1, n.saturating_add(2));
        }
        return Ok(());
    }
    let n = read::pull_kinds(rest.len())?;
    let Some(([seqs, trimmed, logs @ ..], asked)) = rest.split_at_checked(n.saturating_add(2))
    else {
        return Err(INTERNAL);
    };
    // The script's order: every held seq, then the kinds (SEQ.HMGET's check), then each key.
    let mut held = Vec::with_capacity(n);
    for pair in asked.chunks_exact(2) {
        let [kind, seq] = pair else { continue };
        held.push((kind, read::pull_seq(seq.bytes())?));
    }
    for (kind, _) in &held {
        read::name_arg(kind.bytes(), "kind")?;
    }
    let now = map_values(ctx, seqs, &held)?;
    let cut = map_values(ctx, trimmed, &held)?;
    let mut out = Vec::new();
    let logged = logs.iter().zip(&held).zip(now).zip(cut).enumerate();
    for (i, (((log, (kind, held)), now), cut)) in logged {
        if now <= *held {
            continue;
        }
        // A log read is checked against its kind: one that records another kind was paired
        // with this one by mistake.
        let z = ZsetKey::open_read(ctx, log)?;
        if let Some(rec) = z.first_at(f64::INFINITY) {
            if rec.bytes() != read::kind_member(kind.bytes()) {
                let recorded = read::recorded_kind(rec.bytes());
                return Err(read::pull_mismatch(i + 1, n, recorded, kind.bytes()));
            }
        }
        // The log holds every change up to `now` but what the cap dropped: (held, now] is the
        // whole delta, at most the log's cap.
        let page = z.range_above(send::score(*held), Some(send::score(now)), usize::MAX);
        drop(z);
        out.push(Kind {
            kind: kind.bytes(),
            now,
            reset: cut > *held,
            page,
        });
    }
    gate::read(ctx, &PullReply(out))
}

/// The values of the kinds' fields in the map `key` (0 when missing), as SEQ.HMGET.
fn map_values(ctx: &Ctx, key: &Arg, kinds: &[(&Arg, u64)]) -> Result<Vec<u64>, Error> {
    let k = MapKey::open_read(ctx, key)?;
    let m = k.get();
    Ok(kinds
        .iter()
        .map(|(f, _)| m.and_then(|m| m.get(f.bytes())).map_or(0, Seq::value))
        .collect())
}

struct Kind<'a> {
    kind: &'a [u8],
    now: u64,
    reset: bool,
    page: Vec<(Member, f64)>,
}

struct PullReply<'a>(Vec<Kind<'a>>);

impl Answer for PullReply<'_> {
    fn write(&self, ctx: &Ctx) {
        ctx.reply_array(self.0.len().saturating_mul(4));
        for k in &self.0 {
            ctx.reply_bulk(k.kind);
            ctx.reply_int(to_i64(k.now));
            ctx.reply_int(i64::from(k.reset));
            ctx.reply_array(k.page.len().saturating_mul(2));
            for (m, s) in &k.page {
                let seq = read::score_int(*s);
                ctx.reply_int(seq);
                ctx.reply_bulk(read::change_of(m.bytes(), seq.unsigned_abs()));
            }
        }
    }
    fn keep(&self) -> Reply {
        let mut out = Vec::with_capacity(self.0.len().saturating_mul(4));
        for k in &self.0 {
            let mut page = Vec::with_capacity(k.page.len().saturating_mul(2));
            for (m, s) in &k.page {
                let seq = read::score_int(*s);
                page.push(Reply::Int(seq));
                page.push(Reply::Bulk(
                    read::change_of(m.bytes(), seq.unsigned_abs()).to_vec(),
                ));
            }
            out.push(Reply::Bulk(k.kind.to_vec()));
            out.push(Reply::Int(to_i64(k.now)));
            out.push(Reply::Int(i64::from(k.reset)));
            out.push(Reply::Array(page));
        }
        Reply::Array(out)
    }
}

/// IM.CHANGE's arguments, checked in change.lua's order: the cap, then the kind (SEQ.HNEXT's
/// check).
struct Change<'a> {
    seqs: &'a Arg,
    trimmed: &'a Arg,
    log: &'a Arg,
    kind_arg: &'a Arg,
    kind: &'a [u8],
    change: &'a [u8],
    cap: u64,
}

fn parse_change(args: &[Arg]) -> Result<Change<'_>, Error> {
    let [seqs, trimmed, log, kind_arg, change, cap] = args else {
        return Err(read::layout("change", "seqs trimmed log kind change cap"));
    };
    let cap = read::change_cap(cap.bytes())?;
    let kind = read::name_arg(kind_arg.bytes(), "kind")?;
    Ok(Change {
        seqs,
        trimmed,
        log,
        kind_arg,
        kind,
        change: change.bytes(),
        cap,
    })
}

/// The keys IM.CHANGE writes after the kind's seq, checked before anything is written and held
/// open for writing: the log, and the trimmed map unless it is the sequences map too (then it is
/// checked here and opened again when reached). A log that is also a map of the call would have
/// to be both: WRONGTYPE.
struct ChangeKeys<'a> {
    log: ZsetKey<'a>,
    trimmed: Option<MapKey<'a>>,
    /// The log records the kind already (its first change under this version records it).
    marked: bool,
}

fn open_change_keys<'a>(ctx: &'a Ctx, c: &Change<'a>) -> Result<ChangeKeys<'a>, Error> {
    let log = c.log.bytes();
    if log == c.seqs.bytes() || log == c.trimmed.bytes() {
        return Err(WRONGTYPE);
    }
    let trimmed = if c.trimmed.bytes() == c.seqs.bytes() {
        MapKey::open_read(ctx, c.trimmed)?;
        None
    } else {
        Some(MapKey::open_write(ctx, c.trimmed)?)
    };
    let log = ZsetKey::open_write(ctx, c.log)?;
    let marked = match log.first_at(f64::INFINITY) {
        Some(rec) if rec.bytes() == read::kind_member(c.kind) => true,
        Some(rec) => {
            return Err(read::change_mismatch(
                read::recorded_kind(rec.bytes()),
                c.kind,
            ))
        }
        None => false,
    };
    Ok(ChangeKeys {
        log,
        trimmed,
        marked,
    })
}

/// IM.CHANGE seqs trimmed log kind change cap -> the change's seq, as change.lua: the kind's
/// next seq (SEQ.HNEXT), `seq|change` into the log at that score, the log kept to its newest
/// `cap` members, the highest dropped score raising the kind's trimmed marker.
///
/// All or nothing: every argument and every key's type is checked before it writes (change.lua
/// finds a wrong type only when it reaches the key, after writing what came before); a key named
/// in two roles that would have to hold two types is WRONGTYPE at once ([`ChangeKeys`]). Its log
/// must record its kind (see [`pull`]). It hands out a seq and waits on the fence as SEQ.HNEXT
/// does (the reserve protocol). It replicates as called when its reservation does
/// (`core::reserve`), else `IM.CHANGESET seq <its arguments>` ([`changeset`]), which sets the
/// kind's seq and writes the log and the trimmed marker as IM.CHANGE did.
pub(crate) fn change(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        key_range(ctx, args, 1, 3);
        return Ok(());
    }
    let [_, rest @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let c = parse_change(rest)?;
    let target = Field::open(ctx, c.seqs, c.kind)?;
    let keys = open_change_keys(ctx, &c)?;
    let r = match reserve::plan(ctx, target, (c.seqs, Some(c.kind_arg)), 1, None)? {
        Planned::Reserve(r) => r,
        // No IDMP, so no retry.
        Planned::Retry(_) => return Err(INTERNAL),
    };
    gate::run(ctx, r.need(), || {
        let block = r.store(ctx)?;
        signal_and_count::<Field>(ctx, c.seqs, &block, 1);
        let seq = block.last;
        log_change(ctx, &c, keys, seq)?;
        if block.as_called {
            ctx.replicate_verbatim();
        } else {
            let mut digits = [0u8; 20];
            ctx.replicate_send(c"IM.CHANGESET", decimal(seq, &mut digits), rest);
        }
        Ok(to_i64(seq))
    })
}

/// What IM.CHANGE and IM.CHANGESET write after the kind's seq, in change.lua's order: ZADD
/// log seq `seq|change`, ZPOPMIN of the excess, SEQ.HADVANCE of the kind's trimmed marker to the
/// highest score dropped; each signalled and notified as those commands do.
fn log_change<'a>(
    ctx: &'a Ctx,
    c: &Change<'a>,
    keys: ChangeKeys<'a>,
    seq: u64,
) -> Result<(), Error> {
    let member = Member::new(&read::change_member(seq, c.change)).ok_or(INTERNAL)?;
    let ChangeKeys {
        mut log,
        trimmed,
        marked,
    } = keys;
    if !marked {
        let record = Member::new(&read::kind_member(c.kind)).ok_or(INTERNAL)?;
        log.add(f64::INFINITY, &record)?;
    }
    // The cap counts changes: the record of the kind is one member more.
    let cap = c.cap.saturating_add(1);
    let top = add_and_trim(ctx, &mut log, c.log, send::score(seq), &member, cap)?;
    drop(log);
    let Some(top) = top else {
        return Ok(());
    };
    let mut t = match trimmed {
        Some(t) => t,
        None => MapKey::open_write(ctx, c.trimmed)?,
    };
    if t.raise_field(c.kind, send::marker(top))?.1 {
        drop(t);
        ctx.changed(c"seq.hadvance", c.trimmed);
    }
    Ok(())
}

/// IM.CHANGESET seq seqs trimmed log kind change cap
///
/// IM.CHANGE's replicated form when its reservation skipped the gap: the kind's field set to
/// `seq` (marked for the gap when replayed, as SEQ.HSET's value), then the log and the trimmed
/// marker as IM.CHANGE wrote them. Deterministic on the same data, so it replicates as called.
/// Internal, like IM.SENDSET.
pub(crate) fn changeset(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        key_range(ctx, args, 2, 4);
        return Ok(());
    }
    let [_, seq, rest @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let seq = value_arg(seq)?;
    let c = parse_change(rest)?;
    let new = Seq::new(seq, ctx.is_replay()).ok_or_else(|| err("seq out of range"))?;
    let mut k = MapKey::open_write(ctx, c.seqs)?;
    let keys = open_change_keys(ctx, &c)?;
    k.set_field(c.kind, new)?;
    drop(k);
    ctx.changed(c"seq.hset", c.seqs);
    log_change(ctx, &c, keys, seq)?;
    ctx.replicate_verbatim();
    ctx.reply_ok();
    Ok(())
}
