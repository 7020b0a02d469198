//! The gate (docs/durability.md, "The fence" and "Durable before use"): a node hands out nothing
//! that the place a failover or a restart reads from does not hold. Two acknowledgers count:
//! - the replicas of the primary's term (the fence): on while `imid.fence-replicas` (`auto`:
//!   the server's `min-replicas-to-write`) is above 0 and this node is a primary; a replica
//!   holds what it acknowledged, or (`imid.fence-ack fsynced`, where it reports it) what it
//!   fsynced;
//! - the node's own AOF (`node::durable`): on with `appendfsync everysec`, and with `always`
//!   while Redis skips its fsyncs for a child.
//!
//! A call says what it hands out ([`Outgoing`]); [`check`] lets it answer now, makes it wait, or
//! refuses it before it changes anything, and [`Verdict::answer`] replies or blocks the client
//! until what it waits for is held (`NOREPLICAS` or `NOTDURABLE` after `imid.fence-timeout`).
//! Inside MULTI, a script or a function nothing can wait, so such a call is refused instead. A
//! waiting call is answered by one path only: the round that releases it, times it out or finds
//! the node demoted unblocks it, and the reply callback writes what that round decided; Redis
//! keeps no timeout of its own for it (`host::fence`, `Ctx::block`).
//!
//! The bookkeeping is Redis-free: `core::fence::Book` for the replicas, `core::durable::Local`
//! for the AOF, each counting a `core::fence::Channel`, and the waiting calls'
//! `core::fence::Queue`. Here are their Redis side and when they run: a fence round ([`tick`])
//! reads `ROLE`, releases what the replicas hold and asks them for more (`REPLCONF GETACK *`);
//! the AOF's samples are taken before the event loop sleeps, where Redis cannot postpone its
//! write, and fsynced by imid's own thread (`host::aof`). Rounds run before the event loop
//! sleeps while something waits, from one-shot timers, and from the cron. Everything but the
//! fsync itself runs on Redis's main thread.
//!
//! The files, by job: `gate` (the calls), `rounds` (when rounds run and what they do),
//! `term` (the replicas of the term), `errors` (the texts), `info` (`INFO imid`), over `state`.

mod errors;
mod gate;
mod info;
mod rounds;
mod state;
mod term;

pub(crate) use crate::core::fence::Lease;
pub(crate) use errors::skip_refused;
pub(crate) use gate::{
    charge_raise, charge_stored_skip, check, check_read, key_appeared, renewed, skips_pending,
    store_skip_alone, target_id, Outgoing, Verdict,
};
pub(crate) use info::info_fields;
pub(crate) use rounds::{
    after_sleep, before_sleep, cron, freed, fsynced, on_timer, reply_released,
};
pub(crate) use state::{active, Released};
pub(crate) use term::{
    child_changed, config_applied, config_changed, forget, load, load_ended, load_started,
    replica_acked, role_changed, term_replicas,
};
