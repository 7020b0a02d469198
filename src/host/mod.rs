//! The bottom floor: what imid calls in Redis. The context of a call and its arguments, replies,
//! replication, keyspace events, logging, server INFO (here); keys and module values (`key`,
//! `value`); sorted sets (`zset`); the RDB, AOF and digest handles of the data types' callbacks
//! (`io`); strings this module owns (`string`); cluster node IDs and bus messages (`cluster`);
//! what the server is and declared (`server`); the system clock (`clock`); the fence's blocked
//! clients and replica acknowledgements (`fence`); the AOF's files and imid's fsync (`aof`).
//!
//! It imports nothing of imid but the error type, and it is one of the two places with unsafe
//! code; the other is the top floor, `entry`, where every callback from Redis comes in (behind
//! one panic guard) and which hands these handles to the rest. Everything between the two
//! floors is safe Rust but one block: the CPU prefetch hint of `core/seqmap/arena.rs`. What
//! every `unsafe` block here relies on, and why not the crate's own wrappers: [`Ctx`].

pub(crate) mod aof;
pub(crate) mod clock;
pub(crate) mod cluster;
pub(crate) mod fence;
pub(crate) mod io;
pub(crate) mod key;
pub(crate) mod probe;
pub(crate) mod server;
pub(crate) mod string;
pub(crate) mod value;
pub(crate) mod zset;

use crate::error::{err, Error};
use redis_module::raw;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_long, c_longlong};

/// The context flags of a replay: a command from the primary, or one loaded from the AOF.
const REPLAY_FLAGS: c_int =
    (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) as c_int;

/// See [`Ctx::write_origin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteOrigin {
    Replay,
    Primary,
    ReplicaClient,
}

/// The context of the running call (a command, or a callback with a context).
///
/// Every `unsafe` block of this module relies on the same two facts, stated once:
/// - Redis fills every `RedisModule_*` function pointer before `RedisModule_OnLoad` runs (the
///   crate's init does it); each is still called through `Option` and a missing one fails soft.
/// - A `Ctx` and its [`Arg`]s exist only for the duration of one call from Redis (`entry` makes
///   them from the call's frame and lends them out), during which Redis keeps the context and
///   `argv` alive. A key handle borrows its `Ctx`, so it cannot outlive the call either.
///
/// Why not the crate's `Context`/`RedisString`/`RedisValue` path: it copies the argument vector
/// into a `Vec`, retains and releases every argument, and builds a `RedisValue` per reply; on
/// the hot commands that was a third to a half of the module's own instructions (callgrind,
/// server-bench/RESULTS.md). Here a call allocates nothing unless it fails.
pub(crate) struct Ctx {
    ptr: *mut raw::RedisModuleCtx,
}

/// One argument of the running command (the command name is argument 0).
#[repr(transparent)]
pub(crate) struct Arg {
    ptr: *mut raw::RedisModuleString,
}

impl Arg {
    /// The arguments Redis passed to the running command (`entry` makes them).
    ///
    /// # Safety
    /// `argv` must hold `argc` live strings for the duration of the call (or be null), and the
    /// slice must not outlive the call.
    #[inline(always)]
    pub(crate) unsafe fn from_raw<'a>(
        argv: *mut *mut raw::RedisModuleString,
        argc: c_int,
    ) -> &'a [Arg] {
        match usize::try_from(argc) {
            // SAFETY: the caller's contract; `Arg` is a transparent wrapper of the same pointer
            // type.
            Ok(n) if !argv.is_null() => unsafe {
                std::slice::from_raw_parts(argv.cast::<Arg>(), n)
            },
            _ => &[],
        }
    }

    /// The argument's bytes, borrowed from Redis for the call.
    pub(crate) fn bytes(&self) -> &[u8] {
        let mut len = 0usize;
        // SAFETY: see the module comment; StringPtrLen returns the string's buffer and length,
        // valid while the string lives (the whole call).
        unsafe {
            match raw::RedisModule_StringPtrLen {
                Some(f) => {
                    let p = f(self.ptr, &mut len);
                    if p.is_null() {
                        &[]
                    } else {
                        std::slice::from_raw_parts(p.cast::<u8>(), len)
                    }
                }
                None => &[],
            }
        }
    }

    /// The argument as a strict decimal integer (Redis's own rules, as INCRBY applies them).
    pub(crate) fn int(&self) -> Option<i64> {
        let mut v: c_longlong = 0;
        // SAFETY: see the module comment; StringToLongLong writes one long long.
        let rc = unsafe { raw::RedisModule_StringToLongLong.map(|f| f(self.ptr, &mut v)) };
        (rc == Some(raw::REDISMODULE_OK as c_int)).then_some(v)
    }

    /// An integer in `min..=max`; anything else is an `ERR` naming the argument and its range.
    pub(crate) fn int_in(&self, name: &str, min: i64, max: i64) -> Result<i64, Error> {
        match self.int() {
            Some(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(err(format_args!(
                "{name} must be an integer in {min}..{max}"
            ))),
        }
    }

    /// Whether the argument is `word`, ignoring ASCII case.
    pub(crate) fn is(&self, word: &str) -> bool {
        self.bytes().eq_ignore_ascii_case(word.as_bytes())
    }
}

