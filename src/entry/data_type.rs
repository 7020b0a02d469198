//! The data types' raw callbacks, once for both types: each wraps its raw pointers into `host`'s
//! handles, runs the type's safe side ([`DataType`]: `types::seq::SeqType`,
//! `types::map::MapType`) inside [`guard`], and hands the answer back to Redis. The sequence
//! type's aux data callbacks too (`types::seq::aux`).
//!
//! A value's pointer is the word `host::value` describes: Redis never dereferences it, only
//! hands it back here, where it is read as the type's value.

use super::{guard, EntryPoint};
use crate::host::io::{AofKey, Digest, Rdb, AUX_BEFORE_RDB};
use crate::host::value::{self, Made};
use crate::host::Ctx;
use crate::types::map::MapType;
use crate::types::seq::{aux, SeqType};
use crate::types::DataType;
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::c_void;
use std::os::raw::c_int;

/// The sequence type, with its aux data (the node's ID marks and IDMP clock).
static SEQ_TYPE: RedisType = RedisType::new(
    SeqType::NAME,
    SeqType::ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save_triggers: AUX_BEFORE_RDB,
        aux_save2: Some(aux_save2),
        ..methods::<SeqType>()
    },
);

/// The sequence map type (no aux data).
static MAP_TYPE: RedisType = RedisType::new(
    MapType::NAME,
    MapType::ENCODING_VERSION,
    methods::<MapType>(),
);

/// Creates both types (from OnLoad, once every step that can fail before it has succeeded: a
/// module with a data type cannot be unloaded, so a load that failed after this point would
/// leave the server holding it). Fails when another module holds a name.
pub(crate) fn create(ctx: &Ctx) -> bool {
    create_one::<SeqType>(ctx, &SEQ_TYPE) && create_one::<MapType>(ctx, &MAP_TYPE)
}

/// Creates `t` and records it where the type's keys look for it (`T::slot()`).
fn create_one<T: DataType>(ctx: &Ctx, t: &RedisType) -> bool {
    if t.create_data_type(ctx.raw()).is_err() {
        ctx.log_warning(&format!(
            "imid: could not create the data type {} (another module holds the name?); not loading",
            T::NAME
        ));
        return false;
    }
    T::slot().set(*t.raw_type.borrow());
    true
}

/// The callbacks of `T`, for its `RedisModuleTypeMethods` (the aux ones are the sequence
/// type's own).
const fn methods<T: DataType>() -> raw::RedisModuleTypeMethods {
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
        unlink: Some(unlink::<T>),
        copy: Some(copy::<T>),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    }
}

