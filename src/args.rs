//! Arguments several command files share: the sequence commands' (SEQ.* and SEQ.H*: a value, a
//! field name, NEXT's options, a token record, an ADVANCE's target and its LIMIT key) and a
//! message ID's (MSGID.DECODE, OPENID.ENC), a channel type's. Each is checked whole before any
//! key changes. A layer of its own, between the hand-out layer and the command files, so that
//! no command file imports another.

use crate::core::idmp::{check_token, Entry, FieldRequest, Request};
use crate::core::msgid::{MsgId, MAX_TYPE};
use crate::core::seq::{Seq, MAX_BLOCK, MAX_VALUE};
use crate::core::seqmap::check_name;
use crate::error::{err, Error, SYNTAX};
use crate::host::{Arg, Ctx};
use crate::types::map::key::field_error;
use crate::types::seq::key::SeqKey;

/// A sequence value, 0..2^63-1.
pub(crate) fn value_arg(arg: &Arg) -> Result<u64, Error> {
    // The range starts at 0, so the conversion keeps the value.
    arg.int_in("value", 0, MAX_VALUE as i64)
        .map(|v| v.unsigned_abs())
}

/// A map's field name, 1..MAX_NAME bytes (SEQ.H*).
pub(crate) fn field_arg(a: &Arg) -> Result<&[u8], Error> {
    let b = a.bytes();
    check_name(b).map_err(|_| field_error())?;
    Ok(b)
}

/// A message ID's channel type, 0..MAX_TYPE (MSGID.GEN, MSGID.ENCODE, IM.SEND).
pub(crate) fn channel_type_arg(arg: &Arg) -> Result<u64, Error> {
    arg.int_in("channel_type", 0, i64::from(MAX_TYPE))
        .map(i64::unsigned_abs)
}

/// A message ID under the strict rules (MSGID.DECODE, OPENID.ENC).
pub(crate) fn msgid_arg(arg: &Arg) -> Result<MsgId, Error> {
    MsgId::parse(arg.bytes()).map_err(err)
}

/// `[COUNT n] [IDMP token]` of SEQ.NEXT and SEQ.HNEXT: the block size (1 without COUNT) and the
/// token. The last COUNT wins, as in Redis's own option parsing; IDMP names one request, so
/// twice is refused.
#[inline]
pub(crate) fn next_options(opts: &[Arg]) -> Result<(u64, Option<&Arg>), Error> {
    // Most calls have none: no call to the parser for them.
    if opts.is_empty() {
        return Ok((1, None));
    }
    parse_next_options(opts)
}

fn parse_next_options(opts: &[Arg]) -> Result<(u64, Option<&Arg>), Error> {
    let mut count = 1;
    let mut token = None;
    let mut rest = opts;
    while let [name, tail @ ..] = rest {
        match tail {
            [n, tail @ ..] if name.is("COUNT") => {
                count = n.int_in("COUNT", 1, MAX_BLOCK as i64)?.unsigned_abs();
                rest = tail;
            }
            [t, tail @ ..] if name.is("IDMP") => {
                if token.is_some() {
                    return Err(err("IDMP given twice"));
                }
                check_token(t.bytes()).map_err(err)?;
                token = Some(t);
                rest = tail;
            }
            [] if name.is("IDMP") => return Err(err("IDMP needs a token (1..64 bytes)")),
            _ => return Err(SYNTAX),
        }
    }
    Ok((count, token))
}

/// `token last expires` of a recorded token (SEQ.IDMPSET, SEQ.HIDMPSET), each checked.
fn token_head<'a>(
    token: &'a Arg,
    last: &Arg,
    expires: &Arg,
) -> Result<(&'a [u8], u64, u64), Error> {
    check_token(token.bytes()).map_err(err)?;
    let last = last
        .int_in("last", 0, MAX_VALUE as i64)
        .map(i64::unsigned_abs)?;
    let expires = expires.int_in("expires", 0, i64::MAX)?.unsigned_abs();
    Ok((token.bytes(), last, expires))
}

fn dropped_arg(dropped: &Arg) -> Result<usize, Error> {
    Ok(usize::try_from(dropped.int_in("dropped", 0, i64::MAX)?).unwrap_or(usize::MAX))
}

fn entry<R: Request>(token: &[u8], last: u64, expires: u64, r: R) -> Result<Entry<R>, Error> {
    Entry::new(token, last, expires, r).ok_or_else(|| err("IDMP token must be 1..64 bytes"))
}

