//! The IM flow, natively: IM.SEND does what `examples/lua/send.lua` does (the script stays, as
//! the way to change the storage model), and IM.SENDSET is its replicated form.
//!
//! IM.SEND tag seq inbox trimmed [inbox trimmed ...] channel_type sender client_msg_id body cap
//!
//! In the script's order and with its rules (`core::send`): a message ID, a UID, then the
//! conversation's next seq at most once per IDMP token (the reserve protocol,
//! `handout::reserve`), the message into every inbox. No key is written before every argument
//! and every key's type is checked. The rules in full are on [`send()`], its retry's on `retry`,
//! its replication on [`sendset`].

use crate::args::channel_type_arg;
use crate::core::idmp::Entry;
use crate::core::msgid::MsgId;
use crate::core::send;
use crate::core::seq::Seq;
use crate::core::{decimal, to_i64};
use crate::error::{err, Error, WRONGTYPE};
use crate::handout::gate;
use crate::handout::ids::{self, MsgIdText};
use crate::handout::inbox::add_and_trim;
use crate::handout::reserve::{self, signal_and_count, Block, IdmpCall, Planned, Target};
use crate::host::zset::{Member, ZsetKey};
use crate::host::{Answer, Arg, Ctx, Reply};
use crate::types::seq::key::SeqKey;

/// IM.SENDSET's argument before IM.SEND's arguments (`core::send::Ids`).
const SENDSET_PREFIX: usize = 1;

/// IM.SEND's arguments, checked (the channel type and the tag are MSGID.GEN's to check).
struct SendArgs<'a> {
    tag: &'a Arg,
    seq: &'a Arg,
    /// inbox, trimmed, inbox, trimmed, ...
    pairs: &'a [Arg],
    channel_type: &'a Arg,
    sender: &'a [u8],
    client_msg_id: &'a [u8],
    body: &'a [u8],
    cap: u64,
}

/// `tag seq (inbox trimmed)... channel_type sender client_msg_id body cap`, checked in the
/// script's order: the keys' count, the cap, the sender, the client message id.
fn parse(args: &[Arg]) -> Result<SendArgs<'_>, Error> {
    let n = send::pairs(args.len())?;
    let (tag, seq, pairs, tail) = match args {
        [tag, seq, rest @ ..] => match rest.split_at_checked(2 * n) {
            Some((pairs, tail)) => (tag, seq, pairs, tail),
            None => return Err(send::layout_error()),
        },
        _ => return Err(send::layout_error()),
    };
    let [channel_type, sender, client_msg_id, body, cap] = tail else {
        return Err(send::layout_error());
    };
    let cap = send::cap(cap.bytes())?;
    send::check_sender(sender.bytes(), client_msg_id.bytes())?;
    Ok(SendArgs {
        tag,
        seq,
        pairs,
        channel_type,
        sender: sender.bytes(),
        client_msg_id: client_msg_id.bytes(),
        body: body.bytes(),
        cap,
    })
}

/// Answers Redis's keys position request: the tag, the sequence, every inbox and trimmed key
/// (`offset` values before them for IM.SENDSET).
fn key_positions(ctx: &Ctx, args: &[Arg], offset: usize) {
    let keys = args.len().saturating_sub(1 + offset + send::TAIL);
    for i in 1 + offset..=keys + offset {
        ctx.key_at(i);
    }
}

