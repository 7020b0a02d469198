//! The sequence map data type's raw side (`imidsmap1`): its callbacks, each running the safe
//! code of `seqmap_type` inside [`guard`], and [`MapKey`], the view of a key the SEQ.H*
//! commands use.
//!
//! A key's value pointer is a `Box<SeqMap>` handed to Redis with `Box::into_raw` (through the
//! module's allocator, Redis's own, so `used_memory` sees it) and taken back in `free`.

use super::types::{log_io, AofKey, ModuleType, Rdb};
use super::{guard, Arg, Ctx, Entry, Held, Key};
use crate::core::seqmap::SeqMap;
use crate::error::{Error, WRONGTYPE};
use crate::seq_type::DigestItem;
use crate::seqmap_type::{self, ENCODING_VERSION, TYPE_NAME};
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};

pub(crate) static MAP_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        // As the sequence type (`types::SEQ_TYPE`); no aux data here.
        version: 5,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
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

static RAW_TYPE: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(std::ptr::null_mut());

/// Creates the type (from OnLoad, right after the sequence type; see `types::create`).
pub(crate) fn create(ctx: &redis_module::Context) -> redis_module::Status {
    if MAP_TYPE.create_data_type(ctx.ctx).is_err() {
        ctx.log_warning(&format!(
            "imid: could not create the data type {TYPE_NAME} (another module holds the name?); not loading"
        ));
        return redis_module::Status::Err;
    }
    RAW_TYPE.store(*MAP_TYPE.raw_type.borrow(), Ordering::Relaxed);
    redis_module::Status::Ok
}

fn map_type() -> ModuleType {
    ModuleType(RAW_TYPE.load(Ordering::Relaxed))
}

impl Rdb<'_> {
    /// The next string buffer, copied; `None` when the payload ends or is not one.
    pub(crate) fn load_bytes(&self) -> Option<Vec<u8>> {
        raw::load_string_buffer(self.io)
            .ok()
            .map(|b| b.as_ref().to_vec())
    }

    pub(crate) fn save_bytes(&self, b: &[u8]) {
        raw::save_slice(self.io, b);
    }
}

impl AofKey<'_> {
    /// Writes `cmd <the key> arg...` (format "sv": the key, then a vector of strings), each
    /// argument made from bytes and freed after.
    pub(crate) fn emit_key_args(&self, cmd: &CStr, args: &[&[u8]]) {
        // SAFETY: CreateString with a null context makes strings this function owns and frees
        // below (FreeString with a null context); io and key are the live handles of the
        // running aof_rewrite callback; "sv" consumes the key and (array pointer, count).
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

/// A key as the SEQ.H* commands see it: missing, a sequence map, or (WRONGTYPE) anything
/// else. It borrows the call's context (`'a`) like the [`Key`] it wraps.
pub(crate) struct MapKey<'a> {
    key: Key<'a>,
    held: Held,
}

