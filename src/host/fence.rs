//! What the fence (`node::fence`) calls in Redis: block a client until the replicas acknowledge
//! its write and unblock it with what to reply, read the replicas' acknowledged offsets
//! (`ROLE`), ask the replicas to acknowledge now (`REPLCONF GETACK *`), subscribe to the event
//! loop's before-sleep event while clients wait, and arm a one-shot timer.
//!
//! The callbacks Redis calls back (a blocked client's reply and free, the before-sleep event,
//! the timer) are `extern "C"` functions of the top floor (`entry::fence`), which hands
//! them down once at load ([`set_hooks`]): this floor imports nothing above it.
//!
//! Verified on Redis 7.0.15, 8.2.3, 8.6.3 and Valkey 8.0.1, 9.1.2 (a probe module): a
//! `REPLCONF GETACK *` propagated by `RedisModule_Replicate` from an event callback reaches the
//! replicas alone in its execution unit, and each answers with `REPLCONF ACK <offset>` at once,
//! the offset before the GETACK, which `ROLE` then shows as the replica's acknowledged offset.

use super::Ctx;
use redis_module::raw;
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};
use std::sync::OnceLock;

/// The callbacks of the top floor (`entry::fence`).
pub(crate) struct Hooks {
    pub(crate) reply: raw::RedisModuleCmdFunc,
    pub(crate) free: Option<unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void)>,
    pub(crate) before_sleep: raw::RedisModuleEventCallback,
    pub(crate) timer: raw::RedisModuleTimerProc,
    /// The command filter that reads the replicas' `REPLCONF ACK ... FACK ...`.
    pub(crate) replconf: raw::RedisModuleCommandFilterFunc,
}

/// The `REPLCONF` filter is registered ([`Ctx::watch_replconf`]).
static WATCHING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Installs the callbacks (OnLoad, once).
pub(crate) fn set_hooks(h: Hooks) {
    let _ = HOOKS.set(h);
}

/// A client blocked by [`Ctx::block`], until [`Blocked::unblock`] (which must be called exactly
/// once for each, also when its client disconnected: Redis frees the handle only then).
pub(crate) struct Blocked(*mut raw::RedisModuleBlockedClient);

// SAFETY: a handle is made and kept on Redis's main thread (commands, events and timers all
// run there), where the Mutex holding the handles needs `Send` to be a static; the one handle
// used elsewhere is FENCE.FORGET's, unblocked from its probe's thread, which
// `RedisModule_UnblockClient` allows (it is thread-safe by contract).
unsafe impl Send for Blocked {}

impl Blocked {
    /// Unblocks the client: Redis calls the reply callback with `payload` (unless the client is
    /// gone: disconnected, killed, or unblocked by Redis itself, as a primary turned replica
    /// does with every blocked client), then the free callback, which drops it.
    pub(crate) fn unblock<T>(self, payload: Box<T>) {
        let p = Box::into_raw(payload).cast::<c_void>();
        // SAFETY: the handle came from BlockClient and is unblocked once (self is consumed);
        // UnblockClient takes the pointer as privdata, handed to the free callback, which
        // rebuilds the Box of the same type (`entry::fence`).
        unsafe {
            if let Some(f) = raw::RedisModule_UnblockClient {
                f(self.0, p);
            }
        }
    }
}

/// A primary's replication state, as `ROLE` shows it.
pub(crate) struct Role {
    /// `master_repl_offset`: every write propagated so far lies at or below it.
    pub(crate) offset: u64,
    /// Each online replica: `ip:port` as it announces itself, and its acknowledged offset.
    pub(crate) replicas: Vec<(String, u64)>,
}

impl Ctx {
    /// Whether this call may block its client: not inside MULTI/EXEC, a Lua script, a function
    /// or another module's `RedisModule_Call` (Redis 6.2+ says so with `DENY_BLOCKING`).
    pub(crate) fn can_block(&self) -> bool {
        let deny = (raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING
            | raw::REDISMODULE_CTX_FLAGS_MULTI
            | raw::REDISMODULE_CTX_FLAGS_LUA) as c_int;
        self.flags() & deny == 0
    }

