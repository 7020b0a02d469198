//! Keys of imid's data types, opened through the raw key API: one generic handle, typed by the
//! registered type it expects ([`TypeSlot`]), as `redismodule-rs`'s `key.get_value::<T>(&TYPE)`.
//! A key of another type is WRONGTYPE when opened; a handle borrows the call's [`Ctx`] and
//! closes on drop.

use super::value::{self, Holds, Made, Word};
use super::{Arg, Ctx};
use crate::error::{Error, WRONGTYPE};
use redis_module::raw;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, Ordering};

/// A registered module data type whose values are words holding `B` (`value`): null until
/// `entry` creates the type at load, when no command runs yet (a type check against null
/// simply fails).
///
/// Only words made by `value::Made::into_word` for `B` are ever stored under the type: by its
/// callbacks (load, copy, in `entry`) and by [`TypedKey::put`]. That is what lets a handle read
/// a key's word back as a `B`.
pub(crate) struct TypeSlot<B> {
    ptr: AtomicPtr<raw::RedisModuleType>,
    /// What a key of the type is, as a WRONGTYPE error names it ("an imid sequence").
    what: &'static str,
    _holds: Holds<B>,
}

impl<B> TypeSlot<B> {
    pub(crate) const fn new(what: &'static str) -> TypeSlot<B> {
        TypeSlot {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            what,
            _holds: Holds::new(),
        }
    }

    /// Records the type Redis created (`entry`, once, at load). Kept here rather than read from
    /// the crate's `RedisType`, whose RefCell every command would otherwise pay for.
    pub(crate) fn set(&self, t: *mut raw::RedisModuleType) {
        self.ptr.store(t, Ordering::Relaxed);
    }

    fn get(&self) -> *mut raw::RedisModuleType {
        self.ptr.load(Ordering::Relaxed)
    }
}

/// What a key held when it was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    Missing,
    /// A value of the expected type: its word.
    Word(u64),
}

/// A key of the type `slot` names (or a missing one), opened for reading or writing and closed
/// on drop. It borrows the [`Ctx`] of the call that opened it (`'a`), so it cannot be kept past
/// the call.
pub(crate) struct TypedKey<'a, B: 'static> {
    key: OpenKey<'a>,
    slot: &'static TypeSlot<B>,
    held: Held,
    write: bool,
}

/// A key opened through the raw key API, for reading or writing, closed on drop; it borrows the
/// [`Ctx`] of the call that opened it (`'a`). Null for a missing key opened for reading, which
/// every user checks.
pub(crate) struct OpenKey<'a> {
    pub(super) ptr: *mut raw::RedisModuleKey,
    _call: PhantomData<&'a Ctx>,
}

impl<'a> OpenKey<'a> {
    /// The key API's mode for reading, or for reading and writing.
    pub(super) fn mode(write: bool) -> u32 {
        if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        }
    }

    #[inline(always)]
    pub(super) fn open(ctx: &'a Ctx, name: &Arg, mode: u32) -> Result<OpenKey<'a>, Error> {
        // SAFETY: see the module comment of `host`; a null result (read mode, missing key) is
        // handled by every user.
        let ptr = unsafe { raw::RedisModule_OpenKey.map(|f| f(ctx.ptr, name.ptr, mode as c_int)) }
            .ok_or(Error::Static(c"ERR internal error: key API unavailable"))?;
        Ok(OpenKey {
            ptr,
            _call: PhantomData,
        })
    }

    /// The key's type (`REDISMODULE_KEYTYPE_*`): empty for a missing key.
    pub(super) fn kind(&self) -> c_int {
        if self.ptr.is_null() {
            return raw::REDISMODULE_KEYTYPE_EMPTY as c_int;
        }
        // SAFETY: the handle is live until drop.
        unsafe { raw::RedisModule_KeyType.map_or(-1, |f| f(self.ptr)) }
    }
}

/// What a key of the key API's type `kind` holds, as a WRONGTYPE error names it.
fn held_name(kind: c_int) -> &'static str {
    let is = |k: isize| kind as isize == k;
    if is(raw::REDISMODULE_KEYTYPE_STRING) {
        "a string"
    } else if is(raw::REDISMODULE_KEYTYPE_LIST) {
        "a list"
    } else if is(raw::REDISMODULE_KEYTYPE_HASH) {
        "a hash"
    } else if is(raw::REDISMODULE_KEYTYPE_SET) {
        "a set"
    } else if is(raw::REDISMODULE_KEYTYPE_ZSET) {
        "a sorted set"
    } else if is(raw::REDISMODULE_KEYTYPE_MODULE) {
        "a module data type's value (TYPE names it)"
    } else if is(raw::REDISMODULE_KEYTYPE_STREAM) {
        "a stream"
    } else {
        "another kind of value"
    }
}

