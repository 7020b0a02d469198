//! How commands reach Redis: one table entry per command (name, handler, flags, ACL categories,
//! arity, keys, summary), registered with `RedisModule_CreateCommand`, `RedisModule_SetCommandInfo`
//! and `RedisModule_SetCommandACLCategories`; each entry's C entry point calls the handler through
//! `entry::call`.
//!
//! Why not the `redis_module!` command table: its wrapper copies and retains every argument and
//! knows nothing of arity or key specs, which then lived in a second table. Here one entry says
//! everything about a command.
//! Key-spec flags matter beyond documentation: ACL key selectors (`%R~`, `%W~`) judge commands
//! by them, and Redis Cluster routes and redirects by them.

use crate::host::Ctx;
use redis_module::raw;
use std::ffi::CString;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

/// The C entry point Redis calls for a command.
pub(crate) type RawHandler =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Where a command's keys are: arguments `first` to `last` (negative: from the end), step 1.
pub(crate) struct Keys {
    pub(crate) first: i32,
    pub(crate) last: i32,
    pub(crate) flags: u32,
}

pub(crate) const RO_ACCESS: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
pub(crate) const RW_ACCESS_UPDATE: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE;
pub(crate) const OW_UPDATE: u32 = raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE;
pub(crate) const RW_DELETE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE;

/// `LIMIT seqkey`, searched from argument `from`: a sequence read for its value.
pub(crate) const fn limit_key(from: i32) -> Option<KeywordKey> {
    Some(KeywordKey {
        keyword: c"LIMIT",
        from,
        flags: RO_ACCESS,
    })
}
/// MSGID.GEN's target: declared so that cluster clients route it and cluster nodes enforce that
/// routing (MOVED), which per-slot uniqueness relies on; it is neither read nor written. Not
/// NOT_KEY: Redis Cluster ignores NOT_KEY keys when it checks where a command belongs.
pub(crate) const ROUTING_ONLY: u32 = raw::REDISMODULE_CMD_KEY_RO;

/// Keys from argument `first` to `last` (0: just `first`; negative: from the end).
pub(crate) const fn keys(first: i32, last: i32, flags: u32) -> Option<Keys> {
    Some(Keys { first, last, flags })
}

/// An optional key that follows a keyword (`LIMIT seqkey`), searched from argument `from` on:
/// a second key spec, so that Cluster checks its slot, ACL key patterns apply and COMMAND
/// GETKEYS lists it. Redis derives the legacy key range from the specs and marks the command
/// `movablekeys`.
pub(crate) struct KeywordKey {
    pub(crate) keyword: &'static std::ffi::CStr,
    pub(crate) from: i32,
    pub(crate) flags: u32,
}

/// A key spec of a command whose keys a single range and a keyword key cannot describe (IM.SEND:
/// a tag, a sequence, then inbox/trimmed pairs with flags of their own): from argument `index`
/// to `last` (relative to `index` when positive or 0, from the end when negative), every `step`-th.
/// A command with such specs also answers Redis's keys position requests (`getkeys-api`), which
/// Redis 7.0's Cluster asks instead of reading specs with a step above 1.
pub(crate) struct Spec {
    pub(crate) index: i32,
    pub(crate) last: i32,
    pub(crate) step: i32,
    pub(crate) flags: u32,
    /// With `last` -1: the keys are the first 1/`limit` of the arguments from `index` on (0 or
    /// 1: all of them), as IM.PULL's logs are the first third of what follows its two maps.
    pub(crate) limit: i32,
}

/// IM.SEND's keys (`prefix` 0) and IM.SENDSET's (after its one argument of values): the
/// conversation's tag (routing only, as MSGID.GEN's target), its sequence (read and written, as
/// SEQ.NEXT's), then per recipient an inbox (a sorted set changed in place, `update`: a member
/// inserted and the oldest deleted beyond the cap, Redis allowing one of insert/delete/update per
/// spec; on a retry read back, `access`, where the reply carries it) and a trimmed marker (a
/// sequence raised, never returned). The pairs end 5 arguments before the last.
pub(crate) const fn send_specs(prefix: i32, inbox_access: bool) -> [Spec; 4] {
    let access = if inbox_access {
        raw::REDISMODULE_CMD_KEY_ACCESS
    } else {
        0
    };
    [
        Spec {
            index: 1 + prefix,
            last: 0,
            step: 1,
            flags: ROUTING_ONLY,
            limit: 0,
        },
        Spec {
            index: 2 + prefix,
            last: 0,
            step: 1,
            flags: RW_ACCESS_UPDATE,
            limit: 0,
        },
        Spec {
            index: 3 + prefix,
            last: -7,
            step: 2,
            flags: raw::REDISMODULE_CMD_KEY_RW | access | raw::REDISMODULE_CMD_KEY_UPDATE,
            limit: 0,
        },
        Spec {
            index: 4 + prefix,
            last: -6,
            step: 2,
            flags: raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
            limit: 0,
        },
    ]
}
pub(crate) const IM_SEND_SPECS: &[Spec] = &send_specs(0, true);
pub(crate) const IM_SENDSET_SPECS: &[Spec] = &send_specs(1, false);

