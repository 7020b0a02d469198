//! The term's upkeep: the replicas of the primary's term followed through role changes, loads,
//! slot migrations and config changes ([`follow_term`], [`role_changed`], [`load`]), what each
//! replica reported (`REPLCONF ACK ... FACK`), and the operator's view and FENCE.FORGET
//! ([`term_replicas`], [`forget`]).

use super::state::{
    arm_tick, fsync_failed, mono_ms, publish, release, release_ready, state, Unblocked, PUBLISHED,
};
use crate::config::{FenceReplicas, FENCE_REPLICAS};
use crate::core::fence::{replicating_elsewhere, ForgetError, Member};
use crate::error::Error;
use crate::host::probe::Probe;
use crate::host::Ctx;
use crate::node::durable;
use std::sync::atomic::Ordering::Relaxed;

/// In Cluster: members offline now that the cluster shows replicating another primary leave
/// the term (they cannot take over here); else a replica that Cluster moved to an orphaned
/// primary would hold this one to its budget until an operator's `FENCE.FORGET`.
pub(super) fn drop_migrated(ctx: &Ctx) {
    let offline: Vec<String> = state()
        .book
        .members
        .offline()
        .iter()
        .map(|m| m.addr.clone())
        .collect();
    let Some(nodes) = ctx.call_text(c"CLUSTER", c"NODES") else {
        return;
    };
    let addrs: Vec<&str> = offline.iter().map(String::as_str).collect();
    let moved = replicating_elsewhere(&nodes, &addrs);
    if moved.is_empty() {
        return;
    }
    {
        let mut st = state();
        for a in &moved {
            let _ = st.book.members.forget(a);
        }
        publish(&st);
    }
    ctx.log_notice(&format!(
        "imid: the fence no longer counts {}: the cluster shows it replicating another primary",
        moved.join(", ")
    ));
    arm_tick(ctx);
}

/// Reads `min-replicas-to-write` for `auto` (needs a context with a client: the cron, OnLoad,
/// a role change).
pub(super) fn read_min_replicas(ctx: &Ctx) {
    if matches!(FENCE_REPLICAS.with(|v| *v), FenceReplicas::Auto) {
        if let Some(v) = ctx.config_u64(c"min-replicas-to-write") {
            state().min_replicas = v;
        }
    }
}

/// Turns the fence and the AOF's part on or off as `imid.fence-replicas` (`auto`: the last
/// `min-replicas-to-write` read), the AOF's mode (`node::durable`) and the node's role say.
/// Calls nothing in Redis, so that a config's apply callback, whose context has no client, may
/// run it. What a call waited for from an acknowledger turned off is no longer needed: it goes
/// at the next round.
pub(super) fn follow_term() {
    let mut st = state();
    let required = match FENCE_REPLICAS.with(|v| *v) {
        FenceReplicas::Count(n) => n,
        FenceReplicas::Auto => st.min_replicas,
    };
    st.required = required;
    let fence = required > 0 && st.primary;
    if PUBLISHED.fence.swap(fence, Relaxed) != fence {
        // On: a new term, nothing acknowledged yet. Off: the calls still waiting for the
        // replicas get their replies at the next round.
        st.book.reset();
        st.fence_acked = None;
    }
    let aof = durable::gated() && st.primary;
    if PUBLISHED.aof.swap(aof, Relaxed) != aof {
        // On: nothing is known fsynced yet, but where everything before was (`always` until
        // now, or nothing handed out since the load's fsync). Off: nothing more to wait for
        // from the AOF.
        st.local.reset();
        if aof && st.durable_until == Some(PUBLISHED.advanced.load(Relaxed)) {
            st.local
                .start_durable(PUBLISHED.advanced.load(Relaxed), mono_ms());
        }
    }
    st.durable_until = match durable::mode() {
        durable::Mode::Always => Some(PUBLISHED.advanced.load(Relaxed)),
        _ => None,
    };
    PUBLISHED.active.store(fence || aof, Relaxed);
    publish(&st);
    release_ready(&mut st);
}

/// `imid.fence-replicas` was set (its apply callback: nothing here calls into Redis). The
/// fence follows at once, so that calls right after the `CONFIG SET` see the new count.
pub(crate) fn config_applied() {
    let loaded = state().loaded;
    if loaded {
        follow_term();
    }
}