/// Longest part of a key name a WRONGTYPE error shows.
const NAME_SHOWN: usize = 120;

/// The WRONGTYPE error of the key `name` (open as `key`), which holds something else than
/// `expected`: Redis's own text first (clients match on it), then the key, what it holds and
/// what the command needed; for a string where a sequence was needed, how to convert an INCR
/// counter. Made only on the error path.
pub(crate) fn wrongtype(key: &OpenKey, name: &Arg, expected: &str) -> Error {
    let kind = key.kind();
    let held = held_name(kind);
    let bytes = name.bytes();
    let shown = String::from_utf8_lossy(bytes.get(..NAME_SHOWN).unwrap_or(bytes));
    let more = if bytes.len() > NAME_SHOWN { "..." } else { "" };
    let hint = if kind == raw::REDISMODULE_KEYTYPE_STRING as c_int && expected.ends_with("sequence")
    {
        " (an INCR counter becomes one in place, with its value: SEQ.CONVERT key)"
    } else {
        ""
    };
    Error::Text(format!(
        "WRONGTYPE Operation against a key holding the wrong kind of value: {shown}{more} holds {held}, not {expected}{hint}"
    ))
}

impl Drop for OpenKey<'_> {
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

/// A key that holds a string (an `INCR` counter), opened for writing, for SEQ.CONVERT: its
/// bytes and expiry are read, then it is deleted to make room for the sequence.
pub(crate) struct StringKey<'a>(OpenKey<'a>);

impl<'a> StringKey<'a> {
    /// Opens `name` for writing; `None` unless it holds a string.
    pub(crate) fn open(ctx: &'a Ctx, name: &Arg) -> Result<Option<StringKey<'a>>, Error> {
        let key = OpenKey::open(ctx, name, OpenKey::mode(true))?;
        Ok((key.kind() == raw::REDISMODULE_KEYTYPE_STRING as c_int).then_some(StringKey(key)))
    }

    /// The string's bytes (copied).
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut len = 0usize;
        // SAFETY: the handle is live and holds a string; StringDMA hands out its buffer (an
        // integer-encoded counter is decoded into one first), valid until the key changes, and
        // it is copied at once.
        unsafe {
            match raw::RedisModule_StringDMA
                .map(|f| f(self.0.ptr, &mut len, raw::REDISMODULE_READ as c_int))
            {
                Some(p) if !p.is_null() => std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec(),
                _ => Vec::new(),
            }
        }
    }

    /// The key's absolute expiry (Unix ms), `None` without one.
    pub(crate) fn expires_at(&self) -> Option<i64> {
        // SAFETY: the handle is live until drop.
        let at = unsafe { raw::RedisModule_GetAbsExpire.map_or(-1, |f| f(self.0.ptr)) };
        (at >= 0).then_some(at)
    }

    /// Deletes the key (its TTL with it).
    pub(crate) fn delete(self) {
        // SAFETY: the handle is live and open for writing.
        unsafe {
            if let Some(f) = raw::RedisModule_DeleteKey {
                f(self.0.ptr);
            }
        }
    }
}

impl<'a, B> TypedKey<'a, B> {
    /// Sets the key's absolute expiry (Unix ms); the key must exist and be open for writing.
    pub(crate) fn expire_at(&mut self, at: i64) {
        if self.key.ptr.is_null() || !self.write {
            return;
        }
        // SAFETY: the handle is live and open for writing.
        unsafe {
            if let Some(f) = raw::RedisModule_SetAbsExpire {
                f(self.key.ptr, at);
            }
        }
    }
}

