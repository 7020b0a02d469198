//! The test harness: a real redis-server per test, with the imid module loaded, on a free
//! loopback port and in a directory of its own. Integration tests talk to the server only;
//! they never link the crate. One file per concern, all of it in scope with `use common::*`:
//!
//! - `binaries`: what runs: the module builds ([`module_path`], [`hooks_module_path`], built
//!   when stale), the server binaries ([`redis_server_bin`], `newer_server!`,
//!   `on_newer_servers!`), the examples' interpreters, [`run`] for any other program.
//! - `ports`: free loopback ports below the ephemeral range, with free cluster-bus twins.
//! - `server`: [`Server`] (start, restart, kill, replicas, INFO, waits for replication and AOF
//!   rewrites), [`Launch`] (how to start one, or to watch it refuse to start) and [`Paused`] (a
//!   server stopped with SIGSTOP).
//! - `commands`: calling a server: [`cmd`], [`int_reply`], [`ok`], CONFIG, MODULE, RESP3 maps,
//!   keyspace events, WATCH, many clients at once, every key with its contents ([`keyspace`]).
//! - `assertions`: [`expect_err`] and the error texts, error tables, increasing IDs.
//! - `clock`: the server's clock, the test-hooks clock, [`wait_until`] with a deadline.
//! - `ids`: key slots, message-ID and UID fields, the leases; many IDs at once, the IM load.
//! - `disk`: a slow disk and a power loss ([`SlowDisk`], an LD_PRELOAD library wrapping
//!   fsync and fdatasync).
//! - `files`: temp directories, the reference vectors, a server's AOF files, docs/guide.md's
//!   program.
//! - `pipeline`: a pipeline whose every reply is checked against its own command
//!   ([`Checked`]), for the tests of lost and misplaced replies.
//!
//! By path: `common::cluster` (real Redis Cluster nodes, slot moves, a load across them),
//! `common::rdb` (RDB data and DUMP payloads crafted by hand) and `common::scripts` (a command
//! against its reference script in examples/lua/: the two frozen servers of a comparison).

#[macro_use]
mod binaries;
mod assertions;
mod clock;
pub mod cluster;
mod commands;
mod disk;
mod files;
mod ids;
mod pipeline;
mod ports;
pub mod rdb;
mod rng;
pub mod scripts;
mod server;

pub use assertions::*;
pub use binaries::*;
pub use clock::*;
pub use commands::*;
pub use disk::*;
pub use files::*;
pub use ids::*;
pub use pipeline::*;
pub use ports::*;
pub use redis::{Connection, Value};
pub use rng::Rng;
pub use server::*;
