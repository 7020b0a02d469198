//! The gate (docs/durability.md, "The fence" and "Durable before use"): a node hands out nothing
//! that the place a failover or a restart reads from does not hold. Two acknowledgers count:
//! the replicas of the primary's term (the fence) and the node's own AOF (`node::durable`);
//! when each is on: `state::Published`.
//!
//! A call says what it hands out ([`Outgoing`]); [`check`] lets it answer now, makes it wait, or
//! refuses it before it changes anything, and [`Verdict::answer`] replies or blocks the client
//! until what it waits for is held (`NOREPLICAS` or `NOTDURABLE` after `imid.fence-timeout`).
//! The bookkeeping is Redis-free (`core::fence`, `core::durable::Local`); this folder is its
//! Redis side and when it runs (`rounds::tick`). Everything but the fsync itself runs on Redis's
//! main thread.
//!
//! The files, by job: `gate` (the calls), `rounds` (when rounds run and what they do),
//! `term` (the replicas of the term), `follow` (a replica's side: the primary it follows, and
//! a promoted node that never synced from it), `errors` (the texts), `info` (`INFO imid`),
//! over `state`.

mod errors;
mod follow;
mod gate;
mod info;
mod rounds;
mod state;
mod term;

pub(crate) use crate::core::fence::Lease;
pub(crate) use errors::skip_refused;
pub(crate) use follow::{clear as clear_stale, stale};
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
