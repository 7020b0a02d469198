//! The sequence data type (`imidseq01`): RDB save/load, AOF rewrite, digest, memory, copy, and
//! the safe view of a key that the SEQ.* commands use.
//!
//! A key's value "pointer" is not a pointer: it is the word [`Seq::to_word`] encodes, so a
//! sequence costs no allocation beyond what Redis spends on any key. Redis never dereferences
//! module values; it only hands them back to the callbacks below, which decode the word. Hence
//! `free` has nothing to free, `copy` returns the same word and `mem_usage` is the wrapper.
//!
//! The same type carries the node's time high-water mark as RDB aux data (`node::ids` owns it),
//! so a node restarted from an RDB file (or a replica after a full sync) starts above every ID
//! the old process may have issued.

use crate::core::seq::{Seq, MAX_VALUE};
use crate::glue::{self, AofKey, Ctx, Error, Held, Key, ModuleType, WRONGTYPE};
use crate::node;
use redis_module::native_types::RedisType;
use redis_module::{raw, Context, Status};
use std::ffi::{c_void, CString};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};

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
        // Version 5 adds aux_save2 (Redis 7.2+, Valkey), which those servers call instead of
        // aux_save. Redis 7.0 knows version 4: it reads the fields it knows (it checks no upper
        // bound) and calls aux_save.
        version: 5,
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
        aux_save2: Some(aux_save2),
    },
);

fn word_to_ptr(s: Seq) -> *mut c_void {
    // An integer smuggled through a pointer-typed slot that is never dereferenced.
    s.to_word() as usize as *mut c_void
}

fn ptr_to_seq(p: *const c_void) -> Seq {
    Seq::from_word(p as usize as u64)
}

/// The registered type, kept once at load: SEQ_TYPE's own copy sits behind a RefCell whose
/// borrow bookkeeping every command would otherwise pay.
static RAW_TYPE: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(std::ptr::null_mut());

/// Creates the type (from init, once every step that can fail before it has succeeded: a
/// module with a data type cannot be unloaded, so a load that failed after this point would
/// leave the server holding it) and keeps the pointer. Fails when another module holds the
/// name.
pub fn create(ctx: &Context) -> Status {
    if SEQ_TYPE.create_data_type(ctx.ctx).is_err() {
        ctx.log_warning(&format!(
            "imid: could not create the data type {TYPE_NAME} (another module holds the name?); not loading"
        ));
        return Status::Err;
    }
    RAW_TYPE.store(*SEQ_TYPE.raw_type.borrow(), Ordering::Relaxed);
    Status::Ok
}

fn raw_type() -> ModuleType {
    // SAFETY: RAW_TYPE holds the type registered at load (or null before init, when no command
    // runs; Redis's type check then simply fails).
    unsafe { ModuleType::from_raw(RAW_TYPE.load(Ordering::Relaxed)) }
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

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: aof and key are this callback's live handles, used only within it.
    let out = unsafe { AofKey::from_raw(aof, key) };
    // A rewrite without the RDB preamble has no aux data: the first key carries the mark.
    if let Some(mark) = node::ids::mark_for_rewrite() {
        out.emit_int(c"MSGID.FLOOR", mark);
    }
    // The value is at most 2^63-1, so it fits an i64.
    let v = i64::try_from(ptr_to_seq(value).value()).unwrap_or(i64::MAX);
    out.emit_key_int(c"SEQ.SET", v);
}

/// Only the value: a replica's copy carries `needs_gap` where its primary's may not, and
/// `DEBUG DIGEST` must still agree between them.
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    let v = ptr_to_seq(value).value() as i64;
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
        raw::save_unsigned(rdb, node::ids::high_water());
    }
}

/// Redis 7.2+ and Valkey: the mark only when there is one to keep. Saving nothing leaves the
/// aux record out of the RDB altogether, so a snapshot of a server that never issued an ID
/// (and holds no sequence key) loads without imid.
unsafe extern "C" fn aux_save2(rdb: *mut raw::RedisModuleIO, when: c_int) {
    if when == raw::REDISMODULE_AUX_BEFORE_RDB as c_int && node::ids::has_mark() {
        raw::save_unsigned(rdb, node::ids::high_water());
    }
}

unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, when: c_int) -> c_int {
    let r = if encver != ENCODING_VERSION {
        Err(format!("aux encoding version {encver} unknown"))
    } else if when != raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        Err(format!("aux data at position {when} unknown"))
    } else {
        raw::load_unsigned(rdb)
            .map_err(|_| "truncated message-id high-water mark".to_owned())
            .and_then(node::ids::load_mark)
    };
    match r {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(msg) => {
            log_io(rdb, &msg);
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// A key as the SEQ commands see it: missing, a sequence, or (WRONGTYPE) anything else.
pub struct SeqKey {
    key: Key,
    held: Held,
}

impl SeqKey {
    /// Opens `name` for reading, or for writing; WRONGTYPE for a key of another type.
    pub fn open(ctx: &Ctx, name: &glue::Arg, write: bool) -> Result<SeqKey, Error> {
        let key = ctx.open_key(name, write)?;
        let held = key.get(raw_type());
        if held == Held::Other {
            return Err(WRONGTYPE);
        }
        Ok(SeqKey { key, held })
    }

    /// The sequence, or `None` for a missing key.
    pub fn get(&self) -> Option<Seq> {
        match self.held {
            Held::Word(w) => Some(Seq::from_word(w)),
            _ => None,
        }
    }

    /// Stores `s` (the key must have been opened for writing), keeping its TTL.
    pub fn set(&self, s: Seq) -> Result<(), Error> {
        self.key.set(raw_type(), self.held, s.to_word())
    }
}