impl<'a> MapKey<'a> {
    /// Opens `name` for reading, or for writing; WRONGTYPE for a key of another type.
    pub(crate) fn open(ctx: &'a Ctx, name: &Arg, write: bool) -> Result<MapKey<'a>, Error> {
        let key = ctx.open_key(name, write)?;
        let held = key.get(map_type());
        if held == Held::Other {
            return Err(WRONGTYPE);
        }
        Ok(MapKey { key, held })
    }

    /// The map, or `None` for a missing key.
    pub(crate) fn get(&self) -> Option<&SeqMap> {
        match self.held {
            // SAFETY: a value of this type is always a pointer from Box::into_raw (create,
            // rdb_load, copy), alive while the key holds it, which is at least this call.
            Held::Word(w) if w != 0 => Some(unsafe { &*(w as usize as *const SeqMap) }),
            _ => None,
        }
    }

    /// The map to change in place (the key must have been opened for writing), created empty
    /// when the key is missing. Redis keeps the key's TTL: the value is changed, not replaced.
    pub(crate) fn get_or_create(&mut self) -> Result<&mut SeqMap, Error> {
        if self.held == Held::Missing {
            let p = Box::into_raw(Box::new(SeqMap::new()));
            if let Err(e) = self.key.set(map_type(), Held::Missing, p as usize as u64) {
                // SAFETY: p came from Box::into_raw just above and Redis refused it.
                drop(unsafe { Box::from_raw(p) });
                return Err(e);
            }
            self.held = Held::Word(p as usize as u64);
        }
        match self.held {
            // SAFETY: as in `get`; the key is open for writing in this call, and no other
            // reference to the map lives (`&mut self`).
            Held::Word(w) if w != 0 => Ok(unsafe { &mut *(w as usize as *mut SeqMap) }),
            _ => Err(Error::Static(c"ERR internal error: no map")),
        }
    }

    /// Deletes the key (its last field was removed).
    pub(crate) fn delete(&mut self) {
        self.key.delete();
        self.held = Held::Missing;
    }
}

fn map_ref<'v>(value: *const c_void) -> Option<&'v SeqMap> {
    // SAFETY: Redis hands the callbacks only values this type stored (Box::into_raw).
    (!value.is_null()).then(|| unsafe { &*value.cast::<SeqMap>() })
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let io = Rdb {
        io: rdb,
        _call: PhantomData,
    };
    let r = guard(
        std::ptr::null_mut(),
        Entry::Named("rdb_load (sequence map)"),
        || Err("internal error".to_owned()),
        || seqmap_type::load(&io, encver),
    );
    match r {
        Ok(m) => Box::into_raw(Box::new(m)).cast(),
        Err(msg) => {
            log_io(rdb, &msg);
            std::ptr::null_mut()
        }
    }
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    let io = Rdb {
        io: rdb,
        _call: PhantomData,
    };
    guard(
        std::ptr::null_mut(),
        Entry::Named("rdb_save (sequence map)"),
        || (),
        || {
            if let Some(m) = map_ref(value) {
                seqmap_type::save(&io, m);
            }
        },
    );
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    let out = AofKey {
        io: aof,
        key,
        _call: PhantomData,
    };
    guard(
        std::ptr::null_mut(),
        Entry::Named("aof_rewrite (sequence map)"),
        || (),
        || {
            if let Some(m) = map_ref(value) {
                seqmap_type::rewrite(&out, m);
            }
        },
    );
}

/// One sequence per field (name, value), which Redis combines order-independently: the
/// digest is the same whatever order the fields sit in, and leaves the marks out (see
/// `seqmap_type`).
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard(
        std::ptr::null_mut(),
        Entry::Named("digest (sequence map)"),
        || (),
        || {
            let Some(m) = map_ref(value) else { return };
            // SAFETY: md is the live digest handle of this callback; the functions are filled
            // in at load; Redis copies the buffer.
            unsafe {
                let (Some(add_buf), Some(add_int), Some(end)) = (
                    raw::RedisModule_DigestAddStringBuffer,
                    raw::RedisModule_DigestAddLongLong,
                    raw::RedisModule_DigestEndSequence,
                ) else {
                    return;
                };
                for (name, v) in seqmap_type::digest_fields(m) {
                    add_buf(md, name.as_ptr().cast(), name.len());
                    add_int(md, v);
                    end(md);
                }
                let mut any = false;
                seqmap_type::digest_tokens(m, &mut |item| {
                    any = true;
                    match item {
                        DigestItem::Int(i) => add_int(md, i),
                        DigestItem::Bytes(b) => add_buf(md, b.as_ptr().cast_mut().cast(), b.len()),
                    }
                });
                if any {
                    end(md);
                }
            }
        },
    );
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    guard(
        std::ptr::null_mut(),
        Entry::Named("mem_usage (sequence map)"),
        || 0,
        || map_ref(value).map_or(0, seqmap_type::mem_usage),
    )
}

unsafe extern "C" fn free(value: *mut c_void) {
    guard(
        std::ptr::null_mut(),
        Entry::Named("free (sequence map)"),
        || (),
        || {
            if !value.is_null() {
                // SAFETY: the value came from Box::into_raw and Redis frees it exactly once.
                drop(unsafe { Box::from_raw(value.cast::<SeqMap>()) });
            }
        },
    );
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard(
        std::ptr::null_mut(),
        Entry::Named("copy (sequence map)"),
        std::ptr::null_mut,
        || match map_ref(value) {
            Some(m) => Box::into_raw(Box::new(seqmap_type::copy(m))).cast(),
            None => std::ptr::null_mut(),
        },
    )
}
