//! The sequence data type (`imidseq01`): RDB save/load, AOF rewrite, digest, memory, copy, and
//! the one safe wrapper over the raw key API that the SEQ.* commands use.
//!
//! A key's value "pointer" is not a pointer: it is the word [`Seq::to_word`] encodes, so a
//! sequence costs no allocation beyond what Redis spends on any key. Redis never dereferences
//! module values; it only hands them back to the callbacks below, which decode the word. Hence
//! `free` has nothing to free, `copy` returns the same word and `mem_usage` is 0. The crate's
//! `RedisKeyWritable::set_value` boxes its value, so keys are opened through `raw` here.
//!
//! The same type carries the message-ID generator's time high-water mark as RDB aux data, so
//! a node restarted from an RDB file (or a replica after a full sync) starts above every ID
//! the old process may have issued.

use crate::commands::{err, wrongtype};
use crate::core::msgid::MAX_TIME;
use crate::core::seq::{Seq, MAX_VALUE};
use redis_module::native_types::RedisType;
use redis_module::{raw, Context, RedisError, RedisString};
use std::ffi::{c_void, CString};
use std::os::raw::{c_int, c_longlong};
use std::sync::atomic::{AtomicU32, Ordering};

/// Module type names are exactly 9 characters; the trailing digits leave room for a successor
/// type should the value ever need more than one word.
pub const TYPE_NAME: &str = "imidseq01";

/// RDB encoding version 1: value (unsigned) then a reserved flags word that must be 0, so a
/// later flag can be added without a new version. The aux data shares the type's version: the
/// high-water mark (unsigned).
pub const ENCODING_VERSION: i32 = 1;

// Values travel as pointer-sized words; a 32-bit target would truncate them.
const _: () = assert!(usize::BITS == 64);

pub static SEQ_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        // Version 4 is what Redis 7.0 knows; nothing of version 5 (aux_save2) is used.
        version: 4,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    },
);

fn word_to_ptr(s: Seq) -> *mut c_void {
    // An integer smuggled through a pointer-typed slot that is never dereferenced.
    s.to_word() as usize as *mut c_void
}

fn ptr_to_seq(p: *const c_void) -> Seq {
    Seq::from_word(p as usize as u64)
}

fn raw_type() -> *mut raw::RedisModuleType {
    *SEQ_TYPE.raw_type.borrow()
}

/// Logs why a load failed, through the IO handle (Redis prefixes the module name). While the
/// server loads data (an RDB or AOF at startup, a full sync, DEBUG RELOAD) a refusal stops the
/// load, so it is a warning. Otherwise it is a refused RESTORE payload: the client already has
/// its error, and Redis logs its own RESTORE failures at verbose level, so this one does too
/// (at warning level, a client sending bad payloads in a loop would fill the log).
fn log_io(rdb: *mut raw::RedisModuleIO, msg: &str) {
    let Ok(msg) = CString::new(msg) else {
        return;
    };
    // SAFETY: GetContextFlags is filled in at load and accepts a null context (server-wide
    // flags only).
    let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(std::ptr::null_mut())) };
    let level = if flags & raw::REDISMODULE_CTX_FLAGS_LOADING as c_int != 0 {
        c"warning"
    } else {
        c"verbose"
    };
    // SAFETY: LogIOError is filled in at load; rdb is the live IO handle of the current
    // callback; "%s" consumes exactly the one NUL-terminated string passed.
    unsafe {
        if let Some(log) = raw::RedisModule_LogIOError {
            log(rdb, level.as_ptr(), c"%s".as_ptr(), msg.as_ptr());
        }
    }
}

/// Loads one sequence. Every value loaded gets `needs_gap`: this process did not issue it,
/// and values issued after the save may have been lost (SPEC, "Never reissue").
unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    match load_seq(rdb, encver) {
        Ok(s) => word_to_ptr(s),
        Err(msg) => {
            log_io(rdb, &msg);
            std::ptr::null_mut()
        }
    }
}

