//! The sequence data type's raw callbacks (`imidseq01`): each decodes its arguments, runs the
//! safe code of `seq_type` inside [`guard`], and hands the answer back to Redis.
//!
//! A key's value "pointer" is the word `glue::seq_value` describes: the state itself, or a
//! pointer to a boxed state with IDMP tokens. Redis never dereferences module values; it only
//! hands them back to these callbacks, which decode the word.

use super::data_type::{self, DataType, Digest};
use super::seq_value::{self, Value};
use super::{guard, Entry};
use crate::core::idmp;
use crate::seq_type::{self, ENCODING_VERSION, TYPE_NAME};
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};

// Values travel as pointer-sized words; a 32-bit target would truncate them.
const _: () = assert!(usize::BITS == 64);

pub(crate) static SEQ_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save_triggers: AUX_BEFORE_RDB,
        aux_save2: Some(aux_save2),
        ..data_type::methods::<SeqType>()
    },
);

/// Where aux data is saved: before the keyspace (the only position the type asks for).
pub(crate) const AUX_BEFORE_RDB: c_int = raw::REDISMODULE_AUX_BEFORE_RDB as c_int;

/// A registered module data type.
#[derive(Clone, Copy)]
pub(crate) struct ModuleType(pub(super) *mut raw::RedisModuleType);

/// The registered type, kept once at load: SEQ_TYPE's own copy sits behind a RefCell whose
/// borrow bookkeeping every command would otherwise pay.
static RAW_TYPE: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(std::ptr::null_mut());

/// Creates the type (from OnLoad, once every step that can fail before it has succeeded: a
/// module with a data type cannot be unloaded, so a load that failed after this point would
/// leave the server holding it) and keeps the pointer. Fails when another module holds the
/// name.
pub(crate) fn create(ctx: &redis_module::Context) -> redis_module::Status {
    data_type::create(ctx, &SEQ_TYPE, TYPE_NAME, &RAW_TYPE)
}

/// The module's options, set once in OnLoad:
/// - `HANDLE_IO_ERRORS`: a truncated or mistyped RDB/DUMP payload makes our loader fail (RESTORE
///   replies an error) instead of Redis aborting the server;
/// - `NO_IMPLICIT_SIGNAL_MODIFIED`: closing a key opened for writing does not signal it modified;
///   every command signals a key it changed itself ([`super::Ctx::changed`]), so a command can
///   open a key once for writing and still leave a client's WATCH alone when it changes nothing
///   (an IDMP retry);
/// - on a Valkey 9 cluster node, atomic slot migration support (`glue::migration`).
pub(crate) fn set_module_options(ctx: &redis_module::Context) {
    let options = (raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
        | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED) as c_int
        | super::migration::module_options(ctx);
    // SAFETY: ctx.ctx is the live context of OnLoad; SetModuleOptions is filled in at load.
    unsafe {
        if let Some(set_options) = raw::RedisModule_SetModuleOptions {
            set_options(ctx.ctx, options);
        }
    }
}

/// The sequence type as registered (null before init, when no command runs; Redis's type check
/// then simply fails).
pub(crate) fn seq_type() -> ModuleType {
    ModuleType(RAW_TYPE.load(Ordering::Relaxed))
}

/// The RDB (or DUMP payload) handle of the running load or save callback; it cannot outlive
/// the callback (`'a` is the callback's frame).
pub(crate) struct Rdb<'a> {
    pub(super) io: *mut raw::RedisModuleIO,
    pub(super) _call: PhantomData<&'a ()>,
}

impl Rdb<'_> {
    /// The next unsigned integer; `None` when the payload ends or is not one.
    pub(crate) fn load_u64(&self) -> Option<u64> {
        raw::load_unsigned(self.io).ok()
    }

    pub(crate) fn save_u64(&self, v: u64) {
        raw::save_unsigned(self.io, v);
    }
}

/// The IO handle of an AOF rewrite callback, with the key being rewritten; it cannot outlive
/// the callback.
pub(crate) struct AofKey<'a> {
    pub(super) io: *mut raw::RedisModuleIO,
    pub(super) key: *mut raw::RedisModuleString,
    pub(super) _call: PhantomData<&'a ()>,
}

impl AofKey<'_> {
    /// Writes `cmd value` (format "l").
    pub(crate) fn emit_int(&self, cmd: &CStr, value: i64) {
        // SAFETY: io is the live handle of the running aof_rewrite callback (see the struct);
        // "l" consumes exactly one long long.
        unsafe {
            if let Some(f) = raw::RedisModule_EmitAOF {
                f(self.io, cmd.as_ptr(), c"l".as_ptr(), value);
            }
        }
    }

    /// Writes `cmd <the key> value` (format "sl").
    pub(crate) fn emit_key_int(&self, cmd: &CStr, value: i64) {
        // SAFETY: io and key are the live handles of the running aof_rewrite callback; "sl"
        // consumes the key string and one long long.
        unsafe {
            if let Some(f) = raw::RedisModule_EmitAOF {
                f(self.io, cmd.as_ptr(), c"sl".as_ptr(), self.key, value);
            }
        }
    }
}