/// Keys `index..=index+count-1`, with `flags`.
const fn spec(index: i32, count: i32, flags: u32) -> Spec {
    Spec {
        index,
        last: count - 1,
        step: 1,
        flags,
        limit: 0,
    }
}
const RW_UPDATE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;
/// IM.SYNC: the sequence, the inbox and the trimmed marker, read. (Not `keys(1, 3, ..)`: a key
/// spec's last key counts from its first, the legacy range's from the command name.)
pub(crate) const IM_SYNC_SPECS: &[Spec] = &[spec(1, 3, RO_ACCESS)];
/// IM.READ: the read map (its field raised and returned), then the inbox and the sequence, read.
pub(crate) const IM_READ_SPECS: &[Spec] = &[spec(1, 1, RW_ACCESS_UPDATE), spec(2, 2, RO_ACCESS)];
/// IM.CHANGE (`prefix` 0) and IM.CHANGESET (after its seq): the sequences map (a field raised
/// and returned), then the trimmed map and the log (changed, never returned).
pub(crate) const fn change_specs(prefix: i32) -> [Spec; 2] {
    [
        spec(1 + prefix, 1, RW_ACCESS_UPDATE),
        spec(2 + prefix, 2, RW_UPDATE),
    ]
}
pub(crate) const IM_CHANGE_SPECS: &[Spec] = &change_specs(0);
pub(crate) const IM_CHANGESET_SPECS: &[Spec] = &change_specs(1);
/// IM.PULL: the two maps, then the logs, the first third of the arguments after them.
pub(crate) const IM_PULL_SPECS: &[Spec] = &[
    spec(1, 2, RO_ACCESS),
    Spec {
        index: 3,
        last: -1,
        step: 1,
        flags: RO_ACCESS,
        limit: 3,
    },
];

/// Most [`Spec`]s one command may have.
const MAX_SPECS: usize = 4;

pub(crate) struct Command {
    pub(crate) name: &'static str,
    pub(crate) handler: RawHandler,
    pub(crate) flags: &'static str,
    /// ACL categories (`write`, `read`, `fast`, ...), where the server has them (Redis 7.2+,
    /// Valkey); the module's own category `imid` is added where the server allows that.
    pub(crate) acl: &'static str,
    /// Negative: at least |arity| arguments, the command name included, as in Redis.
    pub(crate) arity: i32,
    pub(crate) keys: Option<Keys>,
    pub(crate) summary: &'static str,
    pub(crate) keyword_key: Option<KeywordKey>,
    /// Key specs in place of `keys` and `keyword_key` (empty for every other command).
    pub(crate) specs: &'static [Spec],
}

/// A table entry: `command!(name, handler path, flags, acl categories, arity, keys, summary)`.
macro_rules! command {
    ($name:literal, $handler:path, $flags:literal, $acl:literal, $arity:expr, specs = $specs:expr, $summary:literal) => {
        $crate::entry::registry::command!(@make
            $name, $handler, $flags, $acl, $arity, None, $summary, None, $specs
        )
    };
    ($name:literal, $handler:path, $flags:literal, $acl:literal, $arity:expr, $keys:expr, $summary:literal) => {
        $crate::entry::registry::command!(
            $name, $handler, $flags, $acl, $arity, $keys, $summary, None
        )
    };
    ($name:literal, $handler:path, $flags:literal, $acl:literal, $arity:expr, $keys:expr, $summary:literal, $kw:expr) => {
        $crate::entry::registry::command!(@make
            $name, $handler, $flags, $acl, $arity, $keys, $summary, $kw, &[]
        )
    };
    (@make $name:literal, $handler:path, $flags:literal, $acl:literal, $arity:expr, $keys:expr, $summary:literal, $kw:expr, $specs:expr) => {
        $crate::entry::registry::Command {
            name: $name,
            handler: {
                extern "C" fn call(
                    ctx: *mut redis_module::raw::RedisModuleCtx,
                    argv: *mut *mut redis_module::raw::RedisModuleString,
                    argc: std::os::raw::c_int,
                ) -> std::os::raw::c_int {
                    $crate::entry::call(ctx, argv, argc, $handler)
                }
                call
            },
            flags: $flags,
            acl: $acl,
            arity: $arity,
            keys: $keys,
            summary: $summary,
            keyword_key: $kw,
            specs: $specs,
        }
    };
}