fn load_seq(rdb: *mut raw::RedisModuleIO, encver: c_int) -> Result<Seq, String> {
    if encver != ENCODING_VERSION {
        return Err(format!(
            "sequence encoding version {encver} unknown (this build reads {ENCODING_VERSION})"
        ));
    }
    let value = raw::load_unsigned(rdb).map_err(|_| "truncated sequence value".to_owned())?;
    let flags = raw::load_unsigned(rdb).map_err(|_| "truncated sequence flags".to_owned())?;
    if flags != 0 {
        return Err(format!(
            "sequence flags {flags:#x} unknown (reserved, must be 0)"
        ));
    }
    Seq::new(value, true).ok_or_else(|| format!("sequence value {value} above {MAX_VALUE}"))
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    raw::save_unsigned(rdb, ptr_to_seq(value).value());
    raw::save_unsigned(rdb, 0);
}

/// The process that last wrote the message-ID high-water mark into a rewritten AOF.
static FLOOR_EMITTED_BY: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // The value is at most 2^63-1, so it fits a long long.
    let v = ptr_to_seq(value).value() as c_longlong;
    // An AOF rewrite without the RDB preamble has no place for aux data, and the MSGID.FLOOR
    // lines of the old AOF are gone with it. So the first key rewritten also carries the
    // high-water mark. Rewrites run in a forked child: the child's pid marks "already written
    // in this rewrite" without any reset in the parent.
    let pid = std::process::id();
    let hwm = crate::commands::msgid::high_water();
    let emit_floor = FLOOR_EMITTED_BY.swap(pid, Ordering::Relaxed) != pid && hwm > 0;
    // SAFETY: EmitAOF is filled in at load; "sl" consumes the key string and one long long,
    // "l" one long long, all passed; aof and key are the live handles of this callback.
    unsafe {
        if let Some(emit) = raw::RedisModule_EmitAOF {
            if emit_floor {
                let hwm = c_longlong::try_from(hwm).unwrap_or(c_longlong::MAX);
                emit(aof, c"MSGID.FLOOR".as_ptr(), c"l".as_ptr(), hwm);
            }
            emit(aof, c"SEQ.SET".as_ptr(), c"sl".as_ptr(), key, v);
        }
    }
}

/// Only the value: a replica's copy carries `needs_gap` where its primary's may not, and
/// `DEBUG DIGEST` must still agree between them.
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    let v = ptr_to_seq(value).value() as c_longlong;
    // SAFETY: md is the live digest handle of this callback; the functions are filled in at load.
    unsafe {
        if let (Some(add), Some(end)) = (
            raw::RedisModule_DigestAddLongLong,
            raw::RedisModule_DigestEndSequence,
        ) {
            add(md, v);
            end(md);
        }
    }
}

/// The value lives in the pointer, so the only memory it costs is the 16-byte wrapper Redis
/// allocates around every module value (type pointer + value pointer). MEMORY USAGE counts
/// only what this callback reports for module values, so reporting the wrapper keeps it in
/// line with `used_memory` (measured: 16 bytes more per key than an INCR counter).
unsafe extern "C" fn mem_usage(_value: *const c_void) -> usize {
    2 * std::mem::size_of::<*const c_void>()
}

/// Nothing was allocated.
unsafe extern "C" fn free(_value: *mut c_void) {}

/// The word is the whole value, so the copy is the same word.
unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    value.cast_mut()
}

unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, when: c_int) {
    if when == raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        raw::save_unsigned(rdb, crate::commands::msgid::high_water());
    }
}

unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, when: c_int) -> c_int {
    match load_aux(rdb, encver, when) {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(msg) => {
            log_io(rdb, &msg);
            raw::REDISMODULE_ERR as c_int
        }
    }
}

fn load_aux(rdb: *mut raw::RedisModuleIO, encver: c_int, when: c_int) -> Result<(), String> {
    if encver != ENCODING_VERSION {
        return Err(format!("aux encoding version {encver} unknown"));
    }
    if when != raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        return Err(format!("aux data at position {when} unknown"));
    }
    let hwm = raw::load_unsigned(rdb).map_err(|_| "truncated message-id high-water mark")?;
    // Every issued ID's time fits the 42-bit field, and so does every floor MSGID.FLOOR
    // accepts. A mark past it would make every later MSGID.GEN fail for good, so the file is
    // refused (as a sequence value above 2^63-1 is) instead of loaded. (Only a lease renewed in
    // the field's last 5 s, in 2109, could reach past it; MSGID.GEN is exhausted by then.)
    if hwm > MAX_TIME {
        return Err(format!(
            "message-id high-water mark {hwm} above the 42-bit time field (max {MAX_TIME} ms); refusing the RDB file"
        ));
    }
    crate::commands::msgid::raise_floor(hwm);
    Ok(())
}

