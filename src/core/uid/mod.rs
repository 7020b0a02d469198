//! 64-bit numeric IDs (UID.*), Redis-free, one file per job: `layout` (three fields, their
//! order and widths, an epoch and a time unit; encoding and decoding with range checks; the
//! named layouts of other generators), `generator` (the state machine), `errors` (what each
//! refuses) and `time_text` (dates in messages).
//!
//! An ID is a positive signed 64-bit integer, most significant bits first:
//! `[0] | time (T bits) | node (N bits) | seq (S bits)`, or with seq above node
//! (`time | seq | node`, Sonyflake's order). The widths sum to 63 (bit 63 stays clear) or to 64
//! (the time field's top bit is bit 63: IDs stay positive as signed 64-bit only while it is 0,
//! so imid uses the time field's lower `T - 1` bits, Discord's and Instagram's rule). The time
//! field counts units (any whole number of ms) since the epoch (Unix ms). Snowflake is
//! `41,10,12` in ms, Baidu's UidGenerator `28,22,13` in seconds, Sonyflake
//! `time:39,seq:8,node:16` in 10 ms.
//!
//! Generator rules (as MSGID's):
//! - per lane (one lane per node, or per hash slot in cluster mode) every ID is strictly
//!   greater than every ID issued before it;
//! - time is `max(now, last, floor)`: a clock that runs backwards never makes IDs go back;
//! - a full seq field borrows the next time unit; nothing sleeps, spins or wraps;
//! - the generator owns no lease: it takes the shared time floor (Unix ms) and reports the ms
//!   time of the last ID it issued, which the caller keeps below the shared time lease. After
//!   a restart the floor is at or above that lease, and UID time units start at
//!   `ceil((floor - epoch) / unit)`, above every unit issued before.
//!
//! Within a lane the generator works on the linear index `L = time_unit << S | seq`: the IDs of
//! a lane are consecutive values of `L`, so a batch of `n` IDs is the run `L .. L + n - 1`, and
//! a full seq field rolls over into the next time unit by plain addition. The node field is
//! fixed per lane, so where it sits (below or above seq) only changes the shifts.

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
