//! OPENID.ENC / OPENID.DEC: public message IDs, plain or keyed per `imid.openid-keys`.

use super::msgid::parse_msgid;
use super::{err, int_arg, reply_bulk, reply_fields, Val};
use crate::config::OPENID_KEYS;
use crate::core::openid::OpenId;
use crate::stats::Counter;
use redis_module::{Context, RedisError, RedisResult, RedisString};

pub static ENCODED: Counter = Counter::new();
pub static DECODED: Counter = Counter::new();
pub static REJECTED: Counter = Counter::new();

/// The `INFO imid` fields of this family.
pub fn info_fields() -> [(&'static str, u64); 3] {
    [
        ("openid_encoded", ENCODED.get()),
        ("openid_decoded", DECODED.get()),
        ("openid_rejected", REJECTED.get()),
    ]
}

/// OPENID.ENC msgid msg_type direction
pub fn enc(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, msgid, msg_type, direction] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let msgid = parse_msgid(msgid)?;
    // One byte each; anything outside 0..255 is an error (the reference silently took the low
    // byte, so 257 became 1).
    let msg_type = byte_arg(msg_type, "msg_type")?;
    let direction = byte_arg(direction, "direction")?;
    let id = OpenId {
        msgid,
        msg_type,
        direction,
    };
    let text = OPENID_KEYS.with(|ring| ring.encode(&id));
    ENCODED.add(1);
    reply_bulk(ctx, &text)
}

fn byte_arg(arg: &RedisString, name: &str) -> Result<u8, RedisError> {
    let v = int_arg(arg, name, 0, 255)?;
    u8::try_from(v).map_err(|_| err(format_args!("{name} must be an integer in 0..255")))
}

/// OPENID.DEC openid
pub fn dec(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, text] = args.as_slice() else {
        return Err(RedisError::WrongArity);
    };
    let id = match OPENID_KEYS.with(|ring| ring.decode(text.as_slice())) {
        Ok(id) => id,
        Err(e) => {
            REJECTED.add(1);
            return Err(err(e));
        }
    };
    DECODED.add(1);
    let msgid = id.msgid.to_text();
    let time = i64::try_from(id.msgid.fields().time).unwrap_or(i64::MAX);
    reply_fields(
        ctx,
        &[
            ("msgid", Val::Bulk(&msgid)),
            ("msg_type", Val::Int(i64::from(id.msg_type))),
            ("direction", Val::Int(i64::from(id.direction))),
            ("time", Val::Int(time)),
        ],
    )
}
