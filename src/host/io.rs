//! The handles a data type's callbacks write and read through: the RDB (or DUMP payload) of a
//! load or save, the AOF of a rewrite, and the digest of `DEBUG DIGEST`. `entry` makes each from
//! the callback's raw pointer; each borrows the callback's frame, so none outlives it.

use redis_module::raw;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int};

/// The RDB (or DUMP payload) handle of the running load or save callback.
pub(crate) struct Rdb<'a> {
    io: *mut raw::RedisModuleIO,
    _call: PhantomData<&'a ()>,
}

impl Rdb<'_> {
    /// # Safety
    /// `io` must be the live IO handle of the running rdb_load, rdb_save, aux_load or aux_save
    /// callback, and the handle must not outlive it.
    pub(crate) unsafe fn from_raw<'a>(io: *mut raw::RedisModuleIO) -> Rdb<'a> {
        Rdb {
            io,
            _call: PhantomData,
        }
    }

    /// The next unsigned integer; `None` when the payload ends or is not one.
    pub(crate) fn load_u64(&self) -> Option<u64> {
        raw::load_unsigned(self.io).ok()
    }

    pub(crate) fn save_u64(&self, v: u64) {
        raw::save_unsigned(self.io, v);
    }

    /// The next string buffer, copied; `None` when the payload ends or is not one.
    pub(crate) fn load_bytes(&self) -> Option<Vec<u8>> {
        raw::load_string_buffer(self.io)
            .ok()
            .map(|b| b.as_ref().to_vec())
    }

    pub(crate) fn save_bytes(&self, b: &[u8]) {
        raw::save_slice(self.io, b);
    }

    /// Logs why a load was refused, through the IO handle (Redis prefixes the module name).
    /// While the server loads data (an RDB or AOF at startup, a full sync, DEBUG RELOAD) a
    /// refusal stops the load, so it is a warning. Otherwise it is a refused RESTORE payload:
    /// the client already has its error, and Redis logs its own RESTORE failures at verbose
    /// level, so this one does too (at warning level, a client sending bad payloads in a loop
    /// would fill the log).
    pub(crate) fn log_refusal(&self, msg: &str) {
        let Ok(msg) = CString::new(msg.replace('\0', " ")) else {
            return;
        };
        let level = if super::server_loading() {
            c"warning"
        } else {
            c"verbose"
        };
        // SAFETY: io is the live IO handle of the running callback (see `from_raw`); "%s"
        // consumes exactly the one NUL-terminated string passed.
        unsafe {
            if let Some(log) = raw::RedisModule_LogIOError {
                log(self.io, level.as_ptr(), c"%s".as_ptr(), msg.as_ptr());
            }
        }
    }
}

/// The IO handle of an AOF rewrite callback, with the key being rewritten.
pub(crate) struct AofKey<'a> {
    io: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    _call: PhantomData<&'a ()>,
}