/// A reply kept for later: what a client waiting for the replicas gets once they acknowledged
/// (`node::fence`), written by the blocked client's reply callback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    Int(i64),
    Bulk(Vec<u8>),
    Array(Vec<Reply>),
    Null,
}

/// A handler's reply, written now or kept for a client that waits (`node::fence::answer`).
/// Written now, it allocates nothing.
pub(crate) trait Answer {
    fn write(&self, ctx: &Ctx);
    fn keep(&self) -> Reply;
}

impl Answer for Reply {
    fn write(&self, ctx: &Ctx) {
        ctx.reply_kept(self);
    }
    fn keep(&self) -> Reply {
        self.clone()
    }
}

impl Answer for i64 {
    #[inline(always)]
    fn write(&self, ctx: &Ctx) {
        ctx.reply_int(*self);
    }
    fn keep(&self) -> Reply {
        Reply::Int(*self)
    }
}

impl Answer for [u8] {
    #[inline(always)]
    fn write(&self, ctx: &Ctx) {
        ctx.reply_bulk(self);
    }
    fn keep(&self) -> Reply {
        Reply::Bulk(self.to_vec())
    }
}

/// A reply element for [`Ctx::reply_fields`].
pub(crate) enum FieldValue<'a> {
    Int(i64),
    Bulk(&'a [u8]),
}

impl Ctx {
    /// The context Redis handed to the running call (`entry` makes it).
    ///
    /// # Safety
    /// `ptr` must be the live context of the running call, and the `Ctx` must not outlive it.
    pub(crate) unsafe fn from_raw(ptr: *mut raw::RedisModuleCtx) -> Ctx {
        Ctx { ptr }
    }

    /// The raw context, for `entry`'s guard (its log line) and registration calls.
    pub(crate) fn raw(&self) -> *mut raw::RedisModuleCtx {
        self.ptr
    }

