//! Sorted sets through the module key API (IM.SEND's inboxes): open with a type check, add a
//! member, drop the lowest, read the first member at a score, signal and notify as ZADD and
//! ZPOPMIN do; the string a member is made into; and IM.SEND's one replication call.
//!
//! The key API instead of `RedisModule_Call`: ZADD through Call builds an argument vector, looks
//! the command up, runs it through `call()` and parses its reply; `RedisModule_ZsetAdd` inserts
//! straight into the value (server-bench/send.py measures both).

use super::key::{wrongtype, OpenKey};
use super::{Arg, Ctx};
use crate::error::Error;
use redis_module::raw;
use std::os::raw::{c_char, c_int};

mod range;

/// A string this call made (a member), freed on drop.
pub(crate) struct Member(*mut raw::RedisModuleString);

impl Member {
    pub(crate) fn new(bytes: &[u8]) -> Option<Member> {
        // SAFETY: see the module comment of `host`; CreateString copies `len` bytes; a null
        // context makes a string that lives until FreeString.
        let s = unsafe {
            raw::RedisModule_CreateString
                .map(|create| create(std::ptr::null_mut(), bytes.as_ptr().cast(), bytes.len()))
        }?;
        // Not `then_some`: it would wrap (and so free, on drop) a null string too.
        if s.is_null() {
            None
        } else {
            Some(Member(s))
        }
    }

    /// The string's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        let mut len = 0usize;
        // SAFETY: StringPtrLen returns the string's buffer and length, valid while the string
        // lives, which the borrow of `self` guarantees.
        unsafe {
            match raw::RedisModule_StringPtrLen.map(|f| f(self.0, &mut len)) {
                Some(p) if !p.is_null() => std::slice::from_raw_parts(p.cast::<u8>(), len),
                _ => &[],
            }
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // SAFETY: the string was created (or handed over by Redis) for this module, with no
        // automatic memory, and is freed exactly once, here.
        unsafe {
            if let Some(free) = raw::RedisModule_FreeString {
                free(std::ptr::null_mut(), self.0);
            }
        }
    }
}

/// A key that must be missing or a sorted set, opened for reading or writing and closed on
/// drop; it borrows the call's [`Ctx`].
pub(crate) struct ZsetKey<'a> {
    key: OpenKey<'a>,
}