    /// Blocks the calling client (only it: the server goes on) until [`Blocked::unblock`], with
    /// the callbacks of [`set_hooks`]. `None` when Redis refused (no hooks, or a context that
    /// cannot block: see [`Ctx::can_block`]).
    ///
    /// With no timeout and no timeout callback: the caller keeps the deadline and unblocks the
    /// client itself, so that one path alone answers it. With a Redis timeout too, Redis 7.0
    /// loses the reply when the module unblocks a client whose timeout falls due before the
    /// event loop hands the unblock over (`handleBlockedClientsTimeout` runs first in
    /// `beforeSleep`, skips its own callback because the client is marked unblocked, and
    /// detaches the client, so `moduleHandleBlockedClients` calls no reply callback either):
    /// the client's next command then gets the first reply, every later one its predecessor's.
    /// Without a timeout callback `CLIENT UNBLOCK` also refuses such a client (it answers 0).
    pub(crate) fn block(&self) -> Option<Blocked> {
        let h = HOOKS.get()?;
        // SAFETY: see the module comment of `host`; the callbacks match the C signatures and
        // live as long as the module; a NULL timeout callback and a 0 timeout are documented
        // (no timeout).
        let bc = unsafe { raw::RedisModule_BlockClient?(self.ptr, h.reply, None, h.free, 0) };
        (!bc.is_null()).then_some(Blocked(bc))
    }

    /// In a blocked client's reply callback: the payload [`Blocked::unblock`] passed.
    pub(crate) fn blocked_payload<T>(&self) -> Option<&T> {
        // SAFETY: see the module comment of `host`; the pointer is the Box of `T` that unblock
        // made (one payload type per module: `entry::fence`), alive until the free callback,
        // which runs after the reply callback.
        unsafe {
            let p = raw::RedisModule_GetBlockedClientPrivateData?(self.ptr);
            p.cast::<T>().as_ref()
        }
    }

    /// `ROLE` on a primary: its offset and its online replicas' acknowledged offsets; `None`
    /// on a replica (or should the reply not parse).
    pub(crate) fn role(&self) -> Option<Role> {
        // SAFETY: see the module comment of `host`; the format "" passes no argument; every
        // reply read below belongs to the top reply, which is freed once, at the end.
        unsafe {
            let reply = raw::RedisModule_Call?(self.ptr, c"ROLE".as_ptr(), c"".as_ptr());
            if reply.is_null() {
                return None;
            }
            let role = parse_role(reply);
            if let Some(free) = raw::RedisModule_FreeCallReply {
                free(reply);
            }
            role
        }
    }

    /// Asks every replica to acknowledge its offset now (`REPLCONF GETACK *`, replicas only,
    /// not the AOF: what Redis sends itself for WAIT). Only outside a command (an event or a
    /// timer), where it is the one write of its execution unit, and never while writes are
    /// paused (Redis aborts on anything propagated then).
    pub(crate) fn request_acks(&self) {
        if self.writes_paused() {
            return;
        }
        // SAFETY: see the module comment of `host`; "Acc": no AOF, then two C strings, both
        // passed. REPLCONF is a command of every server, so Replicate finds it.
        unsafe {
            if let Some(f) = raw::RedisModule_Replicate {
                f(
                    self.ptr,
                    c"REPLCONF".as_ptr(),
                    c"Acc".as_ptr(),
                    c"GETACK".as_ptr(),
                    c"*".as_ptr(),
                );
            }
        }
    }

    /// Subscribes to (or, `on` false, unsubscribes from) the event loop's events with the
    /// before-sleep hook. Never unsubscribe from inside a server event's callback: Redis 7.0
    /// walks its list of listeners then, and would read the freed one.
    pub(crate) fn subscribe_before_sleep(&self, on: bool) -> bool {
        let Some(h) = HOOKS.get() else {
            return false;
        };
        let event = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_EVENTLOOP,
            dataver: 1,
        };
        // SAFETY: see the module comment of `host`; the callback matches the C signature and
        // lives as long as the module.
        let rc = unsafe {
            raw::RedisModule_SubscribeToServerEvent
                .map(|f| f(self.ptr, event, if on { h.before_sleep } else { None }))
        };
        rc == Some(raw::REDISMODULE_OK as c_int)
    }

    /// Registers the command filter of [`set_hooks`] that reads what replicas report fsynced,
    /// once (from then on every command passes through it: a byte compared).
    pub(crate) fn watch_replconf(&self) {
        let Some(h) = HOOKS.get() else {
            return;
        };
        if WATCHING.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        // SAFETY: see the module comment of `host`; the callback matches the C signature and
        // lives as long as the module.
        unsafe {
            if let Some(f) = raw::RedisModule_RegisterCommandFilter {
                f(
                    self.ptr,
                    h.replconf,
                    raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
                );
            }
        }
    }

    /// Arms a one-shot timer of [`set_hooks`] to fire in `ms` (0: at the end of this event
    /// loop iteration); its callback is told `which`.
    pub(crate) fn arm_timer(&self, ms: u64, which: Timer) -> bool {
        let Some(h) = HOOKS.get() else {
            return false;
        };
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        // SAFETY: see the module comment of `host`; the callback matches and lives as long as
        // the module; the data is a tag, never dereferenced (`Timer::of`).
        unsafe {
            raw::RedisModule_CreateTimer
                .map(|f| f(self.ptr, ms, h.timer, which.tag()))
                .is_some()
        }
    }
}