/// A config changed (`CONFIG SET`; the event's context has a client): the AOF's settings are
/// read again and the gate follows them.
pub(crate) fn config_changed(ctx: &Ctx) {
    if durable::refresh(ctx) && state().loaded {
        follow_term();
    }
}

/// A forked child was born or exited: the AOF's mode may change with it (`always` with
/// `no-appendfsync-on-rewrite yes`). Calls nothing in Redis.
pub(crate) fn child_changed(alive: bool) {
    if durable::child(alive) && state().loaded {
        follow_term();
    }
}

/// A load starts (an RDB or AOF at startup, a full sync, DEBUG RELOAD): what is loaded is not
/// known to be on disk until the load's end fsyncs it ([`load_ended`]).
pub(crate) fn load_started() {
    let mut st = state();
    st.durable_until = None;
    st.local.reset();
    publish(&st);
}

/// A load ended: with the AOF gate's mode, the AOF files fsynced at once (the server is still
/// loading, serving nobody), so that everything loaded counts as on disk and the first calls
/// need not wait for a round (a call inside MULTI or a script could not).
pub(crate) fn load_ended(ctx: &Ctx) {
    if !durable::gated() {
        return;
    }
    let synced = match durable::files() {
        Some((dir, manifest)) => crate::host::aof::fsync_now(&dir, &manifest),
        None => Err("the AOF's directory and manifest are unknown".to_owned()),
    };
    let advanced = PUBLISHED.advanced.load(Relaxed);
    let mut st = state();
    match synced {
        Ok(()) => {
            st.durable_until = Some(advanced);
            if PUBLISHED.aof() {
                st.local.start_durable(advanced, mono_ms());
            }
            publish(&st);
        }
        Err(e) => {
            drop(st);
            fsync_failed(ctx, e);
        }
    }
}

/// At load: this node's role and the configs, on at once when they say so (a primary
/// restarted under load must not answer unguarded until the first cron tick). No timer is
/// armed in OnLoad (`entry::load`).
pub(crate) fn load(ctx: &Ctx) {
    state().primary = ctx.is_primary();
    read_min_replicas(ctx);
    durable::load(ctx);
    follow_term();
    state().loaded = true;
}

/// This node was promoted (`primary`) or became a replica: what was acknowledged, and by whom,
/// belongs to the old term. A demoted node's waiting calls get the error (Redis disconnects
/// blocked clients of a primary that becomes a replica too).
pub(crate) fn role_changed(ctx: &Ctx, primary: bool) {
    if let Some(master) = super::follow::role_changed(primary) {
        ctx.log_warning(&format!(
            "imid: promoted while following {master}, a primary this node had not synced \
             from: its data may lack values that primary handed out, so it hands out nothing \
             until it is a replica again or an operator runs FENCE.STALE CLEAR"
        ));
    }
    let demoted = {
        let mut st = state();
        st.primary = primary;
        PUBLISHED.fence.store(false, Relaxed);
        PUBLISHED.aof.store(false, Relaxed);
        PUBLISHED.active.store(false, Relaxed);
        st.book.reset();
        st.local.reset();
        st.fence_acked = None;
        publish(&st);
        if primary {
            Vec::new()
        } else {
            st.queue.drain()
        }
    };
    for (bc, _) in demoted {
        release(bc, Unblocked::Demoted);
    }
    read_min_replicas(ctx);
    durable::refresh(ctx);
    follow_term();
    arm_tick(ctx);
}

/// A replica's client (`client`) sent `REPLCONF ACK ack FACK fsynced` (the command filter):
/// kept for the next round.
pub(crate) fn replica_acked(client: u64, ack: u64, fsynced: u64) {
    let now = mono_ms();
    let mut st = state();
    if let Some(e) = st.facks.iter_mut().find(|e| e.0 == client) {
        *e = (client, ack, fsynced, now);
    } else if st.facks.len() < crate::core::fence::MEMBERS {
        st.facks.push((client, ack, fsynced, now));
    }
}

/// Reports older than a minute belong to replicas gone since (the cron).
pub(super) fn prune_facks() {
    let now = mono_ms();
    state()
        .facks
        .retain(|&(.., at)| now.saturating_sub(at) < 60_000);
}

/// The replicas of this primary's term, for `FENCE.REPLICAS`: each member with its state, and
/// the ms since it joined or went offline.
pub(crate) fn term_replicas() -> Vec<(Member, u64)> {
    let now = mono_ms();
    state()
        .book
        .members
        .list()
        .iter()
        .map(|m| (m.clone(), now.saturating_sub(m.since_ms)))
        .collect()
}

