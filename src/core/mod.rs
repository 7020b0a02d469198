//! Redis-free logic: everything here is plain Rust, unit-tested without a server.

pub mod generator;
pub mod hash;
pub mod idmp;
pub mod javahash;
pub mod lease;
pub mod msgid;
pub mod openid;
pub mod seq;
pub mod seqmap;
pub mod slot;
pub mod uid;
