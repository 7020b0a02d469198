//! The one unsafe layer between Redis and the rest of imid: every raw call into Redis and every
//! callback from it lives under `glue/`, and every callback enters through [`guard`].
//!
//! - here: commands ([`call`]: arguments as byte slices straight from `argv`, replies straight
//!   through `RedisModule_ReplyWith*`), replication, keyspace events, the raw key API, server
//!   INFO, logging, and the one panic guard;
//! - `registry`: command registration (CreateCommand, SetCommandInfo, ACL categories);
//! - `config`: the string config callbacks and the Redis strings they hand out;
//! - `types`: the data type's callbacks (RDB, AOF, digest, memory, copy, aux data);
//! - `seq_value`: a sequence key's value word, inline or a pointer to a boxed state;
//! - `cluster`: the cluster bus receiver, the lease timer and the command filter;
//! - `events`: server event subscription and callbacks.
//!
//! Everything above it is safe Rust: the callbacks decode their raw arguments and call safe
//! functions (`seq_type`, `events`, `node::cluster`, `config`), which hold the rules.
//!
//! Why not the crate's `Context`/`RedisString`/`RedisValue` path: it copies the argument vector
//! into a `Vec`, retains and releases every argument, and builds a `RedisValue` per reply; on
//! the hot commands that was a third to a half of the module's own instructions (callgrind,
//! server-bench/RESULTS.md). Here a call allocates nothing unless it fails.
//!
//! Every `unsafe` block below relies on the same two facts, stated once:
//! - Redis fills every `RedisModule_*` function pointer before `RedisModule_OnLoad` runs (the
//!   crate's init does it); each is still called through `Option` and a missing one fails soft.
//! - A [`Ctx`] and its [`Arg`]s exist only for the duration of one call from Redis (they borrow
//!   from the call frame in [`call`] or a callback), during which Redis keeps the context and
//!   `argv` alive. A [`Key`] borrows its `Ctx`, so it cannot outlive the call either.

pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod data_type;
pub(crate) mod events;
pub(crate) mod map_type;
pub(crate) mod migration;
pub(crate) mod registry;
pub(crate) mod seq_value;
pub(crate) mod types;

use crate::error::{err, Error, INTERNAL, WRONGTYPE};
use redis_module::raw;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_long, c_longlong};
use std::panic::{catch_unwind, AssertUnwindSafe};

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

/// The context of the running command.
pub(crate) struct Ctx {
    ptr: *mut raw::RedisModuleCtx,
}

/// One argument of the running command (the command name is argument 0).
#[repr(transparent)]
pub(crate) struct Arg {
    ptr: *mut raw::RedisModuleString,
}

/// What Redis called, for the log line of a caught panic (formatted only then).
#[derive(Clone, Copy)]
pub(crate) enum Entry<'a> {
    /// A command, named by its argument 0.
    Command(&'a [Arg]),
    /// Any other callback, by a fixed name ("the lease timer", ...).
    Named(&'static str),
    /// A data type's callback, and the type's label (see `data_type::DataType::LABEL`):
    /// `rdb_load`, `rdb_load (sequence map)`.
    TypeCallback(&'static str, &'static str),
}

impl fmt::Display for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Command(args) => match args.first() {
                Some(a) => f.write_str(&String::from_utf8_lossy(a.bytes())),
                None => f.write_str("a command"),
            },
            Entry::Named(name) => f.write_str(name),
            Entry::TypeCallback(name, "") => f.write_str(name),
            Entry::TypeCallback(name, label) => write!(f, "{name} ({label})"),
        }
    }
}

/// The one guard every entry from Redis goes through: commands, server events, the timer, the
/// cluster bus receiver, the command filter, config getters and setters, and the data type's
/// callbacks. A panic must not unwind into Redis (that aborts the server and loses the dataset
/// in memory): it is caught, logged as `imid: internal error in <entry>: <message>` (through
/// `ctx`, or without a context when the callback has none), and the entry returns `fallback()`,
/// its own safe answer (an error reply, null, `REDISMODULE_ERR`, nothing).
///
/// Costs nothing beyond the `catch_unwind` landing pad when nothing panics: the entry is
/// formatted and the fallback made only after a panic.
#[inline]
pub(crate) fn guard<T>(
    ctx: *mut raw::RedisModuleCtx,
    entry: Entry,
    fallback: impl FnOnce() -> T,
    f: impl FnOnce() -> T,
) -> T {
    let run = || {
        #[cfg(feature = "test-hooks")]
        crate::test_hooks::maybe_panic(entry);
        f()
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(v) => v,
        Err(payload) => {
            let msg = panic_text(payload.as_ref());
            log(
                ctx,
                c"warning",
                &format!("imid: internal error in {entry}: {msg}"),
            );
            fallback()
        }
    }
}

