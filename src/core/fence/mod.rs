//! The fence's bookkeeping, Redis-free (docs/durability.md, "The fence"): a primary hands out
//! nothing that the replica which would replace it does not know. "Knows" is read from
//! replication offsets: a replica that acknowledged offset `A` holds every write the primary
//! propagated up to `A`. The node (`node::fence`) reads the offsets and keeps a [`Book`]:
//! - `members`: the replicas of the term, each of which must hold an offset;
//! - `budget`: sequence values, within `imid.seq-gap` above what the replicas acknowledged;
//! - `marks`: message IDs and UIDs, below a lease renewal the replicas acknowledged;
//! - `queue`: the calls that wait for the replicas;
//! - `book`: all of them together, and one round over the offsets just read.

mod book;
mod budget;
mod marks;
mod members;
mod queue;

pub use book::{Book, Lease, Round, View};
pub use budget::{within, Ring, Skips, RING, SKIPS};
pub use marks::{Marks, MARKS};
pub use members::{
    gone_at, info_replica, replicating_elsewhere, ForgetError, Member, Members, Observed, MEMBERS,
    QUIET_S,
};
pub use queue::Queue;

/// `(addr, offset)` pairs, as the server lists its replicas.
#[cfg(test)]
fn online(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|&(a, o)| (a.to_owned(), o)).collect()
}