/// IM.SEND tag seq inbox trimmed [inbox trimmed ...] channel_type sender client_msg_id body cap
///
/// In the script's order and with its rules (`core::send`): a message ID (MSGID.GEN's, for the
/// tag), a UID (UID.GEN's), then the next value of the conversation's sequence at most once per
/// IDMP token `sha1hex(sender|client_msg_id)` (the reserve protocol, `handout::reserve`); a
/// retry writes nothing and replies the first send's seq with its IDs read back ([`retry`]).
/// Otherwise `msgid|uid|sender|body` goes into each inbox at score seq, each inbox keeps its
/// newest `cap` members, and the highest dropped score raises that recipient's trimmed marker.
/// Reply `[seq, msgid, duplicate, uid]`.
///
/// All or nothing for the keys: every argument and every key's type is checked before any key
/// is written (the script checks an inbox's or a marker's type only when it reaches it, after
/// writing what came before). The IDs are issued before the sequence key is read, as the script
/// issues them, so a run of sends and retries takes the same IDs either way; issuing them may
/// replicate a lease renewal (MSGID.FLOOR, UID.FLOOR) before a later check refuses the call.
///
/// Replication: replaying IM.SEND as called would issue other IDs (they come from the clock),
/// so it replicates one command, `IM.SENDSET "seq msgid uid expires-ms dropped" <IM.SEND's
/// arguments>` ([`sendset`]): the values it chose as one argument, then its own arguments by
/// reference (one `RedisModule_Replicate`, one argument object made). Nothing is replicated for
/// a retry. The leases (MSGID.FLOOR, UID.FLOOR) and the IDMP clock (SEQ.IDMPCLOCK) go out as
/// for MSGID.GEN, UID.GEN and SEQ.NEXT ... IDMP.
pub(crate) fn send(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        key_positions(ctx, args, 0);
        return Ok(());
    }
    let [_, rest @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let s = parse(rest)?;
    send::check_recipients(s.pairs.len() / 2)?;
    // The IDs first, as the script takes them (MSGID.GEN's checks: the channel type, the tag).
    let channel_type = channel_type_arg(s.channel_type)?;
    let (msgid, msgid_ms) = ids::msgid(ctx, channel_type, s.tag.bytes())?;
    let (uid, uid_ms) = ids::uid(ctx, s.tag)?;
    let token = send::token(s.sender, s.client_msg_id);
    let idmp = IdmpCall::new(ctx, &token, 1)?;
    let seqkey = SeqKey::open_write(ctx, s.seq)?;
    let r = match reserve::plan(ctx, seqkey, (s.seq, None), 1, Some(idmp))? {
        Planned::Retry(seq) => return gate::retry(ctx, &retry(ctx, &s, seq)?),
        Planned::Reserve(r) => r,
    };
    // The gate checks the sequence value, the token's record and both IDs once the inboxes
    // are open (a refusal changes nothing).
    let keys = open_pairs(ctx, &s)?;
    let need = r.need().with_ids(Some(msgid_ms), Some(uid_ms));
    gate::run(ctx, need, || {
        let block = r.store(ctx)?;
        signal_and_count::<SeqKey>(ctx, s.seq, &block, 1);
        let seq = block.last;
        let mut digits = [0u8; 20];
        let uid_len = decimal(uid, &mut digits).len();
        let reply = SendReply {
            seq,
            msgid,
            digits,
            uid_len,
        };
        deliver(ctx, &s, keys, seq, &msgid, reply.uid())?;
        let (expires_ms, dropped) = token_effect(&block);
        let ids = send::Ids {
            seq,
            msgid: &msgid,
            uid,
            expires_ms,
            dropped,
        };
        ctx.replicate_send(c"IM.SENDSET", ids.text(&mut [0; send::IDS_MAX]), rest);
        Ok(reply)
    })
}

/// A first send's reply: `[seq, msgid, 0, uid]`.
struct SendReply {
    seq: u64,
    msgid: MsgIdText,
    /// The UID's decimal text: the last `uid_len` bytes of `digits` (`core::decimal`).
    digits: [u8; 20],
    uid_len: usize,
}

impl SendReply {
    fn uid(&self) -> &[u8] {
        let start = self.digits.len().saturating_sub(self.uid_len);
        self.digits.get(start..).unwrap_or_default()
    }
}

impl Answer for SendReply {
    fn write(&self, ctx: &Ctx) {
        ctx.reply_array(4);
        ctx.reply_int(to_i64(self.seq));
        ctx.reply_bulk(&self.msgid);
        ctx.reply_int(0);
        ctx.reply_bulk(self.uid());
    }
    fn keep(&self) -> Reply {
        Reply::Array(vec![
            Reply::Int(to_i64(self.seq)),
            Reply::Bulk(self.msgid.to_vec()),
            Reply::Int(0),
            Reply::Bulk(self.uid().to_vec()),
        ])
    }
}

/// The token record's expiry and drop count, as SEQ.IDMPSET carries them.
fn token_effect(b: &Block) -> (u64, u64) {
    match b.effect {
        Some([_, expires, dropped]) => (expires.unsigned_abs(), dropped.unsigned_abs()),
        None => (0, 0),
    }
}