/// From Redis into a handler: the argument slice, the guard, the error reply. A handler parses,
/// computes, then replies through the context as its last step (so that a panic, caught here,
/// never leaves a half-written reply behind).
///
/// A panic becomes `ERR internal error` plus a log line naming the command.
///
/// Inlined into each command's C entry point with its handler, so that the handler is a direct
/// call the compiler can inline too: one call frame per command instead of three (measured on
/// UID.GEN's single-ID path).
#[inline(always)]
pub(crate) fn call(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: impl FnOnce(&Ctx, &[Arg]) -> Result<(), Error>,
) -> c_int {
    let c = Ctx { ptr: ctx };
    let args: &[Arg] = match usize::try_from(argc) {
        Ok(n) if !argv.is_null() => {
            // SAFETY: Redis passes `argc` live strings in `argv` for the duration of the call;
            // `Arg` is a transparent wrapper of the same pointer type.
            unsafe { std::slice::from_raw_parts(argv.cast::<Arg>(), n) }
        }
        _ => &[],
    };
    if let Err(e) = guard(
        ctx,
        Entry::Command(args),
        || Err(INTERNAL),
        || handler(&c, args),
    ) {
        c.reply_error(&e);
    }
    raw::REDISMODULE_OK as c_int
}

/// The message of a caught panic.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}

impl Arg {
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

/// A reply element for [`Ctx::reply_fields`].
pub(crate) enum Val<'a> {
    Int(i64),
    Bulk(&'a [u8]),
}

impl Ctx {
    /// A context Redis handed to a callback other than a command (server events).
    ///
    /// # Safety
    /// `ptr` must be the live context of the running callback, and the `Ctx` must not outlive it.
    pub(super) unsafe fn from_raw(ptr: *mut raw::RedisModuleCtx) -> Ctx {
        Ctx { ptr }
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
        migration::is_import_client(self.flags())
    }

