//! Command handlers, one file per family. Each parses its arguments, calls the Redis-free core,
//! replies through the glue's context as its last step, and replicates what it changed.
//! Shared helpers (errors, argument parsing, replies) live in `glue`.

pub(crate) mod msgid;
pub(crate) mod openid;
pub(crate) mod seq;
pub(crate) mod seqmap;
pub(crate) mod uid;