/// How long FENCE.FORGET's probe waits for an answer at the replica's address.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// `FENCE.FORGET addr`: the member at `addr` stops counting, once nothing answers at its
/// address. A replica cut off from this primary may still be reached, and promoted, by
/// Sentinel or the Cluster: forgotten then, the primary would hand out past what it holds. So
/// the command refuses a member connected now, and otherwise blocks its client while a thread
/// connects to the address ([`crate::host::probe`]): a refusal (nothing listens there) lets
/// it go ([`forget_probed`]); a server answering, or no answer at all (a partition), keeps it.
/// `Ok(Some(false))`: no such member; `Ok(None)`: the reply follows the probe.
pub(crate) fn forget(ctx: &Ctx, addr: &str) -> Result<Option<bool>, Error> {
    let member = state().book.members.may_forget(addr);
    if !member.map_err(|ForgetError::Online| connected(addr))? {
        return Ok(Some(false));
    }
    let Some(bc) = ctx.block() else {
        return Err(Error::Static(
            c"ERR FENCE.FORGET checks that nothing answers at the replica's address first, which a call inside MULTI, a script or a function cannot wait for",
        ));
    };
    // The handle goes to the probe's thread, or, should that not start, back here: exactly one
    // of the two unblocks it.
    // From the address the server's own links leave from, where it sets one.
    let from = ctx
        .config_string(c"bind-source-addr")
        .and_then(|a| a.parse::<std::net::IpAddr>().ok());
    let handle = std::sync::Arc::new(std::sync::Mutex::new(Some(bc)));
    let theirs = std::sync::Arc::clone(&handle);
    let owned = addr.to_owned();
    let started = crate::host::probe::probe_in_background(
        addr.to_owned(),
        from,
        PROBE_TIMEOUT,
        move |found| {
            let bc = theirs.lock().ok().and_then(|mut h| h.take());
            if let Some(bc) = bc {
                release(bc, Unblocked::Forget(owned, found));
            }
        },
    );
    if !started {
        let bc = handle.lock().ok().and_then(|mut h| h.take());
        if let Some(bc) = bc {
            let why = "its probe's thread could not start".to_owned();
            release(bc, Unblocked::Forget(addr.to_owned(), Probe::NoAnswer(why)));
        }
    }
    Ok(None)
}

fn connected(addr: &str) -> Error {
    Error::Text(format!(
        "ERR replica {addr} is connected to this primary: it counts again at the next reading, \
         so it cannot be forgotten (stop it, or make it replicate another node, first)"
    ))
}

/// FENCE.FORGET's reply, once its probe of `addr` found `found` (a blocked client's reply
/// callback): forgotten only when nothing runs there and it is still offline.
pub(super) fn forget_probed(ctx: &Ctx, addr: &str, found: &Probe) -> Result<bool, Error> {
    match found {
        Probe::Nothing => {}
        Probe::Listening => {
            return Err(Error::Text(format!(
                "ERR replica {addr} answers at its address, though not connected to this \
                 primary: Sentinel or the Cluster may still reach it and promote it, so the \
                 fence keeps counting it. Stop it first (SHUTDOWN), then FENCE.FORGET"
            )))
        }
        Probe::NoAnswer(why) => {
            return Err(Error::Text(format!(
                "ERR replica {addr} does not answer at its address ({why}), as under a \
                 partition that may leave it reachable to Sentinel or the Cluster, which could \
                 promote it: the fence keeps counting it. Stop it first (FENCE.FORGET then finds \
                 nothing listening there); if its machine cannot be reached at all, fail over to \
                 another replica (SENTINEL FAILOVER, or CLUSTER FAILOVER on one): the new \
                 primary's term does not count it"
            )))
        }
    }
    let mut st = state();
    let forgotten = st
        .book
        .members
        .forget(addr)
        .map_err(|ForgetError::Online| connected(addr))?;
    if forgotten {
        publish(&st);
        drop(st);
        ctx.log_notice(&format!(
            "imid: FENCE.FORGET: the fence no longer counts {addr} (nothing listens at its \
             address)"
        ));
        // What the others acknowledged may now release waiting calls.
        arm_tick(ctx);
    }
    Ok(forgotten)
}
