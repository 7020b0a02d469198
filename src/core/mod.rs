//! Redis-free logic: everything here is plain Rust, unit-tested without a server.

pub mod fence;
pub mod generator;
pub mod hash;
pub mod idmp;
pub mod javahash;
pub mod lease;
pub mod msgid;
pub mod openid;
pub mod reserve;
pub mod send;
pub mod seq;
pub mod seqmap;
pub mod slot;
pub mod uid;

/// A number known to be below 2^63 (a sequence value, a UID, a time, a count), as the `i64` that
/// Redis's integer replies and formats take; saturating, should it ever not be.
pub fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
