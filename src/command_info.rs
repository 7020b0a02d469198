//! Arity, summary, version and key specs for each command, so `COMMAND INFO` / `COMMAND DOCS`
//! tell the truth. `RedisModule_CreateCommand` (used by the registration table) records only
//! flags and a legacy (first, last, step) key range, and reports arity -1 and read-write key
//! flags; `RedisModule_SetCommandInfo` (Redis 7.0+) adds the rest. Key-spec flags matter beyond
//! documentation: ACL key selectors (`%R~`, `%W~`) judge commands by them.

use redis_module::{raw, Context, Status};
use std::ffi::CString;

/// Where a command's keys are: from argument `first` to `last` (negative: from the end).
struct Keys {
    first: i32,
    last: i32,
    flags: u32,
}

const RO_ACCESS: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
const RW_ACCESS_UPDATE: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE;
const OW_UPDATE: u32 = raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE;
/// MSGID.GEN's target: declared so that cluster clients route it and cluster nodes enforce that
/// routing (MOVED), which per-slot uniqueness relies on; it is neither read nor written. Not
/// NOT_KEY: Redis Cluster ignores NOT_KEY keys when it checks where a command belongs.
const ROUTING_ONLY: u32 = raw::REDISMODULE_CMD_KEY_RO;

/// (name, arity, summary, keys). Negative arity means "at least |arity|" as in Redis.
const COMMANDS: &[(&str, i32, &str, Option<Keys>)] = &[
    (
        "MSGID.GEN",
        3,
        "Issues a new time-ordered message ID for a conversation",
        Some(Keys {
            first: 2,
            last: 0,
            flags: ROUTING_ONLY,
        }),
    ),
    (
        "MSGID.ENCODE",
        5,
        "Builds a message ID from explicit fields",
        None,
    ),
    (
        "MSGID.DECODE",
        2,
        "Splits a message ID into its fields",
        None,
    ),
    (
        "MSGID.HASH",
        2,
        "The 22-bit target hash MSGID.GEN would embed",
        None,
    ),
    (
        "MSGID.FLOOR",
        2,
        "Raises the message-ID time floor (replication and AOF of the time lease)",
        None,
    ),
    (
        "OPENID.ENC",
        4,
        "Makes the public ID of a message (plain or keyed)",
        None,
    ),
    (
        "OPENID.DEC",
        2,
        "Verifies a public message ID and splits it into its fields",
        None,
    ),
    (
        "SEQ.NEXT",
        -2,
        "Reserves the next value (or a block of COUNT values) of a sequence",
        Some(Keys {
            first: 1,
            last: 0,
            flags: RW_ACCESS_UPDATE,
        }),
    ),
    (
        "SEQ.GET",
        2,
        "The current value of a sequence (0 when missing)",
        Some(Keys {
            first: 1,
            last: 0,
            flags: RO_ACCESS,
        }),
    ),
    (
        "SEQ.MGET",
        -2,
        "The current values of several sequences (0 when missing)",
        Some(Keys {
            first: 1,
            last: -1,
            flags: RO_ACCESS,
        }),
    ),
    (
        "SEQ.SET",
        3,
        "Sets a sequence to an exact value",
        Some(Keys {
            first: 1,
            last: 0,
            flags: OW_UPDATE,
        }),
    ),
    (
        "SEQ.ADVANCE",
        3,
        "Raises a sequence to at least a value (a read cursor)",
        Some(Keys {
            first: 1,
            last: 0,
            flags: RW_ACCESS_UPDATE,
        }),
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
    for (name, arity, summary, keys) in COMMANDS {
        let (Ok(cname), Ok(csummary)) = (CString::new(*name), CString::new(*summary)) else {
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
        info.arity = *arity;
        // One key spec plus the zeroed terminator Redis expects at the end of the array.
        // SAFETY: zeroed is a valid (terminating) key spec; the array outlives the call.
        let mut specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
        if let Some(k) = keys {
            specs[0].flags = u64::from(k.flags);
            specs[0].begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            specs[0].bs.index.pos = k.first;
            specs[0].find_keys_type =
                raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            specs[0].fk.range.lastkey = k.last;
            specs[0].fk.range.keystep = 1;
            specs[0].fk.range.limit = 0;
            info.key_specs = specs.as_mut_ptr();
        }
        // SAFETY: cmd came from RedisModule_GetCommand for a command of this module.
        let rc = unsafe { raw::RedisModule_SetCommandInfo.map(|f| f(cmd, &info)) };
        if rc != Some(raw::REDISMODULE_OK as i32) {
            ctx.log_warning(&format!("imid: could not set command info for {name}"));
            return Status::Err;
        }
    }
    Status::Ok
}