fn entry<T: DataType>(callback: &'static str) -> EntryPoint<'static> {
    EntryPoint::TypeCallback(callback, T::LABEL)
}

/// The pointer Redis stores for a value made by the type.
fn into_ptr<B>(v: Made<B>) -> *mut c_void {
    v.into_word() as usize as *mut c_void
}

/// Loads one value (`T::load`); a refusal is logged and fails the load.
unsafe extern "C" fn rdb_load<T: DataType>(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    // SAFETY: rdb is the live IO handle of this callback.
    let io = unsafe { Rdb::from_raw(rdb) };
    let r = guard(
        std::ptr::null_mut(),
        entry::<T>("rdb_load"),
        || Err("internal error".to_owned()),
        || T::load(&io, encver),
    );
    match r {
        Ok(v) => into_ptr(v),
        Err(msg) => {
            io.log_refusal(&msg);
            std::ptr::null_mut()
        }
    }
}

/// Runs `f` on the value at `p` inside the guard (as `callback`), or `fallback()` when it is not
/// one: every callback that reads a value.
///
/// # Safety
/// `p` must be a value of the type that Redis handed to the running callback.
unsafe fn with_value<T: DataType, R>(
    callback: &'static str,
    p: *const c_void,
    fallback: impl Fn() -> R,
    f: impl FnOnce(&T::View<'_>) -> R,
) -> R {
    guard(
        std::ptr::null_mut(),
        entry::<T>(callback),
        &fallback,
        || {
            // SAFETY: the caller's contract: p is a live value of the type, so a word made for
            // `T::Boxed` (`host::key::TypeSlot`), alive for the callback.
            let word = unsafe { value::read::<T::Boxed>(p as usize as u64) };
            match word.and_then(T::view) {
                Some(v) => f(&v),
                None => fallback(),
            }
        },
    )
}

unsafe extern "C" fn rdb_save<T: DataType>(rdb: *mut raw::RedisModuleIO, p: *mut c_void) {
    // SAFETY: rdb is the live IO handle of this callback.
    let io = unsafe { Rdb::from_raw(rdb) };
    // SAFETY: Redis hands a value of the type to its rdb_save callback.
    unsafe { with_value::<T, ()>("rdb_save", p, || (), |v| T::save(&io, v)) }
}

unsafe extern "C" fn aof_rewrite<T: DataType>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    p: *mut c_void,
) {
    // SAFETY: aof and key are the live handles of this callback.
    let out = unsafe { AofKey::from_raw(aof, key) };
    // SAFETY: Redis hands a value of the type to its aof_rewrite callback.
    unsafe { with_value::<T, ()>("aof_rewrite", p, || (), |v| T::rewrite(&out, v)) }
}

unsafe extern "C" fn digest<T: DataType>(md: *mut raw::RedisModuleDigest, p: *mut c_void) {
    // SAFETY: md is the live digest handle of this callback.
    let d = unsafe { Digest::from_raw(md) };
    // SAFETY: Redis hands a value of the type to its digest callback.
    unsafe { with_value::<T, ()>("digest", p, || (), |v| T::digest(v, &d)) }
}

unsafe extern "C" fn mem_usage<T: DataType>(p: *const c_void) -> usize {
    // SAFETY: Redis hands a value of the type to its mem_usage callback.
    unsafe { with_value::<T, usize>("mem_usage", p, || 0, |v| T::mem_usage(v)) }
}

unsafe extern "C" fn copy<T: DataType>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    p: *const c_void,
) -> *mut c_void {
    // SAFETY: Redis hands a value of the type to its copy callback.
    unsafe {
        with_value::<T, *mut c_void>("copy", p, std::ptr::null_mut, |v| {
            // The fence counts the copy's values (`node::fence::appeared`).
            crate::node::fence::key_appeared();
            into_ptr(T::copy(v))
        })
    }
}

/// A key of the type left its name: RENAME and MOVE (the value lives on under the new name),
/// DEL, expiry, eviction, an overwrite. With the fence on it counts as a whole budget
/// (`node::fence::appeared`): a replica that missed a RENAME or MOVE lacks the key under its
/// new name. The callback cannot tell which command it is, so a deleted key is counted too
/// (one acknowledgement more, nothing else). `unlink`, not `unlink2`: Redis 7.0 knows both,
/// and the key's name is not needed. (A keyspace-event subscription could tell them apart, but
/// Redis makes a context for every generic event of every key: +560 instructions per `EXPIRE`
/// of any key, measured under callgrind on Redis 7.0.15.)
unsafe extern "C" fn unlink<T: DataType>(_key: *mut raw::RedisModuleString, _v: *const c_void) {
    guard(
        std::ptr::null_mut(),
        entry::<T>("unlink"),
        || (),
        crate::node::fence::key_appeared,
    );
}

unsafe extern "C" fn free<T: DataType>(p: *mut c_void) {
    guard(
        std::ptr::null_mut(),
        entry::<T>("free"),
        || (),
        // SAFETY: Redis frees each value of the type once, after no key holds it; every value
        // of the type is a word made for `T::Boxed`.
        || unsafe { value::free::<T::Boxed>(p as usize as u64) },
    );
}

unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, when: c_int) {
    // SAFETY: rdb is the live IO handle of this callback.
    let io = unsafe { Rdb::from_raw(rdb) };
    guard(
        std::ptr::null_mut(),
        EntryPoint::Named("aux_save"),
        || (),
        || aux::aux_save(&io, when),
    );
}

unsafe extern "C" fn aux_save2(rdb: *mut raw::RedisModuleIO, when: c_int) {
    // SAFETY: rdb is the live IO handle of this callback.
    let io = unsafe { Rdb::from_raw(rdb) };
    guard(
        std::ptr::null_mut(),
        EntryPoint::Named("aux_save2"),
        || (),
        || aux::aux_save2(&io, when),
    );
}

unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, when: c_int) -> c_int {
    // SAFETY: rdb is the live IO handle of this callback.
    let io = unsafe { Rdb::from_raw(rdb) };
    let r = guard(
        std::ptr::null_mut(),
        EntryPoint::Named("aux_load"),
        || Err("internal error".to_owned()),
        || aux::aux_load(&io, encver, when),
    );
    match r {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(msg) => {
            io.log_refusal(&msg);
            raw::REDISMODULE_ERR as c_int
        }
    }
}
