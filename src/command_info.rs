//! Arity, summary and version for each command, so `COMMAND INFO` / `COMMAND DOCS` tell the
//! truth. `RedisModule_CreateCommand` (used by the registration table) records only flags and
//! key positions and reports arity -1; `RedisModule_SetCommandInfo` (Redis 7.0+) adds the rest.
//! Key positions stay the legacy (first, last, step) triple from the table.

use redis_module::{raw, Context, Status};
use std::ffi::CString;

/// (name, arity, summary). Negative arity means "at least |arity|" as in Redis.
const COMMANDS: &[(&str, i32, &str)] = &[
    (
        "MSGID.GEN",
        3,
        "Issues a new time-ordered message ID for a conversation",
    ),
    (
        "MSGID.ENCODE",
        5,
        "Builds a message ID from explicit fields",
    ),
    ("MSGID.DECODE", 2, "Splits a message ID into its fields"),
    (
        "MSGID.HASH",
        2,
        "The 22-bit target hash MSGID.GEN would embed",
    ),
    (
        "MSGID.FLOOR",
        2,
        "Raises the message-ID time floor (replication and AOF of the time lease)",
    ),
    (
        "OPENID.ENC",
        4,
        "Makes the public ID of a message (plain or keyed)",
    ),
    (
        "OPENID.DEC",
        2,
        "Verifies a public message ID and splits it into its fields",
    ),
    (
        "SEQ.NEXT",
        -2,
        "Reserves the next value (or a block of COUNT values) of a sequence",
    ),
    (
        "SEQ.GET",
        2,
        "The current value of a sequence (0 when missing)",
    ),
    (
        "SEQ.MGET",
        -2,
        "The current values of several sequences (0 when missing)",
    ),
    ("SEQ.SET", 3, "Sets a sequence to an exact value"),
    (
        "SEQ.ADVANCE",
        3,
        "Raises a sequence to at least a value (a read cursor)",
    ),
];

const INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

pub fn register(ctx: &Context) -> Status {
    let since = c"0.1.0";
    for &(name, arity, summary) in COMMANDS {
        let (Ok(cname), Ok(csummary)) = (CString::new(name), CString::new(summary)) else {
            return Status::Err;
        };
        // SAFETY: ctx.ctx is the live module context of OnLoad; the name is NUL-terminated.
        let cmd = unsafe { raw::RedisModule_GetCommand.map(|f| f(ctx.ctx, cname.as_ptr())) };
        let Some(cmd) = cmd.filter(|c| !c.is_null()) else {
            ctx.log_warning(&format!("imid: command {name} not registered"));
            return Status::Err;
        };
        // SAFETY: zeroed is the documented "unset" value for every optional field of the
        // struct (null pointers, zero counts); the strings outlive the call, which copies them.
        let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
        info.version = &INFO_VERSION;
        info.summary = csummary.as_ptr();
        info.since = since.as_ptr();
        info.arity = arity;
        // SAFETY: cmd came from RedisModule_GetCommand for a command of this module.
        let rc = unsafe { raw::RedisModule_SetCommandInfo.map(|f| f(cmd, &info)) };
        if rc != Some(raw::REDISMODULE_OK as i32) {
            ctx.log_warning(&format!("imid: could not set command info for {name}"));
            return Status::Err;
        }
    }
    Status::Ok
}