pub(crate) use command;

/// The crate version, NUL-terminated, for COMMAND DOCS `since`.
const SINCE: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
) {
    Ok(s) => s,
    Err(_) => c"0.0.0",
};

const INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// The module's own ACL category: `ACL CAT imid` lists every imid command, and `-@imid` /
/// `+@imid` deny or grant them all.
pub(crate) const MODULE_CATEGORY: &str = "imid";

/// Whether [`MODULE_CATEGORY`] was added on this server (set once, in OnLoad).
static HAVE_MODULE_CATEGORY: AtomicBool = AtomicBool::new(false);
/// Whether adding it was refused: the name exists already. Redis 8.2 keeps the category of a
/// module it unloaded (after a `MODULE LOADEX` config it could not apply), so the next load of
/// imid finds its own category taken; the commands then join it where the server accepts
/// that, so that ACL rules on `@imid` keep applying to them.
static MODULE_CATEGORY_TAKEN: AtomicBool = AtomicBool::new(false);

/// Adds [`MODULE_CATEGORY`] where the server can (`RedisModule_AddACLCategory`: Redis 7.4+).
/// Without it the commands still get the server's categories (Redis 7.2+, Valkey), just not
/// their own. Call once in OnLoad, before [`register`].
pub(crate) fn add_module_category(ctx: &Ctx) {
    let Ok(name) = CString::new(MODULE_CATEGORY) else {
        return;
    };
    // SAFETY: ctx.raw() is the live OnLoad context; the name is NUL-terminated and copied.
    let rc = unsafe { raw::RedisModule_AddACLCategory.map(|add| add(ctx.raw(), name.as_ptr())) };
    match rc {
        Some(rc) if rc == raw::REDISMODULE_OK as c_int => {
            HAVE_MODULE_CATEGORY.store(true, Ordering::Relaxed);
        }
        Some(_) => {
            MODULE_CATEGORY_TAKEN.store(true, Ordering::Relaxed);
            ctx.log_warning(&format!(
                "imid: the ACL category '{MODULE_CATEGORY}' exists already (left by an earlier load of imid?); commands join it where the server allows, else keep their other categories"
            ));
        }
        None => {}
    }
}

/// Registers every command of `table` with its flags, legacy key range, arity, summary and key
/// spec (Redis 7.0+ for the latter) and ACL categories (Redis 7.2+ and Valkey; Redis 7.0 has no
/// API for them, and there module commands belong to no category).
pub(crate) fn register(ctx: &Ctx, table: &[Command]) -> bool {
    for c in table {
        if register_one(ctx, c).is_err() {
            ctx.log_warning(&format!("imid: could not register command {}", c.name));
            return false;
        }
    }
    true
}

fn register_one(ctx: &Ctx, c: &Command) -> Result<(), ()> {
    let name = CString::new(c.name).map_err(|_| ())?;
    let cmd = create(ctx, c, &name)?;
    let summary = CString::new(c.summary).map_err(|_| ())?;
    // SAFETY: zeroed is the documented "unset" value for every optional field of these structs
    // (null pointers, zero counts) and a zeroed key spec terminates the array; all strings and
    // the array outlive the call, which copies them.
    let mut info: raw::RedisModuleCommandInfo = unsafe { std::mem::zeroed() };
    let mut specs = [no_spec(); MAX_SPECS + 1];
    info.version = &INFO_VERSION;
    info.summary = summary.as_ptr();
    info.since = SINCE.as_ptr();
    info.arity = c.arity;
    if let Some(k) = &c.keys {
        specs[0] = range_spec(k.flags, k.first, k.last, 1);
        if let Some(kw) = &c.keyword_key {
            specs[1] = keyword_spec(kw);
        }
        info.key_specs = specs.as_mut_ptr();
    }
    if !c.specs.is_empty() {
        if c.specs.len() > MAX_SPECS {
            return Err(());
        }
        for (out, s) in specs.iter_mut().zip(c.specs) {
            *out = range_spec(s.flags, s.index, s.last, s.step);
            out.fk.range.limit = s.limit;
        }
        info.key_specs = specs.as_mut_ptr();
    }
    // SAFETY: cmd came from GetCommand for a command of this module; info is fully set.
    let rc = unsafe { raw::RedisModule_SetCommandInfo.map(|set| set(cmd, &info)) };
    if rc != Some(raw::REDISMODULE_OK as c_int) {
        return Err(());
    }
    set_acl_categories(cmd, c.acl)
}