impl<'a, B> TypedKey<'a, B> {
    /// Opens `name` for reading (`write` false) or writing; WRONGTYPE for a key of another type.
    #[inline]
    pub(crate) fn open(
        ctx: &'a Ctx,
        slot: &'static TypeSlot<B>,
        name: &Arg,
        write: bool,
    ) -> Result<TypedKey<'a, B>, Error> {
        TypedKey::open_mode(ctx, slot, name, OpenKey::mode(write), write)
    }

    /// Opens `name` for writing without touching it: its LRU/LFU stays as it was (a background
    /// step that changes how the value is laid out, never what it holds).
    pub(crate) fn open_untouched(
        ctx: &'a Ctx,
        slot: &'static TypeSlot<B>,
        name: &Arg,
    ) -> Result<TypedKey<'a, B>, Error> {
        let mode =
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE | raw::REDISMODULE_OPEN_KEY_NOTOUCH;
        TypedKey::open_mode(ctx, slot, name, mode, true)
    }

    #[inline(always)]
    fn open_mode(
        ctx: &'a Ctx,
        slot: &'static TypeSlot<B>,
        name: &Arg,
        mode: u32,
        write: bool,
    ) -> Result<TypedKey<'a, B>, Error> {
        let mut key = TypedKey {
            key: OpenKey::open(ctx, name, mode)?,
            slot,
            held: Held::Missing,
            write,
        };
        key.held = key
            .read_held()
            .map_err(|_| wrongtype(&key.key, name, slot.what))?;
        Ok(key)
    }

    /// What the key holds: missing, a word of this type, or (WRONGTYPE) another type's value.
    fn read_held(&self) -> Result<Held, Error> {
        let kt = self.key.kind();
        if kt == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
            return Ok(Held::Missing);
        }
        let ptr = self.key.ptr;
        // SAFETY: see the module comment of `host`; the handle is live until drop, and for a
        // module value GetType and GetValue are defined.
        unsafe {
            if kt != raw::REDISMODULE_KEYTYPE_MODULE as c_int
                || raw::RedisModule_ModuleTypeGetType.map(|f| f(ptr)) != Some(self.slot.get())
            {
                return Err(WRONGTYPE);
            }
            match raw::RedisModule_ModuleTypeGetValue.map(|f| f(ptr)) {
                Some(v) if !v.is_null() => Ok(Held::Word(v as usize as u64)),
                _ => Err(WRONGTYPE),
            }
        }
    }

    /// The key's word (`None` when missing): for a type that decodes inline words itself on a
    /// hot path.
    #[inline]
    pub(crate) fn word(&self) -> Option<u64> {
        match self.held {
            Held::Word(w) => Some(w),
            Held::Missing => None,
        }
    }

    /// The key's value (`None` when missing).
    #[inline]
    pub(crate) fn value(&self) -> Option<Word<'_, B>> {
        // SAFETY: the word is the key's current value, of this type (checked at open), so made
        // for `B` (see `TypeSlot`); the borrow of `self` keeps the key open while the reference
        // lives, and within this call nothing else replaces the value.
        self.word().and_then(|w| unsafe { value::read::<B>(w) })
    }

    /// The key's boxed value, to change in place (`None` when missing, inline, or the key was
    /// opened for reading).
    #[inline]
    pub(crate) fn value_mut(&mut self) -> Option<&mut B> {
        if !self.write {
            return None;
        }
        // SAFETY: as in `value`; `&mut self` makes this the only reference handed out through
        // this handle, and a command holds one handle per key at a time while it writes.
        self.word().and_then(|w| unsafe { value::read_mut::<B>(w) })
    }

    /// Stores `v` as the key's value (the key must be open for writing), keeping its TTL when it
    /// exists (SetValue would delete the key first, and its expiry with it). A boxed value the
    /// key held before is freed; a value Redis refuses is freed too. Inlined: a sequence's
    /// NEXT stores an inline word through it on every call.
    #[inline(always)]
    pub(crate) fn put(&mut self, v: Made<B>) -> Result<(), Error> {
        let word = v.into_word();
        let new = word as usize as *mut c_void;
        let t = self.slot.get();
        let mut old: *mut c_void = std::ptr::null_mut();
        // SAFETY: see the module comment of `host`; the handle is live; a missing key takes
        // SetValue, a held one ReplaceValue (which hands back the old value instead of freeing
        // it). Redis refuses both on a key not opened for writing.
        let rc = unsafe {
            match self.held {
                _ if self.key.ptr.is_null() => None,
                Held::Missing => {
                    raw::RedisModule_ModuleTypeSetValue.map(|f| f(self.key.ptr, t, new))
                }
                Held::Word(_) => raw::RedisModule_ModuleTypeReplaceValue
                    .map(|f| f(self.key.ptr, t, new, &mut old)),
            }
        };
        if rc == Some(raw::REDISMODULE_OK as c_int) {
            self.held = Held::Word(word);
            // SAFETY: the old word was this key's value of this type, which no key holds now.
            unsafe { value::free::<B>(old as usize as u64) };
            Ok(())
        } else {
            // SAFETY: Redis did not take the word, so nothing else holds it.
            unsafe { value::free::<B>(word) };
            Err(Error::Static(
                c"ERR internal error: could not store the value",
            ))
        }
    }

    /// Deletes the key (open for writing).
    pub(crate) fn delete(&mut self) {
        if self.key.ptr.is_null() || !self.write {
            return;
        }
        // SAFETY: see the module comment of `host`; the handle is live until drop. Redis frees
        // the value through the type's free callback.
        unsafe {
            if let Some(f) = raw::RedisModule_DeleteKey {
                f(self.key.ptr);
            }
        }
        self.held = Held::Missing;
    }
}
