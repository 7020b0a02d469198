//! OPENID.ENC / OPENID.DEC: public message IDs, plain or keyed per `imid.openid-keys`.

use crate::args::msgid_arg;
use crate::config::OPENID_KEYS;
use crate::core::openid::OpenId;
use crate::core::to_i64;
use crate::error::{err, Error};
use crate::host::{Arg, Ctx, FieldValue};
use crate::node::{OPENID_DECODED, OPENID_ENCODED, OPENID_REJECTED};

/// The `INFO imid` fields of this family, in order.
pub(crate) fn info_fields() -> [(&'static str, u64); 3] {
    [
        ("openid_encoded", OPENID_ENCODED.get()),
        ("openid_decoded", OPENID_DECODED.get()),
        ("openid_rejected", OPENID_REJECTED.get()),
    ]
}

/// One byte; anything outside 0..255 is an error (the reference silently took the low byte,
/// so 257 became 1).
fn byte_arg(arg: &Arg, name: &str) -> Result<u8, Error> {
    let v = arg.int_in(name, 0, 255)?;
    u8::try_from(v).map_err(|_| err(format_args!("{name} must be an integer in 0..255")))
}

/// OPENID.ENC msgid msg_type direction
pub(crate) fn enc(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, msgid, msg_type, direction] = args else {
        return Err(Error::WrongArity);
    };
    let id = OpenId {
        msgid: msgid_arg(msgid)?,
        msg_type: byte_arg(msg_type, "msg_type")?,
        direction: byte_arg(direction, "direction")?,
    };
    let text = OPENID_KEYS.with(|keys| keys.ring.encode(&id));
    OPENID_ENCODED.add(1);
    ctx.reply_bulk(&text);
    Ok(())
}

/// OPENID.DEC openid
pub(crate) fn dec(ctx: &Ctx, args: &[Arg]) -> Result<(), Error> {
    let [_, text] = args else {
        return Err(Error::WrongArity);
    };
    let id = match OPENID_KEYS.with(|keys| keys.ring.decode(text.bytes())) {
        Ok(id) => id,
        Err(e) => {
            OPENID_REJECTED.add(1);
            return Err(err(e));
        }
    };
    OPENID_DECODED.add(1);
    let msgid = id.msgid.to_text();
    ctx.reply_fields(&[
        ("msgid", FieldValue::Bulk(&msgid)),
        ("msg_type", FieldValue::Int(i64::from(id.msg_type))),
        ("direction", FieldValue::Int(i64::from(id.direction))),
        ("time", FieldValue::Int(to_i64(id.msgid.fields().time))),
    ]);
    Ok(())
}