impl AofKey<'_> {
    /// # Safety
    /// `io` and `key` must be the live handles of the running aof_rewrite callback, and the
    /// handle must not outlive it.
    pub(crate) unsafe fn from_raw<'a>(
        io: *mut raw::RedisModuleIO,
        key: *mut raw::RedisModuleString,
    ) -> AofKey<'a> {
        AofKey {
            io,
            key,
            _call: PhantomData,
        }
    }

    /// Writes `cmd value` (format "l").
    pub(crate) fn emit_int(&self, cmd: &CStr, value: i64) {
        // SAFETY: io is the live handle of the running callback (see `from_raw`); "l"
        // consumes exactly one long long.
        unsafe {
            if let Some(f) = raw::RedisModule_EmitAOF {
                f(self.io, cmd.as_ptr(), c"l".as_ptr(), value);
            }
        }
    }

    /// Writes `cmd <the key> value` (format "sl").
    pub(crate) fn emit_key_int(&self, cmd: &CStr, value: i64) {
        // SAFETY: io and key are the live handles of the running callback; "sl" consumes the
        // key string and one long long.
        unsafe {
            if let Some(f) = raw::RedisModule_EmitAOF {
                f(self.io, cmd.as_ptr(), c"sl".as_ptr(), self.key, value);
            }
        }
    }

    /// Writes `cmd <the key> bytes a b c d` (format "sbllll"), e.g. an IDMP token with its last
    /// value, expiry, fingerprint and dropped count.
    pub(crate) fn emit_key_bytes_ints(&self, cmd: &CStr, bytes: &[u8], [a, b, c, d]: [i64; 4]) {
        // SAFETY: io and key are the live handles of the running callback; "sbllll" consumes
        // the key string, a buffer pointer with its length (size_t), and four long longs, all
        // passed in that order.
        unsafe {
            if let Some(f) = raw::RedisModule_EmitAOF {
                f(
                    self.io,
                    cmd.as_ptr(),
                    c"sbllll".as_ptr(),
                    self.key,
                    bytes.as_ptr().cast::<c_char>(),
                    bytes.len(),
                    a,
                    b,
                    c,
                    d,
                );
            }
        }
    }

    /// Writes `cmd <the key> token last expires dropped COUNT count FIELD field` (format
    /// "sblllclcb"): a map's IDMP token with its request (`SEQ.HIDMPSET`).
    pub(crate) fn emit_key_field_token(
        &self,
        cmd: &CStr,
        token: &[u8],
        [last, expires, dropped]: [i64; 3],
        count: i64,
        field: &[u8],
    ) {
        // SAFETY: io and key are the live handles of the running callback; "sblllclcb"
        // consumes the key string, a buffer pointer with its length (size_t), three long
        // longs, a NUL-terminated C string, a long long, a C string, and a buffer pointer with
        // its length, all passed in that order.
        unsafe {
            if let Some(f) = raw::RedisModule_EmitAOF {
                f(
                    self.io,
                    cmd.as_ptr(),
                    c"sblllclcb".as_ptr(),
                    self.key,
                    token.as_ptr().cast::<c_char>(),
                    token.len(),
                    last,
                    expires,
                    dropped,
                    c"COUNT".as_ptr(),
                    count,
                    c"FIELD".as_ptr(),
                    field.as_ptr().cast::<c_char>(),
                    field.len(),
                );
            }
        }
    }

    /// Writes `cmd <the key> arg...` (format "sv": the key, then a vector of strings), each
    /// argument made from bytes and freed after.
    pub(crate) fn emit_key_args(&self, cmd: &CStr, args: &[&[u8]]) {
        // SAFETY: CreateString with a null context makes strings this function owns and frees
        // below (FreeString with a null context); io and key are the live handles of the
        // running callback; "sv" consumes the key and (array pointer, count).
        unsafe {
            let (Some(create), Some(free), Some(emit)) = (
                raw::RedisModule_CreateString,
                raw::RedisModule_FreeString,
                raw::RedisModule_EmitAOF,
            ) else {
                return;
            };
            let strings: Vec<*mut raw::RedisModuleString> = args
                .iter()
                .map(|a| create(std::ptr::null_mut(), a.as_ptr().cast(), a.len()))
                .collect();
            emit(
                self.io,
                cmd.as_ptr(),
                c"sv".as_ptr(),
                self.key,
                strings.as_ptr(),
                strings.len(),
            );
            for s in strings {
                free(std::ptr::null_mut(), s);
            }
        }
    }
}

/// The digest handle of the running digest callback.
pub(crate) struct Digest<'a> {
    md: *mut raw::RedisModuleDigest,
    _call: PhantomData<&'a ()>,
}

impl Digest<'_> {
    /// # Safety
    /// `md` must be the live digest handle of the running digest callback, and the handle must
    /// not outlive it.
    pub(crate) unsafe fn from_raw<'a>(md: *mut raw::RedisModuleDigest) -> Digest<'a> {
        Digest {
            md,
            _call: PhantomData,
        }
    }

    pub(crate) fn add_int(&self, i: i64) {
        // SAFETY: md is the live digest handle of the running callback (see `from_raw`).
        unsafe {
            if let Some(add) = raw::RedisModule_DigestAddLongLong {
                add(self.md, i);
            }
        }
    }

    pub(crate) fn add_bytes(&self, b: &[u8]) {
        // SAFETY: as in `add_int`; the buffer is passed with its length and copied by Redis.
        unsafe {
            if let Some(add) = raw::RedisModule_DigestAddStringBuffer {
                add(self.md, b.as_ptr().cast_mut().cast(), b.len());
            }
        }
    }

    /// Ends a sequence of items (Redis combines sequences order-independently).
    pub(crate) fn end(&self) {
        // SAFETY: as in `add_int`.
        unsafe {
            if let Some(end) = raw::RedisModule_DigestEndSequence {
                end(self.md);
            }
        }
    }
}

/// Where aux data is saved: before the keyspace (the only position imid asks for).
pub(crate) const AUX_BEFORE_RDB: c_int = raw::REDISMODULE_AUX_BEFORE_RDB as c_int;
