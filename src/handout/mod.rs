//! The hand-out layer, between the data types and the command files: everything a command hands
//! out goes through it, the way Redis's own t_zset.c calls the type's API and never another
//! command. A command parses its arguments and calls one of these:
//! - [`ids`]: issue a message ID or a UID (MSGID.GEN, UID.GEN, IM.SEND's two IDs);
//! - [`reserve`]: reserve sequence values, with an IDMP token (SEQ.NEXT, SEQ.HNEXT, IM.SEND's
//!   seq, IM.CHANGE's), and the two data types' adapters for it;
//! - [`inbox`]: deliver a member to an inbox kept to its cap (IM.SEND, IM.CHANGE's log);
//! - [`floor`]: raise an ID family's replicated time floor (MSGID.FLOOR, UID.FLOOR);
//! - [`gate`]: the runner, the one door to the gate (`node::fence`): what the call needs is
//!   checked, its writes are made, then it is answered now or waits; a retry's answer and the
//!   fenced reads (IM.SYNC, IM.UNREAD, IM.PULL) go through the same door.
//!
//! The gate is charged by the data types' own writes (a raise that is not a reservation:
//! `SeqKey::set`, `MapKey::set_field`, ...) and by the runner (what a call hands out); no
//! command file asks, answers or charges it.

pub(crate) mod floor;
pub(crate) mod gate;
pub(crate) mod ids;
pub(crate) mod inbox;
pub(crate) mod reserve;