/// The recorded token of SEQ.IDMPSET, `token last expires fingerprint dropped` (the
/// fingerprint of a sequence key's request is its COUNT): the entry, and how many of the
/// oldest tokens to drop first.
pub(crate) fn seq_token_record(args: &[Arg]) -> Result<(Entry<u64>, usize), Error> {
    let [token, last, expires, fp, dropped] = args else {
        return Err(Error::WrongArity);
    };
    let (token, last, expires) = token_head(token, last, expires)?;
    let fp = fp
        .int()
        .ok_or_else(|| err("fingerprint must be an integer"))? as u64;
    let dropped = dropped_arg(dropped)?;
    Ok((entry(token, last, expires, fp)?, dropped))
}

/// A map's recorded token: the entry, how many of the oldest tokens to drop first, and the
/// field to set to its `last` (none for an AOF rewrite's record).
pub(crate) struct MapRecord<'a> {
    pub(crate) entry: Entry<FieldRequest>,
    pub(crate) dropped: usize,
    pub(crate) set: Option<&'a [u8]>,
}

/// The recorded token of SEQ.HIDMPSET, in either form: `token last expires dropped COUNT n
/// FIELD field [SET]` (the request itself), or the first form, `token last expires fingerprint
/// dropped [field]` (a fingerprint of the request, as builds before this one wrote it: the
/// token keeps it, [`FieldRequest::legacy`]). The entry, how many of the oldest tokens to drop
/// first, and the field to set to `last` (`SET`, or the first form's field).
pub(crate) fn map_token_record(args: &[Arg]) -> Result<MapRecord<'_>, Error> {
    match args {
        [token, last, expires, dropped, c, n, f, field, set @ ..]
            if c.is("COUNT") && f.is("FIELD") =>
        {
            let set = match set {
                [] => false,
                [s] if s.is("SET") => true,
                _ => return Err(SYNTAX),
            };
            let (token, last, expires) = token_head(token, last, expires)?;
            let dropped = dropped_arg(dropped)?;
            let count = n.int_in("COUNT", 1, MAX_BLOCK as i64)?.unsigned_abs();
            let field = field.bytes();
            check_name(field).map_err(|_| field_error())?;
            let e = entry(token, last, expires, FieldRequest::new(field, count))?;
            Ok(MapRecord {
                entry: e,
                dropped,
                set: set.then_some(field),
            })
        }
        [token, last, expires, fp, dropped, field @ ..] if field.len() <= 1 => {
            let (token, last, expires) = token_head(token, last, expires)?;
            let fp = fp
                .int()
                .ok_or_else(|| err("fingerprint must be an integer"))? as u64;
            let dropped = dropped_arg(dropped)?;
            let field = match field {
                [f] => {
                    check_name(f.bytes()).map_err(|_| field_error())?;
                    Some(f.bytes())
                }
                _ => None,
            };
            let e = entry(token, last, expires, FieldRequest::legacy(fp))?;
            Ok(MapRecord {
                entry: e,
                dropped,
                set: field,
            })
        }
        _ => Err(Error::WrongArity),
    }
}

/// The value an ADVANCE moves to: `value`, clamped to the current value of the sequence
/// `LIMIT seqkey` names when given (a missing key counts as 0, a key of another type is
/// WRONGTYPE). The LIMIT key is declared read-only in the key specs, so Cluster requires it in
/// the slot of the advanced key and ACL key patterns apply to it. Replay reads the same value
/// there (sequence values replicate exactly), so the call still replicates as called.
pub(crate) fn advance_target(ctx: &Ctx, value: &Arg, opts: &[Arg]) -> Result<u64, Error> {
    let value = value_arg(value)?;
    match opts {
        [] => Ok(value),
        [limit, seqkey] if limit.is("LIMIT") => {
            let cap = SeqKey::open_read(ctx, seqkey)?.get().map_or(0, Seq::value);
            Ok(value.min(cap))
        }
        _ => Err(SYNTAX),
    }
}

/// Answers Redis's keys position request for a command whose LIMIT key follows the keyword
/// LIMIT at argument `from` or later (as its key spec says; see `entry::registry::limit_key`).
pub(crate) fn limit_key_positions(ctx: &Ctx, args: &[Arg], from: usize) {
    ctx.key_at(1);
    let limit = args
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, a)| a.is("LIMIT"))
        .map(|(i, _)| i + 1);
    if let Some(i) = limit.filter(|&i| i < args.len()) {
        ctx.key_at(i);
    }
}