/// The inbox and trimmed keys of a send, checked before anything is written: every inbox a
/// sorted set (or missing), every trimmed key a sequence (or missing).
enum Pairs<'a> {
    /// Every name distinct (the usual case): each key opened once, for writing, here, and
    /// written through the same handle.
    Held(Vec<(ZsetKey<'a>, SeqKey<'a>)>),
    /// A name given twice (a recipient named twice, a key in two roles): checked here, then
    /// opened again one at a time as the script reaches it, so that a key written in one role
    /// is seen as it is now in the next (two handles on one missing key must not both create
    /// it).
    OneByOne,
}

fn open_pairs<'a>(ctx: &'a Ctx, s: &SendArgs) -> Result<Pairs<'a>, Error> {
    let names = std::iter::once(s.seq.bytes()).chain(s.pairs.iter().map(Arg::bytes));
    if !send::distinct(names) {
        check_keys(ctx, s)?;
        return Ok(Pairs::OneByOne);
    }
    let mut held = Vec::with_capacity(s.pairs.len() / 2);
    for pair in s.pairs.chunks_exact(2) {
        let [inbox, trimmed] = pair else { continue };
        held.push((
            ZsetKey::open_write(ctx, inbox)?,
            SeqKey::open_write(ctx, trimmed)?,
        ));
    }
    Ok(Pairs::Held(held))
}

/// The checks of [`Pairs::OneByOne`]. A missing inbox that is also the sequence or a trimmed key
/// would have to hold two types: WRONGTYPE too, as the script would find once it had written
/// the other.
fn check_keys(ctx: &Ctx, s: &SendArgs) -> Result<(), Error> {
    for pair in s.pairs.chunks_exact(2) {
        let [inbox, trimmed] = pair else { continue };
        let missing = ZsetKey::open_read(ctx, inbox)?.len() == 0;
        SeqKey::open_read(ctx, trimmed)?;
        if missing && aliased(inbox.bytes(), s) {
            return Err(WRONGTYPE);
        }
    }
    Ok(())
}

/// Whether `inbox` is also the sequence or a trimmed key of the call.
fn aliased(inbox: &[u8], s: &SendArgs) -> bool {
    inbox == s.seq.bytes()
        || s.pairs
            .chunks_exact(2)
            .any(|p| p.get(1).is_some_and(|t| t.bytes() == inbox))
}

/// The message into every inbox, each kept to the cap, each marker raised: what IM.SEND and
/// IM.SENDSET write after the sequence, in the script's order (per recipient: ZADD, ZPOPMIN of
/// the excess, SEQ.ADVANCE of the marker), with the script's keyspace events.
fn deliver(
    ctx: &Ctx,
    s: &SendArgs,
    keys: Pairs,
    seq: u64,
    msgid: &[u8],
    uid: &[u8],
) -> Result<(), Error> {
    let member = Member::new(&send::member(msgid, uid, s.sender, s.body)).ok_or(Error::Static(
        c"ERR internal error: could not make the member",
    ))?;
    let score = send::score(seq);
    let names = s.pairs.chunks_exact(2);
    match keys {
        Pairs::Held(held) => {
            for (pair, (mut z, mut t)) in names.zip(held) {
                let [inbox, trimmed] = pair else { continue };
                if let Some(top) = add_and_trim(ctx, &mut z, inbox, score, &member, s.cap)? {
                    raise_marker(ctx, &mut t, trimmed, send::marker(top))?;
                }
            }
        }
        Pairs::OneByOne => {
            for pair in names {
                let [inbox, trimmed] = pair else { continue };
                let mut z = ZsetKey::open_write(ctx, inbox)?;
                let top = add_and_trim(ctx, &mut z, inbox, score, &member, s.cap)?;
                drop(z);
                if let Some(top) = top {
                    let mut t = SeqKey::open_write(ctx, trimmed)?;
                    raise_marker(ctx, &mut t, trimmed, send::marker(top))?;
                }
            }
        }
    }
    Ok(())
}

/// SEQ.ADVANCE trimmed value on the open key `k` (named `key`), as that command writes it;
/// signalled only when it moved.
fn raise_marker(ctx: &Ctx, k: &mut SeqKey, key: &Arg, value: u64) -> Result<(), Error> {
    if k.raise(value)?.1 {
        ctx.changed(c"seq.advance", key);
    }
    Ok(())
}