    /// This node is a primary (it may write the time lease of its own).
    pub(crate) fn is_primary(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_MASTER as c_int != 0
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
    /// name/value pairs (Redis turns the map header into an array of twice the length on RESP2).
    pub(crate) fn reply_fields(&self, fields: &[(&str, Val)]) {
        let len = c_long::try_from(fields.len()).unwrap_or(c_long::MAX);
        // SAFETY: see the module comment.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplyWithMap {
                f(self.ptr, len);
            }
        }
        for (name, v) in fields {
            self.reply_bulk(name.as_bytes());
            match v {
                Val::Int(i) => self.reply_int(*i),
                Val::Bulk(b) => self.reply_bulk(b),
            }
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
            Error::Owned(s) => {
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

    /// Replicates `cmd key token last expires fingerprint dropped [field]` (format "ssllll", or
    /// "sslllls" with the field): the explicit effect of an IDMP call (`commands::seq::idmpset`,
    /// `commands::seqmap::hidmpset`).
    pub(crate) fn replicate_token(
        &self,
        cmd: &CStr,
        key: &Arg,
        token: &Arg,
        [last, expires, fingerprint, drop]: [i64; 4],
        field: Option<&Arg>,
    ) {
        // SAFETY: as in replicate_key_int; "ssllll" consumes two RedisModuleString* and four
        // long longs, "sslllls" one RedisModuleString* more, all passed in that order.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                let (k, t) = (key.ptr, token.ptr);
                match field {
                    None => f(
                        self.ptr,
                        cmd.as_ptr(),
                        c"ssllll".as_ptr(),
                        k,
                        t,
                        last,
                        expires,
                        fingerprint,
                        drop,
                    ),
                    Some(a) => f(
                        self.ptr,
                        cmd.as_ptr(),
                        c"sslllls".as_ptr(),
                        k,
                        t,
                        last,
                        expires,
                        fingerprint,
                        drop,
                        a.ptr,
                    ),
                };
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
    /// `NO_IMPLICIT_SIGNAL_MODIFIED`, see `glue::types::set_module_options`, so closing a key
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

    pub(crate) fn log_warning(&self, msg: &str) {
        log(self.ptr, c"warning", msg);
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

    /// In cluster mode, on a replica: its primary's node ID (`None` on a primary, or when the
    /// server does not say).
    pub(crate) fn cluster_primary(&self) -> Option<[u8; 40]> {
        let me = my_cluster_id()?;
        // The server looks the node up with strlen: a NUL-terminated copy of the ID.
        let mut id = [0u8; 41];
        if let Some(head) = id.get_mut(..40) {
            head.copy_from_slice(&me);
        }
        let mut master = [0u8; 41];
        let mut flags: c_int = 0;
        // SAFETY: see the module comment; `id` is NUL-terminated; master_id receives at most
        // REDISMODULE_NODE_ID_LEN (40) bytes into a 41-byte buffer; ip and port may be null.
        let rc = unsafe {
            raw::RedisModule_GetClusterNodeInfo.map(|f| {
                f(
                    self.ptr,
                    id.as_ptr().cast::<c_char>(),
                    std::ptr::null_mut(),
                    master.as_mut_ptr().cast::<c_char>(),
                    std::ptr::null_mut(),
                    &mut flags,
                )
            })
        };
        if rc != Some(raw::REDISMODULE_OK as c_int)
            || flags & raw::REDISMODULE_NODE_MASTER as c_int != 0
        {
            return None;
        }
        let id = master
            .get(..40)
            .and_then(|b| <[u8; 40]>::try_from(b).ok())?;
        (id != [0u8; 40]).then_some(id)
    }

    /// Opens a key for reading (`write` false) or writing; closed on drop, and tied to this
    /// call: the handle borrows the context, so it cannot be kept past the call.
    pub(crate) fn open_key<'a>(&'a self, name: &Arg, write: bool) -> Result<Key<'a>, Error> {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // SAFETY: see the module comment. A null result (read mode, missing key) is handled by
        // every method of Key.
        let key = unsafe { raw::RedisModule_OpenKey.map(|f| f(self.ptr, name.ptr, mode as c_int)) };
        key.map(|ptr| Key {
            ptr,
            _call: PhantomData,
        })
        .ok_or(Error::Static(c"ERR internal error: key API unavailable"))
    }
}

/// Whether the server is loading data (an RDB or AOF at startup, a full sync, DEBUG RELOAD),
/// read without a context like [`aof_on`].
pub(crate) fn server_loading() -> bool {
    // SAFETY: see the module comment; a NULL context is documented as allowed.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(std::ptr::null_mut())) };
    flags & raw::REDISMODULE_CTX_FLAGS_LOADING as c_int != 0
}

/// This node's cluster ID (40 bytes), or `None` outside cluster mode. Needs no context, so the
/// command filter can compare a `SETSLOT ... NODE <id>` with it.
pub(crate) fn my_cluster_id() -> Option<[u8; 40]> {
    // SAFETY: see the module comment; the server returns a pointer to its own 40-byte ID (not
    // NUL-terminated), valid while the server runs, or NULL outside cluster mode.
    unsafe {
        let p = raw::RedisModule_GetMyClusterID?();
        if p.is_null() {
            return None;
        }
        let b = std::slice::from_raw_parts(p.cast::<u8>(), 40);
        <[u8; 40]>::try_from(b).ok()
    }
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

/// One section of the server's own INFO, as `RedisModule_GetServerInfo` parses it; freed on
/// drop. For event callbacks (a fork, a child's exit), never for the hot path: Redis formats
/// the whole section to build it.
pub(crate) struct ServerInfo {
    ptr: *mut raw::RedisModuleServerInfoData,
}

impl ServerInfo {
    /// The section `section` (e.g. `persistence`), or `None` when the API is missing.
    pub(crate) fn read(section: &CStr) -> Option<ServerInfo> {
        // SAFETY: see the module comment. Without a context the data is not tied to automatic
        // memory management; Drop frees it.
        let ptr = unsafe {
            raw::RedisModule_GetServerInfo.map(|f| f(std::ptr::null_mut(), section.as_ptr()))
        }?;
        (!ptr.is_null()).then_some(ServerInfo { ptr })
    }

    /// An integer field, `None` when it is missing or not an integer.
    pub(crate) fn int(&self, field: &CStr) -> Option<i64> {
        let mut rc: c_int = 0;
        // SAFETY: see the module comment; the data lives until drop, the field name is
        // NUL-terminated, and `rc` receives the status.
        let v = unsafe {
            raw::RedisModule_ServerInfoGetFieldSigned.map(|f| f(self.ptr, field.as_ptr(), &mut rc))
        }?;
        (rc == raw::REDISMODULE_OK as c_int).then_some(v)
    }

    /// Whether a text field reads exactly `want`.
    pub(crate) fn text_is(&self, field: &CStr, want: &str) -> bool {
        // SAFETY: see the module comment; the returned string belongs to the data (alive until
        // drop) and is NUL-terminated (an sds), or NULL when the field is missing.
        unsafe {
            match raw::RedisModule_ServerInfoGetFieldC.map(|f| f(self.ptr, field.as_ptr())) {
                Some(p) if !p.is_null() => CStr::from_ptr(p).to_bytes() == want.as_bytes(),
                _ => false,
            }
        }
    }
}

impl Drop for ServerInfo {
    fn drop(&mut self) {
        // SAFETY: the data came from GetServerInfo without a context and is freed once, here.
        unsafe {
            if let Some(f) = raw::RedisModule_FreeServerInfo {
                f(std::ptr::null_mut(), self.ptr);
            }
        }
    }
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

/// What a key holds, seen through the raw key API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    Missing,
    /// A value of the module type asked about: its word.
    Word(u64),
    Other,
}

/// A key opened through the raw API, closed on drop. It borrows the [`Ctx`] of the call that
/// opened it (`'a`), so it cannot be stored beyond that call.
pub(crate) struct Key<'a> {
    ptr: *mut raw::RedisModuleKey,
    _call: PhantomData<&'a Ctx>,
}

impl Key<'_> {
    fn key_type(&self) -> c_int {
        if self.ptr.is_null() {
            return raw::REDISMODULE_KEYTYPE_EMPTY as c_int;
        }
        // SAFETY: see the module comment; the handle is live until drop.
        unsafe { raw::RedisModule_KeyType.map_or(-1, |f| f(self.ptr)) }
    }

    /// What the key holds, for module type `t`: the value word of a key of that type.
    pub(crate) fn get(&self, t: types::ModuleType) -> Held {
        let kt = self.key_type();
        if kt == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
            return Held::Missing;
        }
        if kt != raw::REDISMODULE_KEYTYPE_MODULE as c_int {
            return Held::Other;
        }
        // SAFETY: see the module comment; the key holds a module value, so GetType and
        // GetValue are defined.
        unsafe {
            if raw::RedisModule_ModuleTypeGetType.map(|f| f(self.ptr)) != Some(t.0) {
                return Held::Other;
            }
            match raw::RedisModule_ModuleTypeGetValue.map(|f| f(self.ptr)) {
                Some(v) => Held::Word(v as usize as u64),
                None => Held::Other,
            }
        }
    }