impl<'a> ZsetKey<'a> {
    /// Opens `name` for reading; WRONGTYPE for a key of another type.
    #[inline]
    pub(crate) fn open_read(ctx: &'a Ctx, name: &Arg) -> Result<ZsetKey<'a>, Error> {
        Self::open(ctx, name, false)
    }

    /// Opens `name` for writing; WRONGTYPE for a key of another type.
    #[inline]
    pub(crate) fn open_write(ctx: &'a Ctx, name: &Arg) -> Result<ZsetKey<'a>, Error> {
        Self::open(ctx, name, true)
    }

    fn open(ctx: &'a Ctx, name: &Arg, write: bool) -> Result<ZsetKey<'a>, Error> {
        let key = OpenKey::open(ctx, name, OpenKey::mode(write))?;
        match key.kind() {
            t if t == raw::REDISMODULE_KEYTYPE_EMPTY as c_int
                || t == raw::REDISMODULE_KEYTYPE_ZSET as c_int =>
            {
                Ok(ZsetKey { key })
            }
            _ => Err(wrongtype(&key, name, "a sorted set")),
        }
    }

    /// The number of members (0 for a missing key).
    pub(crate) fn len(&self) -> usize {
        if self.key.ptr.is_null() {
            return 0;
        }
        // SAFETY: the handle is live until drop.
        unsafe { raw::RedisModule_ValueLength.map_or(0, |f| f(self.key.ptr)) }
    }

    /// ZADD key score member (creating the key when missing): whether the set changed (a new
    /// member, or a new score), as ZADD decides whether to signal and notify.
    pub(crate) fn add(&mut self, score: f64, member: &Member) -> Result<bool, Error> {
        let mut flags: c_int = 0;
        // SAFETY: the handle is live and open for writing (a read handle is refused by Redis);
        // the member is a live string, which Redis copies.
        let rc = unsafe {
            raw::RedisModule_ZsetAdd.map(|f| f(self.key.ptr, score, member.0, &mut flags))
        };
        if rc != Some(raw::REDISMODULE_OK as c_int) {
            return Err(Error::Static(
                c"ERR internal error: could not add to the sorted set",
            ));
        }
        Ok(flags & (raw::REDISMODULE_ZADD_ADDED | raw::REDISMODULE_ZADD_UPDATED) as c_int != 0)
    }

    /// The first member whose score is exactly `score` (members of one score in ZRANGE's
    /// order), or `None`.
    pub(crate) fn first_at(&self, score: f64) -> Option<Member> {
        if self.key.ptr.is_null() {
            return None;
        }
        // SAFETY: the handle is live; the range is stopped before returning, and the element
        // Redis hands out is ours to free (`Member`'s drop).
        unsafe {
            if raw::RedisModule_ZsetFirstInScoreRange?(self.key.ptr, score, score, 0, 0)
                != raw::REDISMODULE_OK as c_int
            {
                return None;
            }
            let mut s = 0.0;
            let e = raw::RedisModule_ZsetRangeCurrentElement?(self.key.ptr, &mut s);
            raw::RedisModule_ZsetRangeStop?(self.key.ptr);
            if e.is_null() {
                None
            } else {
                Some(Member(e))
            }
        }
    }

    /// ZPOPMIN key: removes the member with the lowest score (the first in ZRANGE's order) and
    /// returns its score; `None` on an empty set.
    pub(crate) fn pop_min(&mut self) -> Option<f64> {
        if self.key.ptr.is_null() {
            return None;
        }
        // SAFETY: the handle is live and open for writing; the range is stopped before the
        // member is removed; the element is freed once (`Member`'s drop).
        unsafe {
            if raw::RedisModule_ZsetFirstInScoreRange?(
                self.key.ptr,
                f64::NEG_INFINITY,
                f64::INFINITY,
                0,
                0,
            ) != raw::REDISMODULE_OK as c_int
            {
                return None;
            }
            let mut score = 0.0;
            let e = raw::RedisModule_ZsetRangeCurrentElement?(self.key.ptr, &mut score);
            raw::RedisModule_ZsetRangeStop?(self.key.ptr);
            if e.is_null() {
                return None;
            }
            let e = Member(e);
            let mut deleted: c_int = 0;
            raw::RedisModule_ZsetRem?(self.key.ptr, e.0, &mut deleted);
            (deleted != 0).then_some(score)
        }
    }
}

impl Ctx {
    /// A null reply (RESP2 null bulk, RESP3 null), as a script's `false` becomes.
    pub(crate) fn reply_null(&self) {
        // SAFETY: see the module comment of `host`.
        unsafe {
            if let Some(f) = raw::RedisModule_ReplyWithNull {
                f(self.ptr);
            }
        }
    }

    /// What ZADD and ZPOPMIN do after they changed `key`: signal it (WATCH, client-side caches)
    /// and publish the keyspace event `event` of class `z`.
    pub(crate) fn zset_changed(&self, event: &std::ffi::CStr, key: &Arg) {
        // SAFETY: see the module comment of `host`; Redis copies what it keeps.
        unsafe {
            if let Some(f) = raw::RedisModule_SignalModifiedKey {
                f(self.ptr, key.ptr);
            }
            if let Some(f) = raw::RedisModule_NotifyKeyspaceEvent {
                f(
                    self.ptr,
                    raw::REDISMODULE_NOTIFY_ZSET as c_int,
                    event.as_ptr(),
                    key.ptr,
                );
            }
        }
    }

    /// Replicates `cmd first args...`: one argument of this call's making, then the call's own
    /// arguments (after its name) as they came, each handed over by reference (format "bv": one
    /// command lookup, one argument object made, no copy of the arguments).
    pub(crate) fn replicate_send(&self, cmd: &std::ffi::CStr, first: &[u8], args: &[Arg]) {
        // SAFETY: see the module comment of `host`; "bv" consumes a buffer and its length, then
        // an array of RedisModuleString* and its length, all passed in that order; `Arg` is a
        // transparent wrapper of the string pointer, and Redis takes a reference to each
        // string. Replicate fails only for an unknown command name, and the name passed is one
        // of ours.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(
                    self.ptr,
                    cmd.as_ptr(),
                    c"bv".as_ptr(),
                    first.as_ptr().cast::<c_char>(),
                    first.len(),
                    args.as_ptr()
                        .cast_mut()
                        .cast::<*mut raw::RedisModuleString>(),
                    args.len(),
                );
            }
        }
    }
}
