//! imid: identifiers for instant-messaging backends, natively inside Redis.
//!
//! This file is the table of contents: the module, its commands, and init. The layers, from the
//! bottom (docs/architecture.md draws them; each imports only from layers below it):
//! - `error`: the error a handler returns;
//! - `core`: Redis-free logic (ID layouts, generators, sequences, maps, IDMP, the reserve
//!   protocol, the fence's bookkeeping), unit-tested without a server;
//! - `host`: what imid calls in Redis (context, arguments, keys, replies, replication, RDB/AOF
//!   handles), unsafe; `config`: the `imid.*` configs' values and rules;
//! - `node`: node-wide state (ID generators and leases, the IDMP clock, slot adoption, server
//!   events, exposure, the fence); `types`: the two data types, a folder each;
//! - `handout`: everything a command hands out (IDs, reserved values, inbox delivery, the runner
//!   in front of the gate); `args`: shared argument rules; `commands`: one file per family;
//! - `entry`: where Redis calls in (every callback, behind one panic guard; registration), unsafe.
#![deny(unreachable_pub)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

mod args;
mod commands;
mod config;
pub mod core;
mod entry;
mod error;
mod handout;
mod host;
mod node;
mod types;

/// The wall clock the generators read (without a test build's steering), for the benches. With
/// `core` (benches/core.rs links it), the only public items; everything else is internal to the
/// module and says so (`pub(crate)`).
pub use host::clock::system_now_ms;

use entry::registry::{
    self, command, keys, limit_key, IM_CHANGESET_SPECS, IM_CHANGE_SPECS, IM_PULL_SPECS,
    IM_READ_SPECS, IM_SENDSET_SPECS, IM_SEND_SPECS, IM_SYNC_SPECS, OW_UPDATE, ROUTING_ONLY,
    RO_ACCESS, RW_ACCESS_UPDATE, RW_DELETE,
};
use redis_module::{redis_module, Context, RedisString, Status};

/// The global allocator: Redis's own inside redis-server (so `used_memory` and `MEMORY USAGE`
/// see our allocations), the system allocator in unit tests and benches, which run without a
/// server (Redis's allocator aborts there).
#[cfg(not(any(test, feature = "system-alloc")))]
mod allocator {
    pub(crate) type Alloc = redis_module::alloc::RedisAlloc;
    pub(crate) const ALLOC: Alloc = redis_module::alloc::RedisAlloc;
}
#[cfg(any(test, feature = "system-alloc"))]
mod allocator {
    pub(crate) type Alloc = std::alloc::System;
    pub(crate) const ALLOC: Alloc = std::alloc::System;
}

/// Module version as Redis shows it (`MODULE LIST`): major*10000 + minor*100 + patch, from the
/// one version source, Cargo.toml. Computed at compile time, where an index out of range would
/// fail the build.
#[allow(clippy::indexing_slicing)]
const MODULE_VERSION: i32 = {
    let v = [
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
    ];
    let mut out = 0i32;
    let mut i = 0;
    while i < v.len() {
        let (b, mut n, mut j) = (v[i].as_bytes(), 0i32, 0);
        while j < b.len() {
            n = n * 10 + (b[j] - b'0') as i32;
            j += 1;
        }
        out = out * 100 + n;
        i += 1;
    }
    out
};

/// OnLoad (`entry::load`), with the command tables below.
fn init(ctx: &Context, args: &[RedisString]) -> Status {
    #[cfg(feature = "test-hooks")]
    let tables: &[&[registry::Command]] = &[TEST_COMMANDS, COMMANDS];
    #[cfg(not(feature = "test-hooks"))]
    let tables: &[&[registry::Command]] = &[COMMANDS];
    entry::load(ctx, args, tables)
}