    fn flags(&self) -> c_int {
        // SAFETY: see the module comment.
        unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(self.ptr)) }
    }

    /// The call replays a write this process did not choose: it comes from the primary or from
    /// the AOF at load. Such a call must reproduce the recorded effect, never apply local rules
    /// such as the gap.
    pub(crate) fn is_replay(&self) -> bool {
        self.flags() & REPLAY_FLAGS != 0
    }

    /// Who asked for this write: a replay ([`Ctx::is_replay`]), a client of a primary, or a
    /// client of a writable replica (`replica-read-only no`, whose writes stay local). One
    /// flags read for both questions.
    pub(crate) fn write_origin(&self) -> WriteOrigin {
        let f = self.flags();
        if f & REPLAY_FLAGS != 0 {
            WriteOrigin::Replay
        } else if f & raw::REDISMODULE_CTX_FLAGS_MASTER as c_int != 0 {
            WriteOrigin::Primary
        } else {
            WriteOrigin::ReplicaClient
        }
    }

    /// The server is loading (an RDB or AOF file, a full sync): nothing reaches a replica or
    /// the AOF.
    pub(crate) fn is_loading(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_LOADING as c_int != 0
    }

    /// The call comes from an atomic slot migration's import client (Valkey 9): the source's
    /// snapshot and stream of writes for the slots it moves here.
    pub(crate) fn is_slot_import(&self) -> bool {
        server::is_import_client(self.flags())
    }

    /// This node is a primary (it may write the time lease of its own).
    pub(crate) fn is_primary(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_MASTER as c_int != 0
    }

    /// A forked child is running (an RDB save, an AOF rewrite): background work that dirties
    /// memory waits, as Redis's own rehashing does, so the child's copy-on-write stays small.
    pub(crate) fn has_active_child(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_ACTIVE_CHILD as c_int != 0
    }

    /// The database this context's keys are opened in.
    pub(crate) fn selected_db(&self) -> i32 {
        // SAFETY: see the module comment.
        unsafe { raw::RedisModule_GetSelectedDb.map_or(0, |f| f(self.ptr)) }
    }

    /// Selects database `db` for the keys opened next; false when Redis refuses it (no such
    /// database).
    pub(crate) fn select_db(&self, db: i32) -> bool {
        // SAFETY: see the module comment.
        unsafe {
            raw::RedisModule_SelectDb
                .is_some_and(|f| f(self.ptr, db) == raw::REDISMODULE_OK as c_int)
        }
    }

    /// A server config's value as text (`CONFIG GET name`), `None` when it cannot be read.
    /// Needs a context with a client: never from a config's apply callback (Redis gives that
    /// one none, and `RedisModule_Call` dereferences it).
    fn config_get(&self, name: &CStr) -> Option<Vec<u8>> {
        // SAFETY: see the module comment; the format "cc" consumes two NUL-terminated C
        // strings; the reply and its element are read while the reply lives and it is freed
        // once, below.
        unsafe {
            let reply = raw::RedisModule_Call?(
                self.ptr,
                c"CONFIG".as_ptr(),
                c"cc".as_ptr(),
                c"GET".as_ptr(),
                name.as_ptr(),
            );
            if reply.is_null() {
                return None;
            }
            let value = raw::RedisModule_CallReplyArrayElement
                .map(|f| f(reply, 1))
                .filter(|e| !e.is_null())
                .and_then(|e| {
                    let mut len = 0usize;
                    let p = raw::RedisModule_CallReplyStringPtr.map(|f| f(e, &mut len))?;
                    (!p.is_null()).then(|| std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec())
                });
            if let Some(free) = raw::RedisModule_FreeCallReply {
                free(reply);
            }
            value
        }
    }

    /// Sets a server config (`CONFIG SET name value`); whether Redis accepted it. Needs a
    /// context with a client, as [`Ctx::config_get`]; not for the hot path.
    pub(crate) fn config_set(&self, name: &CStr, value: &CStr) -> bool {
        // SAFETY: see the module comment; the format "ccc" consumes three NUL-terminated C
        // strings; the reply is read while alive and freed once, below.
        unsafe {
            let Some(call) = raw::RedisModule_Call else {
                return false;
            };
            let reply = call(
                self.ptr,
                c"CONFIG".as_ptr(),
                c"ccc".as_ptr(),
                c"SET".as_ptr(),
                name.as_ptr(),
                value.as_ptr(),
            );
            if reply.is_null() {
                return false;
            }
            let ok = raw::RedisModule_CallReplyType
                .is_some_and(|f| f(reply) != raw::REDISMODULE_REPLY_ERROR as c_int);
            if let Some(free) = raw::RedisModule_FreeCallReply {
                free(reply);
            }
            ok
        }
    }

    /// A server config's value as text, `None` when it cannot be read or is not UTF-8
    /// ([`Ctx::config_get`]).
    pub(crate) fn config_string(&self, name: &CStr) -> Option<String> {
        String::from_utf8(self.config_get(name)?).ok()
    }

    /// A yes/no server config, `None` when it cannot be read ([`Ctx::config_get`]).
    pub(crate) fn config_yes(&self, name: &CStr) -> Option<bool> {
        self.config_get(name).map(|v| v == b"yes")
    }

    /// A numeric server config such as `min-replicas-to-write`, `None` when it cannot be read
    /// ([`Ctx::config_get`]); not for the hot path.
    pub(crate) fn config_u64(&self, name: &CStr) -> Option<u64> {
        std::str::from_utf8(&self.config_get(name)?)
            .ok()?
            .parse()
            .ok()
    }

    /// Writes are paused (`CLIENT PAUSE ... WRITE`, a failover's pause): Redis then aborts on
    /// anything propagated, so nothing may be replicated until the pause ends.
    pub(crate) fn writes_paused(&self) -> bool {
        // SAFETY: a plain query of server state, valid wherever a module runs.
        unsafe { raw::RedisModule_AvoidReplicaTraffic.is_some_and(|f| f() != 0) }
    }

    /// Whether Redis asks for the keys of this call instead of running it (a `getkeys-api`
    /// command: Redis 7.0's Cluster finds keys that way, not from the key specs).
    pub(crate) fn keys_position_request(&self) -> bool {
        // SAFETY: see the module comment.
        unsafe { raw::RedisModule_IsKeysPositionRequest.is_some_and(|f| f(self.ptr) != 0) }
    }

    /// Answers a keys position request: argument `pos` is a key.
    pub(crate) fn key_at(&self, pos: usize) {
        let Ok(pos) = c_int::try_from(pos) else {
            return;
        };
        // SAFETY: see the module comment.
        unsafe {
            if let Some(f) = raw::RedisModule_KeyAtPos {
                f(self.ptr, pos);
            }
        }
    }

    pub(crate) fn reply_int(&self, v: i64) {
        // SAFETY: see the module comment.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplyWithLongLong {
                f(self.ptr, v);
            }
        }
    }

    pub(crate) fn reply_bulk(&self, b: &[u8]) {
        // SAFETY: see the module comment; Redis copies the buffer.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                f(self.ptr, b.as_ptr().cast::<c_char>(), b.len());
            }
        }
    }

    pub(crate) fn reply_simple(&self, s: &CStr) {
        // SAFETY: see the module comment; s is NUL-terminated and copied.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplyWithSimpleString {
                f(self.ptr, s.as_ptr());
            }
        }
    }

    pub(crate) fn reply_ok(&self) {
        self.reply_simple(c"OK");
    }

    /// An array header; exactly `len` elements must follow.
    pub(crate) fn reply_array(&self, len: usize) {
        let len = c_long::try_from(len).unwrap_or(c_long::MAX);
        // SAFETY: see the module comment.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplyWithArray {
                f(self.ptr, len);
            }
        }
    }

    /// A map header of `len` pairs: a RESP3 map, or on RESP2 a flat array of twice the length
    /// (Redis turns the header into that); exactly `2 * len` elements must follow.
    pub(crate) fn reply_map(&self, len: usize) {
        let len = c_long::try_from(len).unwrap_or(c_long::MAX);
        // SAFETY: see the module comment.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplyWithMap {
                f(self.ptr, len);
            }
        }
    }

    /// Named fields in the documented order: a RESP3 map after `HELLO 3`, else a flat array of
    /// name/value pairs ([`Ctx::reply_map`]).
    pub(crate) fn reply_fields(&self, fields: &[(&str, FieldValue)]) {
        self.reply_map(fields.len());
        for (name, v) in fields {
            self.reply_bulk(name.as_bytes());
            match v {
                FieldValue::Int(i) => self.reply_int(*i),
                FieldValue::Bulk(b) => self.reply_bulk(b),
            }
        }
    }

    /// Writes a reply kept for later.
    pub(crate) fn reply_kept(&self, r: &Reply) {
        match r {
            Reply::Int(i) => self.reply_int(*i),
            Reply::Bulk(b) => self.reply_bulk(b),
            Reply::Array(items) => {
                self.reply_array(items.len());
                for i in items {
                    self.reply_kept(i);
                }
            }
            Reply::Null => self.reply_null(),
        }
    }

    pub(crate) fn reply_error(&self, e: &Error) {
        let owned;
        let text: &CStr = match e {
            Error::WrongArity => {
                // SAFETY: see the module comment.
                unsafe {
                    if let Some(f) = raw::RedisModule_WrongArity {
                        f(self.ptr);
                    }
                }
                return;
            }
            Error::Static(s) => s,
            Error::Text(s) => {
                // An error text never holds a NUL; if one did, the reply still starts with ERR.
                owned = CString::new(s.replace('\0', " ")).unwrap_or_default();
                &owned
            }
        };
        // SAFETY: see the module comment; the text is NUL-terminated and copied.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplyWithError {
                f(self.ptr, text.as_ptr());
            }
        }
    }

    /// Replicates the command as called (to replicas and the AOF): only for calls whose replay
    /// reproduces their effect exactly.
    pub(crate) fn replicate_verbatim(&self) {
        // SAFETY: see the module comment.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplicateVerbatim {
                f(self.ptr);
            }
        }
    }

    /// Replicates `cmd key value` (format "sl": Redis takes a reference to the key argument and
    /// formats the integer itself).
    pub(crate) fn replicate_key_int(&self, cmd: &CStr, key: &Arg, value: i64) {
        // SAFETY: see the module comment; "sl" consumes exactly one RedisModuleString* and one
        // long long, both passed. Replicate fails only for an unknown command name, and every
        // name passed here is one of ours.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(self.ptr, cmd.as_ptr(), c"sl".as_ptr(), key.ptr, value);
            }
        }
    }

    /// Replicates `cmd key token last expires fingerprint dropped` (format "ssllll"): the
    /// explicit effect of `SEQ.NEXT ... IDMP` (`commands::seq::idmpset`).
    pub(crate) fn replicate_token(
        &self,
        cmd: &CStr,
        key: &Arg,
        token: &Arg,
        [last, expires, fingerprint, drop]: [i64; 4],
    ) {
        // SAFETY: as in replicate_key_int; "ssllll" consumes two RedisModuleString* and four
        // long longs, all passed in that order.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(
                    self.ptr,
                    cmd.as_ptr(),
                    c"ssllll".as_ptr(),
                    key.ptr,
                    token.ptr,
                    last,
                    expires,
                    fingerprint,
                    drop,
                );
            }
        }
    }

    /// Replicates `cmd key token last expires dropped COUNT count FIELD field SET` (format
    /// "sslllclcsc"): the explicit effect of `SEQ.HNEXT ... IDMP`
    /// (`commands::seqmap::hidmpset`).
    pub(crate) fn replicate_field_token(
        &self,
        cmd: &CStr,
        key: &Arg,
        token: &Arg,
        [last, expires, drop]: [i64; 3],
        count: i64,
        field: &Arg,
    ) {
        // SAFETY: as in replicate_key_int; "sslllclcsc" consumes two RedisModuleString*, three
        // long longs, a NUL-terminated C string, a long long, a C string, a
        // RedisModuleString* and a C string, all passed in that order.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(
                    self.ptr,
                    cmd.as_ptr(),
                    c"sslllclcsc".as_ptr(),
                    key.ptr,
                    token.ptr,
                    last,
                    expires,
                    drop,
                    c"COUNT".as_ptr(),
                    count,
                    c"FIELD".as_ptr(),
                    field.ptr,
                    c"SET".as_ptr(),
                );
            }
        }
    }

    /// Replicates `cmd key arg value` (format "ssl"), e.g. `SEQ.HSET key field 42`.
    pub(crate) fn replicate_key_arg_int(&self, cmd: &CStr, key: &Arg, arg: &Arg, value: i64) {
        // SAFETY: as in replicate_key_int; "ssl" consumes two RedisModuleString* and one long
        // long, all passed.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(
                    self.ptr,
                    cmd.as_ptr(),
                    c"ssl".as_ptr(),
                    key.ptr,
                    arg.ptr,
                    value,
                );
            }
        }
    }

    /// Replicates `cmd arg` with one of the call's arguments as it came (format "s").
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    pub(crate) fn replicate_arg(&self, cmd: &CStr, arg: &Arg) {
        // SAFETY: as in replicate_key_int; "s" consumes one RedisModuleString*.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(self.ptr, cmd.as_ptr(), c"s".as_ptr(), arg.ptr);
            }
        }
    }

    /// Replicates `cmd a b c` (format "lll").
    pub(crate) fn replicate_ints(&self, cmd: &CStr, [a, b, c]: &[i64; 3]) {
        // SAFETY: as in replicate_key_int; "lll" consumes three long longs, all passed.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(self.ptr, cmd.as_ptr(), c"lll".as_ptr(), *a, *b, *c);
            }
        }
    }

    /// Replicates `cmd value` (format "l").
    pub(crate) fn replicate_int(&self, cmd: &CStr, value: i64) {
        // SAFETY: as in replicate_key_int; "l" consumes one long long.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(self.ptr, cmd.as_ptr(), c"l".as_ptr(), value);
            }
        }
    }

    /// What every command calls after it changed `key`, and only then: the key is signalled
    /// modified (a client's WATCH on it fails, client-side caches drop it; the module sets
    /// `NO_IMPLICIT_SIGNAL_MODIFIED`, see `server::set_module_options`, so closing a key
    /// opened for writing signals nothing), and the keyspace event `event` of class `d` (module
    /// types; `notify-keyspace-events` must include it) is published.
    pub(crate) fn changed(&self, event: &CStr, key: &Arg) {
        // SAFETY: see the module comment; Redis copies what it keeps.
        unsafe {
            if let Some(f) = raw::RedisModule_SignalModifiedKey {
                f(self.ptr, key.ptr);
            }
            if let Some(f) = raw::RedisModule_NotifyKeyspaceEvent {
                f(
                    self.ptr,
                    raw::REDISMODULE_NOTIFY_MODULE as c_int,
                    event.as_ptr(),
                    key.ptr,
                );
            }
        }
    }

    /// After [`Ctx::changed`], for a write that deleted `key` (a map's last field removed):
    /// the keyspace event `del` of class `g`, as Redis publishes after HDEL empties a hash.
    pub(crate) fn deleted(&self, key: &Arg) {
        // SAFETY: see the module comment; Redis copies what it keeps.
        unsafe {
            if let Some(f) = raw::RedisModule_NotifyKeyspaceEvent {
                f(
                    self.ptr,
                    raw::REDISMODULE_NOTIFY_GENERIC as c_int,
                    c"del".as_ptr(),
                    key.ptr,
                );
            }
        }
    }

    pub(crate) fn log_warning(&self, msg: &str) {
        log(self.ptr, c"warning", msg);
    }

    pub(crate) fn log_notice(&self, msg: &str) {
        log(self.ptr, c"notice", msg);
    }

    /// Runs `cmd arg` (e.g. `CLUSTER NODES`) through `RedisModule_Call` and returns its reply
    /// when it is a string; `None` for an error or any other reply. Not for the hot path.
    pub(crate) fn call_text(&self, cmd: &CStr, arg: &CStr) -> Option<Vec<u8>> {
        // SAFETY: see the module comment; the format "c" consumes exactly one NUL-terminated C
        // string; the reply is read while alive and freed once, below.
        unsafe {
            let reply = raw::RedisModule_Call?(self.ptr, cmd.as_ptr(), c"c".as_ptr(), arg.as_ptr());
            if reply.is_null() {
                return None;
            }
            let mut len = 0usize;
            let p = raw::RedisModule_CallReplyStringPtr.map(|f| f(reply, &mut len));
            let text = match p {
                Some(p) if !p.is_null() => {
                    Some(std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec())
                }
                _ => None,
            };
            if let Some(free) = raw::RedisModule_FreeCallReply {
                free(reply);
            }
            text
        }
    }
}

