//! Cluster node IDs and the cluster bus, as imid calls them: this node's ID, a replica's
//! primary, and sending a message to every other node (receiving is a callback: `entry`); and
//! the commands a node sends along with a Redis 8.4+ atomic slot migration it is the source of
//! (replicated with a key of a migrating slot, or handed to the migration before its snapshot).

use super::Ctx;
use redis_module::raw;
use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int};

/// The length of a cluster node ID (`REDISMODULE_NODE_ID_LEN`).
pub(crate) const NODE_ID_LEN: usize = raw::REDISMODULE_NODE_ID_LEN as usize;

/// A cluster node ID.
pub(crate) type NodeId = [u8; NODE_ID_LEN];

/// This node's cluster ID (40 bytes), or `None` outside cluster mode. Needs no context, so the
/// command filter can compare a `SETSLOT ... NODE <id>` with it.
pub(crate) fn my_cluster_id() -> Option<NodeId> {
    // SAFETY: see the module comment; the server returns a pointer to its own 40-byte ID (not
    // NUL-terminated), valid while the server runs, or NULL outside cluster mode.
    unsafe {
        let p = raw::RedisModule_GetMyClusterID?();
        if p.is_null() {
            return None;
        }
        let b = std::slice::from_raw_parts(p.cast::<u8>(), NODE_ID_LEN);
        NodeId::try_from(b).ok()
    }
}

impl Ctx {
    /// In cluster mode, on a replica: its primary's node ID (`None` on a primary, or when the
    /// server does not say).
    pub(crate) fn cluster_primary(&self) -> Option<NodeId> {
        let me = my_cluster_id()?;
        // The server looks the node up with strlen: a NUL-terminated copy of the ID.
        let mut id = [0u8; NODE_ID_LEN + 1];
        if let Some(head) = id.get_mut(..NODE_ID_LEN) {
            head.copy_from_slice(&me);
        }
        let mut master = [0u8; NODE_ID_LEN + 1];
        let mut flags: c_int = 0;
        // SAFETY: see the module comment; `id` is NUL-terminated; master_id receives at most
        // REDISMODULE_NODE_ID_LEN (40) bytes into a 41-byte buffer; ip and port may be null.
        let rc = unsafe {
            raw::RedisModule_GetClusterNodeInfo.map(|f| {
                f(
                    self.ptr,
                    id.as_ptr().cast::<c_char>(),
                    std::ptr::null_mut(),
                    master.as_mut_ptr().cast::<c_char>(),
                    std::ptr::null_mut(),
                    &mut flags,
                )
            })
        };
        if rc != Some(raw::REDISMODULE_OK as c_int)
            || flags & raw::REDISMODULE_NODE_MASTER as c_int != 0
        {
            return None;
        }
        let id = master
            .get(..NODE_ID_LEN)
            .and_then(|b| NodeId::try_from(b).ok())?;
        (id != [0u8; NODE_ID_LEN]).then_some(id)
    }

    /// Sends `payload` as a cluster bus message of type `kind` to every other node (Redis copies
    /// it). Outside cluster mode the call fails harmlessly.
    pub(crate) fn send_cluster_message(&self, kind: u8, payload: &[u8]) {
        let len = u32::try_from(payload.len()).unwrap_or(0);
        // SAFETY: see the module comment of `host`; a null target means every node.
        unsafe {
            if let Some(f) = raw::RedisModule_SendClusterMessage {
                f(
                    self.ptr,
                    std::ptr::null(),
                    kind,
                    payload.as_ptr().cast::<c_char>(),
                    len,
                );
            }
        }
    }
}

/// `RedisModule_Replicate`'s signature, which `RedisModule_ClusterPropagateForSlotMigration`
/// (Redis 8.4+, looked up by name: the `redis-module` crate's header predates it) shares.
type SlotCommand =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, *const c_char, *const c_char, ...) -> c_int;

/// A key name in hash slot `slot` (`RedisModule_ClusterCanonicalKeyNameInSlot`): a short string
/// the server keeps for good; `None` where the server does not have the call.
fn key_in_slot(slot: u16) -> Option<&'static CStr> {
    // SAFETY: see the module comment of `host`; the server returns a pointer into a static
    // table of NUL-terminated strings, or NULL for a slot past 16383.
    unsafe {
        let p = raw::RedisModule_ClusterCanonicalKeyNameInSlot?(u32::from(slot));
        (!p.is_null()).then(|| CStr::from_ptr(p))
    }
}

impl Ctx {
    /// Replicates `cmd <a key of slot> <node> <a> <b>` to replicas and the AOF, and, while this
    /// node is the source of a Redis 8.4+ atomic slot migration of `slot`, into the migration's
    /// stream to the target (Redis forwards what a node replicates with a key of a migrating
    /// slot; it drops commands without a key). False where the server cannot name a key of the
    /// slot.
    pub(crate) fn replicate_in_slot(
        &self,
        cmd: &CStr,
        slot: u16,
        node: &NodeId,
        ints: [i64; 2],
    ) -> bool {
        // SAFETY: reading a function pointer filled in once at load.
        let f = unsafe { raw::RedisModule_Replicate };
        match (f, key_in_slot(slot)) {
            (Some(f), Some(key)) => {
                self.in_slot(f, cmd, key, node, ints) == raw::REDISMODULE_OK as c_int
            }
            _ => false,
        }
    }

    /// Hands `cmd <a key of slot> <node> <a> <b>` to a Redis 8.4+ atomic slot migration, which
    /// sends it to the target before the slots' keys. Only in the fork child that writes the
    /// migration's snapshot, during the event that asks for such commands (Redis refuses it
    /// elsewhere). The error says why not (Redis's errno).
    pub(crate) fn propagate_for_slot_migration(
        &self,
        cmd: &CStr,
        slot: u16,
        node: &NodeId,
        ints: [i64; 2],
    ) -> Result<(), String> {
        let key = key_in_slot(slot).ok_or("the server names no key of the slot")?;
        let mut f: Option<SlotCommand> = None;
        // SAFETY: see the module comment of `host`; GetApi writes the function's address (or
        // nothing) into a pointer-sized slot, which `Option<fn>` is.
        unsafe {
            let get = raw::RedisModule_GetApi.ok_or("no RedisModule_GetApi")?;
            get(
                c"RedisModule_ClusterPropagateForSlotMigration".as_ptr(),
                (&raw mut f).cast::<c_void>(),
            );
        }
        let f = f.ok_or("the server has no RedisModule_ClusterPropagateForSlotMigration")?;
        if self.in_slot(f, cmd, key, node, ints) == raw::REDISMODULE_OK as c_int {
            Ok(())
        } else {
            Err(format!(
                "RedisModule_ClusterPropagateForSlotMigration: {}",
                std::io::Error::last_os_error()
            ))
        }
    }

    /// `f(ctx, cmd, "cbll", key, node, a, b)`: `cmd <key> <node> <a> <b>`, through
    /// `RedisModule_Replicate` or `RedisModule_ClusterPropagateForSlotMigration`.
    fn in_slot(
        &self,
        f: SlotCommand,
        cmd: &CStr,
        key: &CStr,
        node: &NodeId,
        [a, b]: [i64; 2],
    ) -> c_int {
        // SAFETY: see the module comment of `host`; "cbll" consumes one NUL-terminated string, a
        // buffer with its length (size_t) and two long longs, all passed in that order.
        unsafe {
            f(
                self.ptr,
                cmd.as_ptr(),
                c"cbll".as_ptr(),
                key.as_ptr(),
                node.as_ptr().cast::<c_char>(),
                node.len(),
                a,
                b,
            )
        }
    }
}