/// Creates the command `name` with its handler, flags and legacy key range; the new command.
fn create(
    ctx: &Ctx,
    c: &Command,
    name: &std::ffi::CStr,
) -> Result<*mut raw::RedisModuleCommand, ()> {
    // A keyword key is also reported through the getkeys API (the handler answers
    // `Ctx::keys_position_request`): Redis 7.0's Cluster checks the slots of only the keys
    // that API or the legacy range gives, not those of the key specs.
    let flags = if c.keyword_key.is_some() || !c.specs.is_empty() {
        CString::new(format!("{} getkeys-api", c.flags))
    } else {
        CString::new(c.flags)
    }
    .map_err(|_| ())?;
    let (first, last) = c.keys.as_ref().map_or((0, 0), |k| {
        // The legacy range takes an absolute last key, or negative from the end; 0 in a key
        // spec means "the same as first".
        (k.first, if k.last == 0 { k.first } else { k.last })
    });
    let step = i32::from(c.keys.is_some());
    // With specs of their own, the first key for the legacy range; Redis derives the range the
    // specs allow (and `movablekeys`) when they are set.
    let (first, last, step) = match c.specs.first() {
        Some(s) => (s.index, s.index, 1),
        None => (first, last, step),
    };
    // SAFETY: ctx.raw() is the live OnLoad context; name and flags are NUL-terminated and copied
    // by Redis; the handler is a valid extern "C" function for the life of the module.
    let rc = unsafe {
        raw::RedisModule_CreateCommand.map(|create| {
            create(
                ctx.raw(),
                name.as_ptr(),
                Some(c.handler),
                flags.as_ptr(),
                first,
                last,
                step,
            )
        })
    };
    if rc != Some(raw::REDISMODULE_OK as c_int) {
        return Err(());
    }
    // SAFETY: as above; GetCommand returns the command just created, or null.
    unsafe { raw::RedisModule_GetCommand.map(|get| get(ctx.raw(), name.as_ptr())) }
        .filter(|p| !p.is_null())
        .ok_or(())
}

/// An unset key spec (it also ends the array).
fn no_spec() -> raw::RedisModuleCommandKeySpec {
    // SAFETY: zeroed is the documented "unset" value for every field of a key spec.
    unsafe { std::mem::zeroed() }
}

/// A key spec: the key at argument `pos`, then keys up to `lastkey` every `keystep`.
fn range_spec(flags: u32, pos: i32, lastkey: i32, keystep: i32) -> raw::RedisModuleCommandKeySpec {
    let mut s = no_spec();
    s.flags = u64::from(flags);
    s.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    s.bs.index.pos = pos;
    s.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    s.fk.range.lastkey = lastkey;
    s.fk.range.keystep = keystep;
    s.fk.range.limit = 0;
    s
}

/// A key spec: the one key after `kw.keyword`, searched from argument `kw.from`.
fn keyword_spec(kw: &KeywordKey) -> raw::RedisModuleCommandKeySpec {
    let mut s = range_spec(kw.flags, 0, 0, 1);
    s.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
    s.bs.keyword.keyword = kw.keyword.as_ptr();
    s.bs.keyword.startfrom = kw.from;
    s
}

/// Gives a command its ACL categories, plus the module's own where it exists. Without them
/// `-@write` would not deny a module command at all. Absent on Redis 7.0 (nothing to do: the
/// docs/access-control.md says how to deny commands by name there); refused categories fail the
/// load, rather than leave write commands open to users denied `@write`.
fn set_acl_categories(cmd: *mut raw::RedisModuleCommand, acl: &str) -> Result<(), ()> {
    // SAFETY: reading a function pointer filled in once at load.
    let Some(set) = (unsafe { raw::RedisModule_SetCommandACLCategories }) else {
        return Ok(());
    };
    if acl.is_empty() {
        return Ok(());
    }
    let set_to = |categories: String| -> Result<(), ()> {
        let categories = CString::new(categories).map_err(|_| ())?;
        // SAFETY: cmd came from GetCommand for a command of this module; the string is
        // NUL-terminated and parsed, not kept, by Redis.
        let rc = unsafe { set(cmd, categories.as_ptr()) };
        (rc == raw::REDISMODULE_OK as c_int).then_some(()).ok_or(())
    };
    if HAVE_MODULE_CATEGORY.load(Ordering::Relaxed) {
        set_to(format!("{acl} {MODULE_CATEGORY}"))
    } else if MODULE_CATEGORY_TAKEN.load(Ordering::Relaxed) {
        set_to(format!("{acl} {MODULE_CATEGORY}")).or_else(|()| set_to(acl.to_owned()))
    } else {
        set_to(acl.to_owned())
    }
}