/// Whether the server is loading data (an RDB or AOF at startup, a full sync, DEBUG RELOAD),
/// read without a context like [`aof_on`].
pub(crate) fn server_loading() -> bool {
    // SAFETY: see the module comment; a NULL context is documented as allowed.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(std::ptr::null_mut())) };
    flags & raw::REDISMODULE_CTX_FLAGS_LOADING as c_int != 0
}

/// Whether the AOF is on (`appendonly yes`; also while its first rewrite is being written).
///
/// Read without a context, since the INFO callback has none: `RedisModule_GetContextFlags`
/// accepts NULL and then leaves out only the client flags (Lua, MULTI, replicated, dirty).
pub(crate) fn aof_on() -> bool {
    // SAFETY: see the module comment; a NULL context is documented as allowed.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(std::ptr::null_mut())) };
    flags & raw::REDISMODULE_CTX_FLAGS_AOF as c_int != 0
}

/// A log line at `level` ("warning", "notice", "verbose", "debug"), prefixed by Redis with the
/// module name.
pub(crate) fn log(ctx: *mut raw::RedisModuleCtx, level: &CStr, msg: &str) {
    let Ok(msg) = CString::new(msg.replace('\0', " ")) else {
        return;
    };
    // SAFETY: see the module comment; "%s" consumes exactly the one NUL-terminated string passed.
    unsafe {
        if let Some(f) = raw::RedisModule_Log {
            f(ctx, level.as_ptr(), c"%s".as_ptr(), msg.as_ptr());
        }
    }
}