    /// Stores `word` as the key's value of module type `t`, keeping the key's TTL when it
    /// already exists (SetValue would delete the key first, and its expiry with it). `was` is
    /// what [`Key::get`] returned for this handle. The word is never dereferenced by Redis, only
    /// handed back to the type's callbacks; it must not be 0 (Redis reads null as no value).
    pub(crate) fn set(&self, t: types::ModuleType, was: Held, word: u64) -> Result<(), Error> {
        let value = word as usize as *mut c_void;
        // SAFETY: see the module comment; the handle was opened for writing (a null handle is
        // refused), and `was` tells whether it holds our type.
        let rc = unsafe {
            match was {
                Held::Missing if !self.ptr.is_null() => {
                    raw::RedisModule_ModuleTypeSetValue.map(|f| f(self.ptr, t.0, value))
                }
                Held::Word(_) => {
                    let mut old: *mut c_void = std::ptr::null_mut();
                    raw::RedisModule_ModuleTypeReplaceValue
                        .map(|f| f(self.ptr, t.0, value, &mut old))
                }
                Held::Other => return Err(WRONGTYPE),
                Held::Missing => None,
            }
        };
        if rc == Some(raw::REDISMODULE_OK as c_int) {
            Ok(())
        } else {
            Err(Error::Static(
                c"ERR internal error: could not store the value",
            ))
        }
    }
}

impl Key<'_> {
    /// Deletes the key (opened for writing).
    pub(crate) fn delete(&self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: see the module comment; the handle is live until drop.
        unsafe {
            if let Some(f) = raw::RedisModule_DeleteKey {
                f(self.ptr);
            }
        }
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: the handle came from OpenKey and is closed exactly once, here.
        unsafe {
            if let Some(f) = raw::RedisModule_CloseKey {
                f(self.ptr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_text_reads_both_payload_kinds() {
        let p = catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_text(p.as_ref()), "plain");
        let n = 3;
        let p = catch_unwind(|| panic!("formatted {n}")).unwrap_err();
        assert_eq!(panic_text(p.as_ref()), "formatted 3");
    }
}
