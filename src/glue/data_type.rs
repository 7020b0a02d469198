//! The raw callbacks of a module data type, once for both of ours: each wraps its IO handle,
//! runs the type's safe side ([`DataType`], implemented in `types` for the sequence type and in
//! `map_type` for the sequence map) inside [`guard`], and hands the answer back to Redis.

use super::types::{log_io, AofKey, Rdb};
use super::{guard, Entry};
use crate::seq_type::DigestItem;
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};

/// What one module data type does in each callback: the safe code behind the raw pointers.
pub(crate) trait DataType {
    /// How log lines name the type's callbacks, `rdb_load (<LABEL>)`; empty: `rdb_load`.
    const LABEL: &'static str;

    /// A value as the type's code reads it; it borrows the callback's frame.
    type Value<'a>;

    /// The value Redis handed to a callback; `None` for a null pointer where that is not a
    /// value.
    ///
    /// # Safety
    /// `p` must be a value of this type that Redis passed to the running callback; the result
    /// must not outlive the callback.
    unsafe fn value<'a>(p: *const c_void) -> Option<Self::Value<'a>>;

    /// Loads a value from an RDB or DUMP payload: the pointer Redis stores, or why the payload
    /// is refused.
    fn load(io: &Rdb, encver: c_int) -> Result<*mut c_void, String>;

    fn save(io: &Rdb, v: &Self::Value<'_>);

    fn rewrite(out: &AofKey, v: &Self::Value<'_>);

    /// Adds the value to DEBUG DIGEST: items, each sequence of them ended.
    fn digest(v: &Self::Value<'_>, d: &Digest);

    fn mem_usage(v: &Self::Value<'_>) -> usize;

    /// A copy of `v` (stored at `p`) for COPY.
    fn copy(p: *const c_void, v: &Self::Value<'_>) -> *mut c_void;

    /// Releases a value.
    ///
    /// # Safety
    /// Redis frees each value of the type once, after no key holds it.
    unsafe fn free(p: *mut c_void);
}

/// The digest handle of the running digest callback; it cannot outlive the callback.
pub(crate) struct Digest<'a> {
    md: *mut raw::RedisModuleDigest,
    _call: PhantomData<&'a ()>,
}

impl Digest<'_> {
    pub(crate) fn add(&self, item: DigestItem) {
        // SAFETY: md is the live digest handle of this callback; the functions are filled in
        // at load; a buffer is passed with its length (Redis copies it).
        unsafe {
            match item {
                DigestItem::Int(i) => {
                    if let Some(add) = raw::RedisModule_DigestAddLongLong {
                        add(self.md, i);
                    }
                }
                DigestItem::Bytes(b) => {
                    if let Some(add) = raw::RedisModule_DigestAddStringBuffer {
                        add(self.md, b.as_ptr().cast_mut().cast(), b.len());
                    }
                }
            }
        }
    }

    /// Ends a sequence of items (Redis combines sequences order-independently).
    pub(crate) fn end(&self) {
        // SAFETY: as in `add`.
        unsafe {
            if let Some(end) = raw::RedisModule_DigestEndSequence {
                end(self.md);
            }
        }
    }
}

/// The callbacks of `T`, for its `RedisModuleTypeMethods` (the aux ones are the sequence
/// type's own, in `types`).
pub(crate) const fn methods<T: DataType>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        // Version 5 adds aux_save2 (Redis 7.2+, Valkey), which those servers call instead of
        // aux_save. Redis 7.0 knows version 4: it reads the fields it knows (it checks no upper
        // bound) and calls aux_save.
        version: 5,
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save::<T>),
        aof_rewrite: Some(aof_rewrite::<T>),
        mem_usage: Some(mem_usage::<T>),
        digest: Some(digest::<T>),
        free: Some(free::<T>),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy::<T>),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    }
}

/// Creates `t` (from OnLoad) and keeps its pointer in `raw_type`, which commands read instead
/// of the RefCell inside `t` (whose borrow bookkeeping every command would otherwise pay).
/// Fails when another module holds the name.
pub(crate) fn create(
    ctx: &redis_module::Context,
    t: &RedisType,
    name: &str,
    raw_type: &AtomicPtr<raw::RedisModuleType>,
) -> redis_module::Status {
    if t.create_data_type(ctx.ctx).is_err() {
        ctx.log_warning(&format!(
            "imid: could not create the data type {name} (another module holds the name?); not loading"
        ));
        return redis_module::Status::Err;
    }
    raw_type.store(*t.raw_type.borrow(), Ordering::Relaxed);
    redis_module::Status::Ok
}

fn entry<T: DataType>(callback: &'static str) -> Entry<'static> {
    Entry::TypeCallback(callback, T::LABEL)
}

/// Loads one value (`T::load`); a refusal is logged and fails the load.
unsafe extern "C" fn rdb_load<T: DataType>(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    let io = Rdb {
        io: rdb,
        _call: PhantomData,
    };
    let r = guard(
        std::ptr::null_mut(),
        entry::<T>("rdb_load"),
        || Err("internal error".to_owned()),
        || T::load(&io, encver),
    );
    r.unwrap_or_else(|msg| {
        log_io(rdb, &msg);
        std::ptr::null_mut()
    })
}

/// Runs `f` on the value at `p` inside the guard (as `callback`): the callbacks that read the
/// value and answer nothing.
fn read<T: DataType>(callback: &'static str, p: *const c_void, f: impl FnOnce(&T::Value<'_>)) {
    guard(
        std::ptr::null_mut(),
        entry::<T>(callback),
        || (),
        || {
            // SAFETY: p is the value of the type Redis handed to the running callback.
            if let Some(v) = unsafe { T::value(p) } {
                f(&v);
            }
        },
    );
}

unsafe extern "C" fn rdb_save<T: DataType>(rdb: *mut raw::RedisModuleIO, p: *mut c_void) {
    let io = Rdb {
        io: rdb,
        _call: PhantomData,
    };
    read::<T>("rdb_save", p, |v| T::save(&io, v));
}

unsafe extern "C" fn aof_rewrite<T: DataType>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    p: *mut c_void,
) {
    let out = AofKey {
        io: aof,
        key,
        _call: PhantomData,
    };
    read::<T>("aof_rewrite", p, |v| T::rewrite(&out, v));
}

unsafe extern "C" fn digest<T: DataType>(md: *mut raw::RedisModuleDigest, p: *mut c_void) {
    let d = Digest {
        md,
        _call: PhantomData,
    };
    read::<T>("digest", p, |v| T::digest(v, &d));
}

unsafe extern "C" fn mem_usage<T: DataType>(p: *const c_void) -> usize {
    guard(
        std::ptr::null_mut(),
        entry::<T>("mem_usage"),
        || 0,
        // SAFETY: Redis hands a value of the type to its mem_usage callback.
        || unsafe { T::value(p) }.map_or(0, |v| T::mem_usage(&v)),
    )
}

unsafe extern "C" fn free<T: DataType>(p: *mut c_void) {
    guard(
        std::ptr::null_mut(),
        entry::<T>("free"),
        || (),
        // SAFETY: Redis frees each value of the type once, after no key holds it.
        || unsafe { T::free(p) },
    );
}

unsafe extern "C" fn copy<T: DataType>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    p: *const c_void,
) -> *mut c_void {
    guard(
        std::ptr::null_mut(),
        entry::<T>("copy"),
        std::ptr::null_mut,
        // SAFETY: Redis hands a value of the type to its copy callback.
        || unsafe { T::value(p) }.map_or(std::ptr::null_mut(), |v| T::copy(p, &v)),
    )
}
