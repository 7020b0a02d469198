//! The stale candidate (issue 44): a replica told to follow a primary it never synced from
//! holds only an older term's data, while that primary may have handed out values far past
//! it. Sentinel does not rule such a replica out (after `+switch-master` every replica it knows
//! is a candidate, `replica-priority` ranks first, and its offset is the previous term's), nor
//! does a Cluster election by offset alone. So, with the fence configured on:
//! - on a replica, while it follows a primary it has not synced from, imid holds its
//!   `replica-priority` at 0 (in Cluster `cluster-replica-no-failover yes` too), so that
//!   Sentinel and the Cluster promote another, and gives the value back once it has synced;
//! - a node promoted anyway is *stale*: it hands out nothing ([`refusal`]) until it is made a
//!   replica again (and syncs), or an operator who knows that term's data is gone for good
//!   says so (`FENCE.STALE CLEAR`).
//!
//! "Synced" is its link up to that primary (`master_link_status:up`): a partial or full
//! resync done. At load a replica counts as synced from the primary it is configured to follow
//! (its files hold what it acknowledged there); a demoted primary as synced from nobody.

use super::state::{publish, state, Held, PUBLISHED};
use crate::error::Error;
use crate::host::server::ServerInfo;
use crate::host::Ctx;
use std::sync::atomic::Ordering::Relaxed;

/// The cron, on a replica: which primary it follows, whether it has synced from it, and the
/// failover settings held or given back accordingly. On a primary: settings still held given
/// back (promoted: they no longer matter, and a later demotion holds them again).
pub(crate) fn upkeep(ctx: &Ctx, primary: bool) {
    if primary {
        release(ctx);
        return;
    }
    let Some(info) = ServerInfo::read(c"replication") else {
        return;
    };
    let (Some(host), Some(port)) = (info.text(c"master_host"), info.int_field(c"master_port"))
    else {
        return;
    };
    let master = format!("{host}:{port}");
    let up = info.text_is(c"master_link_status", "up");
    let hold = {
        let mut st = state();
        let f = &mut st.follow;
        if f.synced_from.is_none() {
            // The first reading after load: its files come from this primary's term.
            f.synced_from = Some(master.clone());
        }
        if up {
            f.synced_from = Some(master.clone());
        }
        let unsynced = f.synced_from.as_deref() != Some(master.as_str());
        f.unsynced = unsynced;
        f.following = Some(master.clone());
        unsynced && st.required > 0
    };
    if hold {
        hold_settings(ctx, &master);
    } else {
        release(ctx);
    }
}

/// Holds `replica-priority` at 0 (and in Cluster `cluster-replica-no-failover yes`) while
/// this replica follows `master` without having synced from it; logged once.
fn hold_settings(ctx: &Ctx, master: &str) {
    if state().follow.held.is_some() {
        return;
    }
    let priority = ctx.config_u64(c"replica-priority");
    let mut held = Held {
        priority: None,
        no_failover: false,
    };
    if let Some(p) = priority.filter(|&p| p > 0) {
        if ctx.config_set(c"replica-priority", c"0") {
            held.priority = Some(p);
        }
    }
    if crate::config::CLUSTER_MODE.load(Relaxed)
        && ctx.config_yes(c"cluster-replica-no-failover") == Some(false)
        && ctx.config_set(c"cluster-replica-no-failover", c"yes")
    {
        held.no_failover = true;
    }
    let from = {
        let mut st = state();
        st.follow.held = Some(held);
        st.follow.synced_from.clone().unwrap_or_default()
    };
    let from = if from.is_empty() {
        "its own data as a primary".to_owned()
    } else {
        format!("{from}'s")
    };
    ctx.log_notice(&format!(
        "imid: this replica follows {master} and holds {from} data, not synced from it yet: \
         that primary may have handed out values this data lacks, so until it syncs \
         replica-priority is 0{}{} (a failover promotes another replica)",
        held.priority
            .map_or_else(|| " (it was 0)".to_owned(), |p| format!(" (was {p})")),
        if held.no_failover {
            " and cluster-replica-no-failover yes"
        } else {
            ""
        }
    ));
}

/// Gives the held settings back, where they still are what imid set (an operator's change
/// since stays).
fn release(ctx: &Ctx) {
    let Some(held) = state().follow.held.take() else {
        return;
    };
    if let Some(p) = held.priority {
        if ctx.config_u64(c"replica-priority") == Some(0) {
            if let Ok(v) = std::ffi::CString::new(p.to_string()) {
                ctx.config_set(c"replica-priority", &v);
            }
        }
    }
    if held.no_failover && ctx.config_yes(c"cluster-replica-no-failover") == Some(true) {
        ctx.config_set(c"cluster-replica-no-failover", c"no");
    }
    ctx.log_notice(&format!(
        "imid: this node {}: failover settings given back{}",
        if ctx.is_primary() {
            "is a primary"
        } else {
            "synced from the primary it follows"
        },
        held.priority
            .map_or_else(String::new, |p| format!(" (replica-priority {p})"))
    ));
}

/// A role change: promoted, the node is stale if it followed a primary it had not synced from
/// (with the fence configured on); demoted, it holds its own term's data, synced from nobody.
pub(super) fn role_changed(primary: bool) -> Option<String> {
    let mut st = state();
    let required = st.required;
    let f = &mut st.follow;
    if primary {
        f.stale = f.following.clone().filter(|_| f.unsynced && required > 0);
    } else {
        f.stale = None;
        f.synced_from = Some(String::new());
    }
    f.unsynced = false;
    f.following = None;
    let stale = f.stale.clone();
    PUBLISHED.stale.store(stale.is_some(), Relaxed);
    publish(&st);
    stale
}

/// The refusal of every hand-out on a stale primary.
pub(super) fn refusal() -> Error {
    let master = state().follow.stale.clone().unwrap_or_default();
    Error::Text(format!(
        "NOREPLICAS imid: this node was promoted while it followed {master}, a primary it had \
         not synced from, so its data may lack values that primary handed out; it hands out \
         nothing (nothing was handed out). Make it a replica of the node holding that \
         primary's data, or, if that data is gone for good: FENCE.STALE CLEAR"
    ))
}

/// `FENCE.STALE`: the primary this node was promoted without having synced from, if any.
pub(crate) fn stale() -> Option<String> {
    state().follow.stale.clone()
}

/// `FENCE.STALE CLEAR`: an operator says the data of the term this node missed is gone for
/// good; it hands out again from its own. Whether it was stale.
pub(crate) fn clear(ctx: &Ctx) -> bool {
    let was = {
        let mut st = state();
        let was = st.follow.stale.take();
        PUBLISHED.stale.store(false, Relaxed);
        publish(&st);
        was
    };
    if let Some(m) = &was {
        ctx.log_warning(&format!(
            "imid: FENCE.STALE CLEAR: this primary hands out again from its own data, though it \
             never synced from {m}"
        ));
    }
    was.is_some()
}

/// Whether the node holds its failover settings (`INFO imid`).
pub(super) fn holding() -> bool {
    state().follow.held.is_some()
}