/// Every command: name (lowercase, as Redis lists its own), handler, flags, ACL categories,
/// arity, keys, summary. Categories apply where the server has them (Redis 7.2+, Valkey), plus
/// `imid` where it allows a module category (Redis 7.4+); Redis 7.0 has none for modules.
/// MSGID.FLOOR and UID.FLOOR are also `dangerous`: they move every later ID of the node, for good.
#[rustfmt::skip] // one line per command reads as the table it is
const COMMANDS: &[registry::Command] = &[
    command!("msgid.gen", commands::msgid::gen, "write fast", "write fast", 3, keys(2, 0, ROUTING_ONLY), "Issues a new time-ordered message ID for a conversation"),
    command!("msgid.encode", commands::msgid::encode, "readonly fast", "read fast", 5, None, "Builds a message ID from explicit fields"),
    command!("msgid.decode", commands::msgid::decode, "readonly fast", "read fast", 2, None, "Splits a message ID into its fields"),
    command!("msgid.hash", commands::msgid::hash, "readonly fast", "read fast", 2, None, "The 22-bit target hash MSGID.GEN would embed"),
    command!("msgid.floor", commands::msgid::floor, "write fast", "write fast dangerous", 2, None, "Raises the message-ID time floor (replication and AOF of the time lease)"),
    command!("msgid.promise", commands::msgid::promise, "write fast", "write fast dangerous", 5, keys(1, 0, ROUTING_ONLY), "Internal: a slot migration's source's promise of its message-ID and UID time, carried to the target"),
    command!("uid.gen", commands::uid::gen, "write fast", "write fast", -2, keys(1, 0, ROUTING_ONLY), "Issues a new 64-bit numeric ID (or COUNT of them, increasing)"),
    command!("uid.decode", commands::uid::decode, "readonly fast", "read fast", -2, None, "Splits a 64-bit ID into time, node and seq (under the node's layout or another)"),
    command!("uid.encode", commands::uid::encode, "readonly fast", "read fast", -4, None, "Builds a 64-bit ID from explicit fields (under the node's layout or another)"),
    command!("uid.floor", commands::uid::floor, "write fast", "write fast dangerous", 2, None, "Raises the UID time floor (replication and AOF of the UID time lease)"),
    command!("openid.enc", commands::openid::enc, "readonly fast", "read fast", 4, None, "Makes the public ID of a message (plain or keyed)"),
    command!("openid.dec", commands::openid::dec, "readonly fast", "read fast", 2, None, "Verifies a public message ID and splits it into its fields"),
    command!("seq.next", commands::seq::next, "write deny-oom fast", "write fast", -2, keys(1, 0, RW_ACCESS_UPDATE), "Reserves the next value (or a block of COUNT values) of a sequence"),
    command!("seq.get", commands::seq::get, "readonly fast", "read fast", 2, keys(1, 0, RO_ACCESS), "The current value of a sequence (0 when missing)"),
    command!("seq.mget", commands::seq::mget, "readonly fast", "read fast", -2, keys(1, -1, RO_ACCESS), "The current values of several sequences (0 when missing)"),
    command!("seq.set", commands::seq::set, "write deny-oom fast", "write fast", 3, keys(1, 0, OW_UPDATE), "Sets a sequence to an exact value"),
    command!("seq.idmpset", commands::seq::idmpset, "write deny-oom", "write dangerous", 7, keys(1, 0, RW_ACCESS_UPDATE), "Internal: records one IDMP token (the replicated form of SEQ.NEXT ... IDMP)"),
    command!("seq.idmpclock", commands::seq::idmpclock, "write fast", "write fast dangerous", 4, None, "Internal: the IDMP clock replicas and the AOF replay IDMP calls by"),
    command!("seq.gap", commands::seq::gap, "write fast", "write fast dangerous", 2, None, "Internal: the gap a restart from the data up to here, or a promotion, skips on each sequence"),
    command!("seq.convert", commands::seq::convert, "write deny-oom fast", "write fast", 2, keys(1, 0, RW_ACCESS_UPDATE), "Turns an INCR counter (a string holding an integer) into a sequence holding its value, in place"),
    command!("seq.advance", commands::seq::advance, "write deny-oom fast", "write fast", -3, keys(1, 0, RW_ACCESS_UPDATE), "Raises a sequence to at least a value (a read cursor), at most to a LIMIT sequence", limit_key(3)),
    // Sequence maps (commands/seqmap.rs): many named sequences in one key.
    command!("seq.hnext", commands::seqmap::hnext, "write deny-oom fast", "write fast", -3, keys(1, 0, RW_ACCESS_UPDATE), "Reserves the next value (or a block of COUNT values) of a field of a sequence map"),
    command!("seq.hget", commands::seqmap::hget, "readonly fast", "read fast", 3, keys(1, 0, RO_ACCESS), "The current value of a field of a sequence map (0 when missing)"),
    command!("seq.hmget", commands::seqmap::hmget, "readonly fast", "read fast", -3, keys(1, 0, RO_ACCESS), "The current values of fields of a sequence map (0 when missing)"),
    command!("seq.hgetall", commands::seqmap::hgetall, "readonly", "read slow", 2, keys(1, 0, RO_ACCESS), "Every field of a sequence map with its value"),
    command!("seq.hscan", commands::seqmap::hscan, "readonly", "read slow", -3, keys(1, 0, RO_ACCESS), "Iterates the fields of a sequence map in pages"),
    command!("seq.hset", commands::seqmap::hset, "write deny-oom fast", "write fast", -4, keys(1, 0, RW_ACCESS_UPDATE), "Sets fields of a sequence map to exact values"),
    command!("seq.hdel", commands::seqmap::hdel, "write fast", "write fast", -3, keys(1, 0, RW_DELETE), "Removes fields of a sequence map (the key with its last field)"),
    command!("seq.hlen", commands::seqmap::hlen, "readonly fast", "read fast", 2, keys(1, 0, RO_ACCESS), "The number of fields of a sequence map"),
    command!("seq.hidmpset", commands::seqmap::hidmpset, "write deny-oom", "write dangerous", -7, keys(1, 0, RW_ACCESS_UPDATE), "Internal: records one IDMP token of a sequence map (the replicated form of SEQ.HNEXT ... IDMP)"),
    command!("seq.hadvance", commands::seqmap::hadvance, "write deny-oom fast", "write fast", -4, keys(1, 0, RW_ACCESS_UPDATE), "Raises a field of a sequence map to at least a value, at most to a LIMIT sequence", limit_key(4)),
    // The IM flow (commands/im.rs): what examples/lua/send.lua does, natively.
    command!("im.send", commands::im::send, "write deny-oom", "write sortedset slow", -2, specs = IM_SEND_SPECS, "Sends a message into a conversation: seq, message ID and UID, each recipient's inbox, the inbox cap; at most once per client message id"),
    command!("im.sendset", commands::im::sendset, "write deny-oom", "write sortedset slow dangerous", -11, specs = IM_SENDSET_SPECS, "Internal: the replicated form of IM.SEND (its seq, IDs and token record, then its arguments)"),
    // The read side (commands/im_read.rs): what sync.lua, read.lua, pull.lua and change.lua do, natively; an unread count and read receipts.
    command!("im.sync", commands::im_read::sync, "readonly", "read sortedset slow", -2, specs = IM_SYNC_SPECS, "An inbox's messages after a seq, a page at a time, with the conversation's seq and the inbox's trimmed marker"),
    command!("im.read", commands::im_read::read, "write deny-oom", "write sortedset slow", -2, specs = IM_READ_SPECS, "Raises a user's read cursor of a conversation (never past its seq) and counts the unread messages (not the user's own)"),
    command!("im.unread", commands::im_read::unread, "readonly", "read sortedset slow", -2, keys(1, 1, RO_ACCESS), "The unread messages of a user in a conversation (not the user's own), read-only: a badge"),
    command!("im.readby", commands::im_read::readby, "readonly fast", "read fast", -2, keys(1, 0, RO_ACCESS), "Read receipts: how many of the members named have read up to a seq, and the lowest read cursor among them"),
    command!("im.pull", commands::im_read::pull, "readonly", "read sortedset slow", -2, specs = IM_PULL_SPECS, "The incremental pull: the kinds whose seq is above the client's, each with its changes since"),
    command!("im.change", commands::im_read::change, "write deny-oom", "write sortedset slow", -2, specs = IM_CHANGE_SPECS, "Records one change of a kind of a user's data for the incremental pull: its seq, the log, the log cap"),
    command!("im.changeset", commands::im_read::changeset, "write deny-oom", "write sortedset slow dangerous", 8, specs = IM_CHANGESET_SPECS, "Internal: the replicated form of IM.CHANGE (its seq, then its arguments)"),
    // The fence's operator commands (commands/fence.rs): the replicas this primary's term counts.
    command!("fence.replicas", commands::fence::replicas, "readonly fast", "read fast", 1, None, "The replicas of this primary's term the fence counts, with their state"),
    command!("fence.forget", commands::fence::forget, "admin", "admin dangerous slow", 2, None, "Stops the fence counting a replica that is gone for good"),
    command!("fence.stale", commands::fence::stale, "admin", "admin dangerous slow", -1, None, "Whether this primary was promoted without having synced from the primary it followed (then it hands out nothing); CLEAR: an operator says that term's data is gone for good"),
];