/// A retry's reply: `[seq, msgid, 1, uid]` with the IDs read back from the first inbox that
/// holds a member at `seq`, in the order given (nil, nil when none does); nothing written. A
/// retry must repeat its message: every inbox named that holds a member at `seq` must hold this
/// sender's body there, and every other one must have had it dropped by its cap (its trimmed
/// marker at or past `seq`), else the client message id was used for another message, or the
/// retry names an inbox the first send did not (a subset of the first send's is a retry).
fn retry(ctx: &Ctx, s: &SendArgs, seq: u64) -> Result<Reply, Error> {
    let score = send::score(seq);
    let mut found: Option<(Vec<u8>, Vec<u8>)> = None;
    for pair in s.pairs.chunks_exact(2) {
        let [inbox, trimmed] = pair else { continue };
        match ZsetKey::open_read(ctx, inbox)?.first_at(score) {
            Some(m) => match send::fields(m.bytes()) {
                Some([msgid, uid, sender, body]) if sender == s.sender && body == s.body => {
                    if found.is_none() {
                        found = Some((msgid.to_vec(), uid.to_vec()));
                    }
                }
                _ => return Err(send::other_body(seq)),
            },
            None => {
                let dropped = SeqKey::open_read(ctx, trimmed)?.get().map_or(0, Seq::value);
                if dropped < seq {
                    return Err(send::other_recipients(seq, inbox.bytes()));
                }
            }
        }
    }
    let (msgid, uid) = match found {
        Some((msgid, uid)) => (Reply::Bulk(msgid), Reply::Bulk(uid)),
        None => (Reply::Null, Reply::Null),
    };
    Ok(Reply::Array(vec![
        Reply::Int(to_i64(seq)),
        msgid,
        Reply::Int(1),
        uid,
    ]))
}

/// IM.SENDSET "seq msgid uid expires-ms dropped" tag seq inbox trimmed [...] channel_type sender
/// client_msg_id body cap
///
/// IM.SEND's replicated form (see [`send()`]): the sequence set to `seq` (marked for the gap when
/// replayed, as SEQ.SET's value), the token `sha1hex(sender|client_msg_id)` recorded with `seq`,
/// `expires-ms` and COUNT 1 as its request after the `dropped` oldest tokens go (as SEQ.IDMPSET
/// does), then the inboxes, caps and markers as IM.SEND wrote them: deterministic on the same
/// data, so it replicates as called. Internal, like SEQ.IDMPSET; the channel type is carried
/// along, unused.
pub(crate) fn sendset(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    if ctx.keys_position_request() {
        key_positions(ctx, args, SENDSET_PREFIX);
        return Ok(());
    }
    let [_, ids, rest @ ..] = args else {
        return Err(Error::WrongArity);
    };
    let s = parse(rest)?;
    let ids = send::Ids::parse(ids.bytes())
        .ok_or_else(|| err("ids must be 'seq msgid uid expires-ms dropped' (integers in 0..9223372036854775807 and a message id)"))?;
    let msgid = MsgId::parse(ids.msgid).map_err(err)?.to_text();
    let (seq, uid, expires) = (ids.seq, ids.uid, ids.expires_ms);
    let dropped = usize::try_from(ids.dropped).unwrap_or(usize::MAX);
    let token = send::token(s.sender, s.client_msg_id);
    let entry = Entry::new(&token, seq, expires, 1u64)
        .ok_or(Error::Static(c"ERR internal error: token"))?;
    let new = Seq::new(seq, ctx.is_replay()).ok_or_else(|| err("seq out of range"))?;
    let mut seqkey = SeqKey::open_write(ctx, s.seq)?;
    let keys = open_pairs(ctx, &s)?;
    seqkey.set_with_token(new, dropped, entry)?;
    drop(seqkey);
    ctx.changed(<SeqKey as Target>::NAMES.event, s.seq);
    let mut digits = [0u8; 20];
    deliver(ctx, &s, keys, seq, &msgid, decimal(uid, &mut digits))?;
    ctx.replicate_verbatim();
    ctx.reply_ok();
    Ok(())
}
