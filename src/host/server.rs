//! What the server is and what imid declared to it: its INFO sections, whether it is Valkey,
//! the module options set at load, and (Valkey 9) atomic slot migration support.

use super::Ctx;
use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

/// One section of the server's own INFO, as `RedisModule_GetServerInfo` parses it; freed on
/// drop. For event callbacks (a fork, a child's exit), never for the hot path: Redis formats
/// the whole section to build it.
pub(crate) struct ServerInfo {
    ptr: *mut raw::RedisModuleServerInfoData,
}

impl ServerInfo {
    /// The section `section` (e.g. `persistence`), or `None` when the API is missing.
    pub(crate) fn read(section: &CStr) -> Option<ServerInfo> {
        // SAFETY: see the module comment. Without a context the data is not tied to automatic
        // memory management; Drop frees it.
        let ptr = unsafe {
            raw::RedisModule_GetServerInfo.map(|f| f(std::ptr::null_mut(), section.as_ptr()))
        }?;
        (!ptr.is_null()).then_some(ServerInfo { ptr })
    }

    /// An integer field, `None` when it is missing or not an integer.
    pub(crate) fn int_field(&self, field: &CStr) -> Option<i64> {
        let mut rc: c_int = 0;
        // SAFETY: see the module comment; the data lives until drop, the field name is
        // NUL-terminated, and `rc` receives the status.
        let v = unsafe {
            raw::RedisModule_ServerInfoGetFieldSigned.map(|f| f(self.ptr, field.as_ptr(), &mut rc))
        }?;
        (rc == raw::REDISMODULE_OK as c_int).then_some(v)
    }

    /// A text field, `None` when it is missing.
    pub(crate) fn text(&self, field: &CStr) -> Option<String> {
        // SAFETY: as in `text_is`.
        unsafe {
            match raw::RedisModule_ServerInfoGetFieldC.map(|f| f(self.ptr, field.as_ptr())) {
                Some(p) if !p.is_null() => Some(CStr::from_ptr(p).to_string_lossy().into_owned()),
                _ => None,
            }
        }
    }

    /// Whether a text field reads exactly `want`.
    pub(crate) fn text_is(&self, field: &CStr, want: &str) -> bool {
        // SAFETY: see the module comment; the returned string belongs to the data (alive until
        // drop) and is NUL-terminated (an sds), or NULL when the field is missing.
        unsafe {
            match raw::RedisModule_ServerInfoGetFieldC.map(|f| f(self.ptr, field.as_ptr())) {
                Some(p) if !p.is_null() => CStr::from_ptr(p).to_bytes() == want.as_bytes(),
                _ => false,
            }
        }
    }
}

impl Drop for ServerInfo {
    fn drop(&mut self) {
        // SAFETY: the data came from GetServerInfo without a context and is freed once, here.
        unsafe {
            if let Some(f) = raw::RedisModule_FreeServerInfo {
                f(std::ptr::null_mut(), self.ptr);
            }
        }
    }
}

/// Whether this server is Valkey (its INFO says `server_name:valkey`). Redis numbers its own
/// module options and events independently of Valkey, so Valkey's numbers are used on Valkey
/// only.
pub(crate) fn is_valkey() -> bool {
    ServerInfo::read(c"server").is_some_and(|i| i.text_is(c"server_name", "valkey"))
}

/// `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (valkeymodule.h, Valkey 9.0+): without
/// it Valkey refuses `CLUSTER MIGRATESLOTS` while imid is loaded ("ERR The module imid does not
/// support atomic slot migrations").
const VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// Valkey's context flag of the client that applies an atomic migration's snapshot and stream
/// on the importing node (`VALKEYMODULE_CTX_FLAGS_SLOT_IMPORT_CLIENT`, Valkey 9.0+).
const VALKEY_CTX_FLAGS_SLOT_IMPORT_CLIENT: c_int = 1 << 25;

/// Whether atomic slot migration support was declared (a Valkey 9 cluster node).
static ASM_DECLARED: AtomicBool = AtomicBool::new(false);

/// Sets the module's options, once, from OnLoad:
/// - `HANDLE_IO_ERRORS`: a truncated or mistyped RDB/DUMP payload makes our loader fail (RESTORE
///   replies an error) instead of Redis aborting the server;
/// - `NO_IMPLICIT_SIGNAL_MODIFIED`: closing a key opened for writing does not signal it modified;
///   every command signals a key it changed itself ([`Ctx::changed`]), so a command can open a
///   key once for writing and still leave a client's WATCH alone when it changes nothing (an
///   IDMP retry);
/// - with `atomic_migration` (a Valkey cluster node), Valkey 9's atomic slot migration support,
///   where the server knows the option ([`atomic_migration_declared`]).
pub(crate) fn set_module_options(ctx: &Ctx, atomic_migration: bool) {
    let mut options = (raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
        | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED) as c_int;
    if atomic_migration {
        // SAFETY: GetModuleOptionsAll takes no arguments (Redis 7.2+, every Valkey); where it
        // is missing nothing is declared.
        let known = unsafe { raw::RedisModule_GetModuleOptionsAll.map_or(0, |f| f()) };
        if known & VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION == 0 {
            ctx.log_notice("imid: this Valkey has no atomic slot migration (Valkey 9.0+)");
        } else {
            ASM_DECLARED.store(true, Ordering::Relaxed);
            options |= VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION;
        }
    }
    // SAFETY: ctx is the live context of OnLoad (the module comment of `host`).
    unsafe {
        if let Some(set_options) = raw::RedisModule_SetModuleOptions {
            set_options(ctx.ptr, options);
        }
    }
}

/// Whether Valkey 9's atomic slot migration support was declared ([`set_module_options`]).
pub(crate) fn atomic_migration_declared() -> bool {
    ASM_DECLARED.load(Ordering::Relaxed)
}

/// Whether this Redis cluster node follows Redis 8.4+'s atomic slot migration (its slot
/// migration event was subscribed to, [`set_redis_atomic_migration`]).
static REDIS_ASM: AtomicBool = AtomicBool::new(false);

/// Records that this Redis cluster node subscribed to Redis's slot migration event (8.4+).
pub(crate) fn set_redis_atomic_migration() {
    REDIS_ASM.store(true, Ordering::Relaxed);
}

/// Whether slots may reach this cluster node by an atomic slot migration (Valkey 9's, declared;
/// Redis 8.4+'s, subscribed to). Such a migration replays the source's writes on the target
/// through a stream of its own that carries no keyless command.
pub(crate) fn atomic_migration_possible() -> bool {
    atomic_migration_declared() || REDIS_ASM.load(Ordering::Relaxed)
}

/// Whether context flags `flags` are those of the atomic migration's import client. Only
/// where support was declared: the bit means something else, or nothing, on other servers.
pub(crate) fn is_import_client(flags: c_int) -> bool {
    atomic_migration_declared() && flags & VALKEY_CTX_FLAGS_SLOT_IMPORT_CLIENT != 0
}

/// The server's version as `(major, minor)`, and whether it is Valkey (then Valkey's own
/// numbers, `valkey_version`); `None` when INFO does not say.
pub(crate) fn version() -> Option<((u32, u32), bool)> {
    let info = ServerInfo::read(c"server")?;
    let valkey = info.text_is(c"server_name", "valkey");
    let text = if valkey {
        info.text(c"valkey_version")
    } else {
        info.text(c"redis_version")
    }?;
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next()??;
    Some(((major, minor), valkey))
}