/// The test build's commands (`commands::test_hooks`); never in a release build.
#[cfg(feature = "test-hooks")]
#[rustfmt::skip]
const TEST_COMMANDS: &[registry::Command] = &[
    command!("imid.test-clock", commands::test_hooks::test_clock, "fast", "", -2, None, "Test builds only: steers the module's wall clock"),
    command!("imid.test-panic", commands::test_hooks::test_panic, "fast", "", 1, None, "Test builds only: panics inside a guarded handler"),
    command!("imid.test-panic-next", commands::test_hooks::test_panic_next, "fast", "", 2, None, "Test builds only: the next call into the named entry panics"),
    command!("imid.test-replicate-floor", commands::test_hooks::test_replicate_floor, "write", "", 2, None, "Test builds only: replicates MSGID.FLOOR with any value"),
    command!("imid.test-deaf", commands::test_hooks::test_deaf, "fast", "", 2, None, "Test builds only: the cluster bus receiver drops (1) or hears (0) peers' promises"),
    command!("imid.test-map-pending", commands::test_hooks::test_map_pending, "readonly fast", "", 2, keys(1, 0, RO_ACCESS), "Test builds only: whether a sequence map has background work left"),
];

redis_module! {
    name: "imid",
    version: MODULE_VERSION,
    allocator: (allocator::Alloc, allocator::ALLOC),
    // The data types are created in OnLoad, after every step that can fail (see `load`).
    data_types: [],
    init: init,
}
