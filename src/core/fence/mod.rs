//! The fence's bookkeeping, Redis-free (docs/durability.md, "The fence"): a primary hands out
//! nothing that the replica which would replace it does not know. "Knows" is read from
//! replication offsets: a replica that acknowledged offset `A` holds every write the primary
//! propagated up to `A`. The node (`node::fence`) reads the offsets and keeps a [`Book`]:
//! - `members`: the replicas of the term, each of which must hold an offset;
//! - `budget`: sequence values, within the gap above what an acknowledger holds;
//! - `marks`: message IDs and UIDs, below a lease renewal an acknowledger holds;
//! - `gaps`: the gap in force, as the node raises and lowers it with its rate;
//! - `channel`: the four of them for one acknowledger (the replicas, or the node's AOF);
//! - `queue`: the calls that wait, for the replicas, the AOF, or both;
//! - `book`: the replicas' channel and members, and one round over the offsets just read.
//!
//! The node's own AOF is the other acknowledger (`core::durable`): by sample points, not
//! offsets, but counted with the same [`Channel`].

mod book;
mod budget;
mod channel;
mod gaps;
mod marks;
mod members;
mod queue;

pub use book::{Book, Lease, Reading, Round, View};
pub use budget::{within, Ring, Skips, RING, SKIPS};
pub use channel::Channel;
pub use gaps::{Gaps, GAPS};
pub use marks::{Marks, MARKS};
pub use members::{
    gone_at, info_replica, replicating_elsewhere, ForgetError, Member, Members, Observed, MEMBERS,
    QUIET_S,
};
pub use queue::{Missing, Queue, Wait};

/// `(addr, offset, fsynced)` triples, as the node reads its replicas (none reporting fsynced).
#[cfg(test)]
fn online(list: &[(&str, u64)]) -> Vec<(String, u64, Option<u64>)> {
    list.iter().map(|&(a, o)| (a.to_owned(), o, None)).collect()
}

/// `(addr, value)` pairs, as `INFO replication` lists the replicas' lags.
#[cfg(test)]
fn pairs(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|&(a, o)| (a.to_owned(), o)).collect()
}
