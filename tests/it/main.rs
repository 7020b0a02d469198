//! The integration tests: one crate, one binary (`cargo test --release --test it`), each file
//! a module for one concern, the harness in `common/` (a real redis-server per test, with the
//! module loaded; no test links the crate). Filter by module: `cargo test --release --test it
//! -- seq_persistence::`.
//!
//! Tests that need Redis 8.2, 8.6 or Valkey 9.1 (`common::newer_server`) skip, saying so, when
//! the server is missing, unless `IMID_NEWER_SERVERS=require` (set by `make test`); the soak
//! runs are `#[ignore]`d and run by `make soak` (the ignored tests named `soak` or `jepsen`).
//!
//! A new module here goes into one of scripts/test-matrix.sh's two lists too: `$per_server`
//! (run again on every server of `make test-matrix`) or `$once` (run by `make test` only); the
//! rule is written above them, and `make test` stops while a module is in neither.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[macro_use]
mod common;

mod acl;
mod atomic_migration;
mod clients;
mod clock;
mod cluster;
mod command_specs;
mod compat;
mod config;
mod data_loss;
mod dist;
mod docs;
mod durable;
mod examples;
mod exposure;
mod failed_load;
mod fence;
mod guard;
mod harness;
mod im_chat;
mod im_read;
mod im_send;
mod jepsen;
mod lease;
mod loading;
mod msgid;
mod openid;
mod pause;
mod redis_migration;
mod replies;
mod reshard;
mod sentinel;
mod seq;
mod seq_idmp;
mod seq_persistence;
mod seq_replication;
mod seqmap;
mod seqmap_cluster;
mod seqmap_persistence;
mod soak;
mod uid;
mod uid_layouts;
mod uid_reference;
mod without_module;