/// What a key holds, as far as the SEQ commands care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    Missing,
    Seq(Seq),
}

/// A key opened through the raw API, closed on drop.
pub struct SeqKey {
    key: *mut raw::RedisModuleKey,
}

impl SeqKey {
    fn open(ctx: &Context, name: &RedisString, mode: u32) -> Result<SeqKey, RedisError> {
        // SAFETY: ctx.ctx is the live context of the running command and name.inner a live
        // string of it; OpenKey is filled in at load. A null result (read mode, missing key)
        // is handled by every method below.
        let key = unsafe {
            raw::RedisModule_OpenKey.map(|open| open(ctx.ctx, name.inner, mode as c_int))
        };
        key.map(|key| SeqKey { key })
            .ok_or_else(|| err("internal error: key API unavailable"))
    }

    pub fn read(ctx: &Context, name: &RedisString) -> Result<SeqKey, RedisError> {
        SeqKey::open(ctx, name, raw::REDISMODULE_READ)
    }

    pub fn write(ctx: &Context, name: &RedisString) -> Result<SeqKey, RedisError> {
        SeqKey::open(ctx, name, raw::REDISMODULE_READ | raw::REDISMODULE_WRITE)
    }

    fn key_type(&self) -> c_int {
        if self.key.is_null() {
            return raw::REDISMODULE_KEYTYPE_EMPTY as c_int;
        }
        // SAFETY: self.key is a live, non-null key handle until drop.
        unsafe { raw::RedisModule_KeyType.map_or(-1, |f| f(self.key)) }
    }

    fn is_ours(&self) -> bool {
        // SAFETY: as in key_type; the key holds a module value, so GetType is defined.
        self.key_type() == raw::REDISMODULE_KEYTYPE_MODULE as c_int
            && unsafe { raw::RedisModule_ModuleTypeGetType.map(|f| f(self.key)) }
                == Some(raw_type())
    }

    /// The sequence, `Missing`, or WRONGTYPE for a key of any other type.
    pub fn get(&self) -> Result<Found, RedisError> {
        if self.key_type() == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
            return Ok(Found::Missing);
        }
        if !self.is_ours() {
            return Err(wrongtype());
        }
        // SAFETY: the key is live and holds a value of our type.
        let value = unsafe { raw::RedisModule_ModuleTypeGetValue.map(|f| f(self.key)) };
        value
            .map(|v| Found::Seq(ptr_to_seq(v)))
            .ok_or_else(|| err("internal error: key API unavailable"))
    }

    /// Stores `s`, keeping the key's TTL when it already exists (SetValue would delete the
    /// key first, and its expiry with it). WRONGTYPE for a key of any other type.
    pub fn set(&self, s: Seq) -> Result<(), RedisError> {
        let word = word_to_ptr(s);
        let rc = if self.key_type() == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
            if self.key.is_null() {
                return Err(err("internal error: key not open for writing"));
            }
            // SAFETY: live writable key handle; our registered type; the word is non-null.
            unsafe { raw::RedisModule_ModuleTypeSetValue.map(|f| f(self.key, raw_type(), word)) }
        } else if self.is_ours() {
            let mut old: *mut c_void = std::ptr::null_mut();
            // SAFETY: live writable key holding our type; the old word needs no freeing.
            unsafe {
                raw::RedisModule_ModuleTypeReplaceValue
                    .map(|f| f(self.key, raw_type(), word, &mut old))
            }
        } else {
            return Err(wrongtype());
        };
        if rc == Some(raw::REDISMODULE_OK as c_int) {
            Ok(())
        } else {
            Err(err("internal error: could not store the sequence"))
        }
    }
}

impl Drop for SeqKey {
    fn drop(&mut self) {
        if self.key.is_null() {
            return;
        }
        // SAFETY: the handle came from OpenKey and is closed exactly once, here.
        unsafe {
            if let Some(close) = raw::RedisModule_CloseKey {
                close(self.key);
            }
        }
    }
}