impl AofKey<'_> {
    /// Writes `cmd <the key> token last expires fingerprint 0` (format "sbllll"): one IDMP
    /// token restored as saved (see `commands::seq::idmpset`).
    pub(crate) fn emit_token(&self, cmd: &CStr, e: &idmp::Entry) {
        // SAFETY: io and key are the live handles of the running aof_rewrite callback;
        // "sbllll" consumes the key string, a buffer pointer with its length (size_t), and four
        // long longs, all passed in that order.
        unsafe {
            if let Some(f) = raw::RedisModule_EmitAOF {
                f(
                    self.io,
                    cmd.as_ptr(),
                    c"sbllll".as_ptr(),
                    self.key,
                    e.token().as_ptr().cast::<std::os::raw::c_char>(),
                    e.token().len(),
                    e.last as i64,
                    e.expires_ms as i64,
                    e.fingerprint as i64,
                    0i64,
                );
            }
        }
    }
}

/// Logs why a load failed, through the IO handle (Redis prefixes the module name). While the
/// server loads data (an RDB or AOF at startup, a full sync, DEBUG RELOAD) a refusal stops the
/// load, so it is a warning. Otherwise it is a refused RESTORE payload: the client already has
/// its error, and Redis logs its own RESTORE failures at verbose level, so this one does too
/// (at warning level, a client sending bad payloads in a loop would fill the log).
pub(super) fn log_io(rdb: *mut raw::RedisModuleIO, msg: &str) {
    let Ok(msg) = std::ffi::CString::new(msg) else {
        return;
    };
    let level = if super::server_loading() {
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

/// The sequence type's side of the callbacks (`seq_type`); a value is a `seq_value` word.
pub(crate) struct SeqType;

impl DataType for SeqType {
    const LABEL: &'static str = "";

    type Value<'a> = Value<'a>;

    unsafe fn value<'a>(p: *const c_void) -> Option<Value<'a>> {
        // SAFETY: the caller's contract; every value of the type is a word from `seq_value`.
        Some(unsafe { seq_value::read(p as usize as u64) })
    }

    fn load(io: &Rdb, encver: c_int) -> Result<*mut c_void, String> {
        // An integer (or, with tokens, a box) smuggled through a pointer-typed slot.
        seq_type::load(io, encver).map(|t| seq_value::into_word(t) as usize as *mut c_void)
    }

    fn save(io: &Rdb, v: &Value) {
        seq_type::save(io, v);
    }

    fn rewrite(out: &AofKey, v: &Value) {
        seq_type::rewrite(out, v);
    }

    fn digest(v: &Value, d: &Digest) {
        seq_type::digest(v, &mut |item| d.add(item));
        d.end();
    }

    fn mem_usage(v: &Value) -> usize {
        seq_type::mem_usage(v)
    }

    /// An inline word is the whole value, so the copy is the same word; a boxed state is
    /// cloned.
    fn copy(p: *const c_void, v: &Value) -> *mut c_void {
        match v {
            Value::Inline(_) => p.cast_mut(),
            Value::Boxed(t) => seq_value::into_word((*t).clone()) as usize as *mut c_void,
        }
    }

    /// An inline word owns nothing; a boxed state is dropped.
    unsafe fn free(p: *mut c_void) {
        // SAFETY: the caller's contract (each value freed once, after no key holds it).
        unsafe { seq_value::free(p as usize as u64) }
    }
}

unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, when: c_int) {
    let io = Rdb {
        io: rdb,
        _call: PhantomData,
    };
    guard(
        std::ptr::null_mut(),
        Entry::Named("aux_save"),
        || (),
        || seq_type::aux_save(&io, when),
    );
}

unsafe extern "C" fn aux_save2(rdb: *mut raw::RedisModuleIO, when: c_int) {
    let io = Rdb {
        io: rdb,
        _call: PhantomData,
    };
    guard(
        std::ptr::null_mut(),
        Entry::Named("aux_save2"),
        || (),
        || seq_type::aux_save2(&io, when),
    );
}

unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, when: c_int) -> c_int {
    let io = Rdb {
        io: rdb,
        _call: PhantomData,
    };
    let r = guard(
        std::ptr::null_mut(),
        Entry::Named("aux_load"),
        || Err("internal error".to_owned()),
        || seq_type::aux_load(&io, encver, when),
    );
    match r {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(msg) => {
            log_io(rdb, &msg);
            raw::REDISMODULE_ERR as c_int
        }
    }
}
