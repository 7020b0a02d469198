//! The sequence map data type's raw side (`imidsmap1`): its callbacks, each running the safe
//! code of `seqmap_type` inside [`guard`], and [`MapKey`], the view of a key the SEQ.H*
//! commands use.
//!
//! A key's value pointer is a `Box<SeqMap>` handed to Redis with `Box::into_raw` (through the
//! module's allocator, Redis's own, so `used_memory` sees it) and taken back in `free`.

use super::data_type::{self, DataType, Digest};
use super::types::{AofKey, ModuleType, Rdb};
use super::{Arg, Ctx, Held, Key};
use crate::core::seqmap::SeqMap;
use crate::error::{Error, WRONGTYPE};
use crate::seq_type::DigestItem;
use crate::seqmap_type::{self, ENCODING_VERSION, TYPE_NAME};
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::{c_void, CStr};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};

pub(crate) static MAP_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    // As the sequence type's (`types::SEQ_TYPE`); no aux data here.
    data_type::methods::<MapType>(),
);

static RAW_TYPE: AtomicPtr<raw::RedisModuleType> = AtomicPtr::new(std::ptr::null_mut());

/// Creates the type (from OnLoad, right after the sequence type; see `types::create`).
pub(crate) fn create(ctx: &redis_module::Context) -> redis_module::Status {
    data_type::create(ctx, &MAP_TYPE, TYPE_NAME, &RAW_TYPE)
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

/// The sequence map's side of the callbacks (`seqmap_type`); a value is a `Box<SeqMap>`.
pub(crate) struct MapType;

impl DataType for MapType {
    const LABEL: &'static str = "sequence map";

    type Value<'a> = &'a SeqMap;

    unsafe fn value<'a>(p: *const c_void) -> Option<&'a SeqMap> {
        // SAFETY: the caller's contract; every value of the type came from Box::into_raw.
        (!p.is_null()).then(|| unsafe { &*p.cast::<SeqMap>() })
    }

    fn load(io: &Rdb, encver: c_int) -> Result<*mut c_void, String> {
        seqmap_type::load(io, encver).map(|m| Box::into_raw(Box::new(m)).cast())
    }

    fn save(io: &Rdb, m: &&SeqMap) {
        seqmap_type::save(io, m);
    }

    fn rewrite(out: &AofKey, m: &&SeqMap) {
        seqmap_type::rewrite(out, m);
    }

    /// One sequence per field (name, value), which Redis combines order-independently: the
    /// digest is the same whatever order the fields sit in, and leaves the marks out (see
    /// `seqmap_type`); then the IDMP tokens, if any, as one more.
    fn digest(m: &&SeqMap, d: &Digest) {
        for (name, v) in seqmap_type::digest_fields(m) {
            d.add(DigestItem::Bytes(name));
            d.add(DigestItem::Int(v));
            d.end();
        }
        let mut any = false;
        seqmap_type::digest_tokens(m, &mut |item| {
            any = true;
            d.add(item);
        });
        if any {
            d.end();
        }
    }

    fn mem_usage(m: &&SeqMap) -> usize {
        seqmap_type::mem_usage(m)
    }

    fn copy(_: *const c_void, m: &&SeqMap) -> *mut c_void {
        Box::into_raw(Box::new(seqmap_type::copy(m))).cast()
    }

    unsafe fn free(p: *mut c_void) {
        if !p.is_null() {
            // SAFETY: the value came from Box::into_raw, and Redis frees it exactly once.
            drop(unsafe { Box::from_raw(p.cast::<SeqMap>()) });
        }
    }
}
