//! Reading a sorted set by score (IM.SYNC's page of an inbox, IM.PULL's changes of a log), the
//! newest members above a score (IM.READ's and IM.UNREAD's unread count looks at who sent each)
//! and counting the members above a score, for the read side of the IM flow.
//!
//! A page walks the key API's score range and stops at its limit, so it costs what it returns;
//! the unread count walks at most a bound of members, then counts the rest through `ZCOUNT`
//! (`RedisModule_Call`), which Redis answers from the skiplist's ranks in O(log n): walking a
//! long range would cost as much as the inbox holds.

use super::{Member, ZsetKey};
use crate::error::{Error, INTERNAL};
use crate::host::{Arg, Ctx};
use redis_module::raw;
use std::os::raw::c_int;

impl ZsetKey<'_> {
    /// ZRANGE key (min +inf|max BYSCORE LIMIT 0 limit WITHSCORES: the members with a score above
    /// `above` and at most `upto` (`None`: no bound), lowest first, at most `limit` of them.
    pub(crate) fn range_above(
        &self,
        above: f64,
        upto: Option<f64>,
        limit: usize,
    ) -> Vec<(Member, f64)> {
        let mut out = Vec::new();
        if self.key.ptr.is_null() || limit == 0 {
            return out;
        }
        let max = upto.unwrap_or(f64::INFINITY);
        // SAFETY: the handle is live; every element Redis hands out is ours to free (`Member`'s
        // drop); the range is stopped before returning.
        unsafe {
            let (Some(first), Some(current), Some(next), Some(end), Some(stop)) = (
                raw::RedisModule_ZsetFirstInScoreRange,
                raw::RedisModule_ZsetRangeCurrentElement,
                raw::RedisModule_ZsetRangeNext,
                raw::RedisModule_ZsetRangeEndReached,
                raw::RedisModule_ZsetRangeStop,
            ) else {
                return out;
            };
            if first(self.key.ptr, above, max, 1, 0) != raw::REDISMODULE_OK as c_int {
                return out;
            }
            while out.len() < limit && end(self.key.ptr) == 0 {
                let mut score = 0.0;
                let e = current(self.key.ptr, &mut score);
                if e.is_null() {
                    break;
                }
                out.push((Member(e), score));
                if next(self.key.ptr) == 0 {
                    break;
                }
            }
            stop(self.key.ptr);
        }
        out
    }
}

impl ZsetKey<'_> {
    /// The members with a score above `above`, from the highest score down, at most `limit` of
    /// them, each handed to `f` (IM.UNREAD's and IM.READ's look at who sent them). How many were
    /// walked, and whether that is all of them (the walk reached `above`).
    pub(crate) fn walk_down(
        &self,
        above: f64,
        limit: usize,
        mut f: impl FnMut(&[u8]),
    ) -> (usize, bool) {
        if self.key.ptr.is_null() {
            return (0, true);
        }
        let mut n = 0usize;
        // SAFETY: the handle is live; every element Redis hands out is ours to free (`Member`'s
        // drop, at the end of each step); the range is stopped before returning.
        unsafe {
            let (Some(last), Some(current), Some(prev), Some(stop)) = (
                raw::RedisModule_ZsetLastInScoreRange,
                raw::RedisModule_ZsetRangeCurrentElement,
                raw::RedisModule_ZsetRangePrev,
                raw::RedisModule_ZsetRangeStop,
            ) else {
                return (0, true);
            };
            // An empty range is an error here; after it, ZsetRangePrev says when it ends.
            if last(self.key.ptr, above, f64::INFINITY, 1, 0) != raw::REDISMODULE_OK as c_int {
                return (0, true);
            }
            let mut all = true;
            loop {
                if n >= limit {
                    all = false;
                    break;
                }
                let mut score = 0.0;
                let e = current(self.key.ptr, &mut score);
                if e.is_null() {
                    break;
                }
                let m = Member(e);
                f(m.bytes());
                n = n.saturating_add(1);
                if prev(self.key.ptr) == 0 {
                    break;
                }
            }
            stop(self.key.ptr);
            (n, all)
        }
    }
}

impl Ctx {
    /// ZCOUNT key (above +inf: the members of the sorted set `key` with a score above `above`
    /// (0 for a missing key; WRONGTYPE for another type).
    pub(crate) fn zcount_above(&self, key: &Arg, above: u64) -> Result<u64, Error> {
        let min = std::ffi::CString::new(format!("({above}")).map_err(|_| INTERNAL)?;
        // SAFETY: see the module comment of `host`; the format "scc" consumes one module string
        // and two NUL-terminated C strings, passed in that order; the reply is read while alive
        // and freed once.
        unsafe {
            let call = raw::RedisModule_Call.ok_or(INTERNAL)?;
            let reply = call(
                self.ptr,
                c"ZCOUNT".as_ptr(),
                c"scc".as_ptr(),
                key.ptr,
                min.as_ptr(),
                c"+inf".as_ptr(),
            );
            if reply.is_null() {
                return Err(INTERNAL);
            }
            let kind = raw::RedisModule_CallReplyType.map_or(-1, |f| f(reply));
            let out = if kind == raw::REDISMODULE_REPLY_INTEGER as c_int {
                let n = raw::RedisModule_CallReplyInteger.map_or(0, |f| f(reply));
                Ok(n.unsigned_abs())
            } else {
                Err(crate::error::WRONGTYPE)
            };
            if let Some(free) = raw::RedisModule_FreeCallReply {
                free(reply);
            }
            out
        }
    }
}
