//! 64-bit numeric IDs (UID.*), Redis-free, one file per job: `layout` (three fields, their
//! order and widths, an epoch and a time unit; encoding and decoding with range checks; the
//! named layouts of other generators), `generator` (the state machine), `errors` (what each
//! refuses) and `time_text` (dates in messages).
//!
//! An ID is a positive signed 64-bit integer, `[0] | time | node | seq` most significant bits
//! first, or with seq above node (the bits: [`Layout`]). The generator's rules are MSGID's: per
//! lane every ID is strictly greater than every ID issued before it, a clock that runs
//! backwards never makes IDs go back, and nothing sleeps, spins or wraps (the rules in full:
//! [`UidGenerator`]).

use super::slot::key_slot;

/// The widths sum to this (bit 63 clear), or to one more with the time field's top bit kept 0.
pub const WIDTH_SUM: u32 = 63;
/// Redis Cluster hash slots, and the bits a slot takes in the node field.
pub const SLOTS: usize = 16_384;
pub const SLOT_BITS: u32 = 14;
/// A layout must last at least this long past the server clock at load (365 days).
pub const MIN_LIFETIME_MS: u64 = 365 * 86_400_000;
/// The default epoch: 2026-01-01T00:00:00Z.
pub const DEFAULT_EPOCH_MS: u64 = 1_767_225_600_000;
/// The largest batch `UID.GEN ... COUNT n` takes.
pub const MAX_BATCH: u32 = 10_000;
/// The longest time unit: one day. Longer units would make an ID's time meaningless.
pub const MAX_UNIT_MS: u64 = 86_400_000;

mod errors;
mod generator;
mod layout;
#[cfg(test)]
mod tests;
mod time_text;

pub use errors::*;
pub use generator::*;
pub use layout::*;
pub use time_text::*;