/// Which of the gate's one-shot timers fired: the round at the end of an iteration, the one
/// armed for the earliest deadline of a waiting call, or the start of an fsync of the AOF
/// (`node::durable`), armed in one iteration to run after its AOF write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    Round,
    Deadline,
    Fsync,
}

impl Timer {
    /// The timer's data: a tag, not a pointer to anything.
    fn tag(self) -> *mut c_void {
        match self {
            Timer::Round => std::ptr::null_mut(),
            Timer::Deadline => std::ptr::without_provenance_mut(1),
            Timer::Fsync => std::ptr::without_provenance_mut(2),
        }
    }

    /// The timer whose data is `data` (what [`Ctx::arm_timer`] passed).
    pub(crate) fn of(data: *mut c_void) -> Timer {
        match data as usize {
            0 => Timer::Round,
            1 => Timer::Deadline,
            _ => Timer::Fsync,
        }
    }
}

/// Element `i` of an array reply.
///
/// # Safety
/// `r` must be a live call reply.
unsafe fn element(
    r: *mut raw::RedisModuleCallReply,
    i: usize,
) -> Option<*mut raw::RedisModuleCallReply> {
    // SAFETY: per the contract; elements live as long as the top reply.
    unsafe {
        if raw::RedisModule_CallReplyType?(r) != raw::REDISMODULE_REPLY_ARRAY as c_int
            || raw::RedisModule_CallReplyLength?(r) <= i
        {
            return None;
        }
        let e = raw::RedisModule_CallReplyArrayElement?(r, i);
        (!e.is_null()).then_some(e)
    }
}

/// The bytes of a string reply.
///
/// # Safety
/// `r` must be a live call reply.
unsafe fn text<'a>(r: *mut raw::RedisModuleCallReply) -> Option<&'a [u8]> {
    // SAFETY: per the contract; the bytes live as long as the reply.
    unsafe {
        if raw::RedisModule_CallReplyType?(r) != raw::REDISMODULE_REPLY_STRING as c_int {
            return None;
        }
        let mut len = 0usize;
        let p: *const c_char = raw::RedisModule_CallReplyStringPtr?(r, &mut len);
        (!p.is_null()).then(|| std::slice::from_raw_parts(p.cast::<u8>(), len))
    }
}

/// An integer reply, or a string reply holding a decimal integer (ROLE gives replicas' offsets
/// as strings).
///
/// # Safety
/// `r` must be a live call reply.
unsafe fn text_int(r: *mut raw::RedisModuleCallReply) -> Option<i64> {
    // SAFETY: per the contract.
    unsafe {
        if raw::RedisModule_CallReplyType?(r) == raw::REDISMODULE_REPLY_INTEGER as c_int {
            return raw::RedisModule_CallReplyInteger.map(|f| f(r));
        }
        std::str::from_utf8(text(r)?).ok()?.parse().ok()
    }
}

/// `["master", offset, [[ip, port, acked offset], ...]]`.
///
/// # Safety
/// `reply` must be a live call reply.
unsafe fn parse_role(reply: *mut raw::RedisModuleCallReply) -> Option<Role> {
    // SAFETY: per the contract; every element read belongs to `reply`.
    unsafe {
        if text(element(reply, 0)?)? != b"master" {
            return None;
        }
        let offset = u64::try_from(text_int(element(reply, 1)?)?).ok()?;
        let list = element(reply, 2)?;
        let n = raw::RedisModule_CallReplyLength?(list);
        let mut replicas = Vec::with_capacity(n);
        for i in 0..n {
            let Some(r) = element(list, i) else { continue };
            let ip = element(r, 0).and_then(|e| text(e));
            let port = element(r, 1).and_then(|e| text_int(e));
            let ack = element(r, 2)
                .and_then(|e| text_int(e))
                .and_then(|v| u64::try_from(v).ok());
            if let (Some(ip), Some(port), Some(ack)) = (ip, port, ack) {
                replicas.push((format!("{}:{port}", String::from_utf8_lossy(ip)), ack));
            }
        }
        Some(Role { offset, replicas })
    }
}
