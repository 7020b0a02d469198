//! Cluster node IDs and the cluster bus, as imid calls them: this node's ID, a replica's
//! primary, and sending a message to every other node. (Receiving is a callback: `entry`.)

use super::Ctx;
use redis_module::raw;
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
