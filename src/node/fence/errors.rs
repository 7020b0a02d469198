//! The gate's error texts: each names the rule broken and what the client can do.

use super::state::{mono_ms, state, NONE, PUBLISHED};
use crate::config::{fence_timeout_ms, FENCE_ACK};
use crate::core::durable::Level;
use crate::core::fence::{gone_at, Member, Members};
use crate::error::Error;
use std::sync::atomic::Ordering::Relaxed;

pub(super) fn timed_out() -> Error {
    let st = state();
    Error::Text(format!(
        "NOREPLICAS imid: not acknowledged within {} ms by every replica of this primary's term \
         ({}; imid.fence-replicas {}, imid.fence-timeout); nothing was handed out, a retry is \
         safe (with the same IDMP token, if any)",
        fence_timeout_ms(),
        describe(&st.book.members, mono_ms()),
        st.required,
    ))
}

pub(super) fn not_durable(level: Level) -> Error {
    let st = state();
    let what = match level {
        Level::Written => {
            "Redis's AOF write was postponed behind a slow fsync (appendfsync everysec) for"
        }
        Level::Fsynced => "the AOF was not fsynced within",
    };
    let why = st
        .fsync_error
        .as_ref()
        .map_or_else(String::new, |e| format!(" (the last fsync failed: {e})"));
    Error::Text(format!(
        "NOTDURABLE imid: {what} {} ms{why}, and a crash could take back what it holds; nothing \
         was handed out, a retry is safe (with the same IDMP token, if any)",
        fence_timeout_ms(),
    ))
}

/// The members as the errors name them: `ip:port`, and for an offline one since when.
pub(super) fn describe(members: &Members, now_ms: u64) -> String {
    if members.is_empty() {
        return "none attached yet".to_owned();
    }
    let fsynced = FENCE_ACK.fsynced();
    members
        .list()
        .iter()
        .map(|m| {
            let lagging = match m.fsynced {
                Some(f) if fsynced && f < m.ack => " fsynced behind what it applied",
                _ => "",
            };
            let addr = if m.width > 1 {
                format!(
                    "{} ({} of the {} replicas announcing it connected)",
                    m.addr, m.connected, m.width
                )
            } else {
                m.addr.clone()
            };
            if let (true, Some(q)) = (m.online, m.quiet_since) {
                format!(
                    "{addr} silent for {:.1} s",
                    now_ms.saturating_sub(q) as f64 / 1000.0
                )
            } else if m.online {
                format!("{addr}{lagging}")
            } else {
                format!(
                    "{addr} not connected for {:.1} s",
                    now_ms.saturating_sub(m.since_ms) as f64 / 1000.0
                )
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn too_few(online: usize, required: u64) -> Error {
    Error::Text(format!(
        "NOREPLICAS imid: {online} replica(s) online, imid.fence-replicas requires {required}; \
         nothing was handed out"
    ))
}

/// A member has been offline for at least `imid.fence-timeout`: a call that would wait for it
/// is refused at once instead (it would only time out), naming it and what to do.
pub(super) fn gone_too_long() -> Option<Error> {
    let since = PUBLISHED.gone_since.load(Relaxed);
    let now = mono_ms();
    if since == NONE || now.saturating_sub(since) < fence_timeout_ms() {
        return None;
    }
    let st = state();
    let gone: Vec<&Member> = st.book.members.gone();
    let first = gone.first()?;
    let how = if first.online {
        "has not acknowledged anything"
    } else {
        "has not been connected"
    };
    Some(Error::Text(format!(
        "NOREPLICAS imid: replica {} of this primary's term {how} for {:.1} s and may hold less \
         than this primary handed out (a failover could promote it); nothing was handed out, a \
         retry is safe once it is back, or once a failover has replaced this primary",
        first.addr,
        now.saturating_sub(gone_at(first)) as f64 / 1000.0,
    )))
}

pub(super) fn cannot_wait() -> Error {
    Error::Text(format!(
        "NOREPLICAS imid: the replicas have not acknowledged enough yet (imid.fence-replicas \
         {}), and a call inside MULTI, a script or a function cannot wait for them; nothing was \
         handed out, retry outside or later",
        state().required
    ))
}

pub(super) fn aof_cannot_wait() -> Error {
    Error::Static(
        c"NOTDURABLE imid: the AOF does not hold enough yet (a slow fsync), and a call inside MULTI, a script or a function cannot wait for it; nothing was handed out, retry outside or later",
    )
}

/// [`store_skip_alone`]'s refusal.
pub(crate) fn skip_refused() -> Error {
    Error::Text(format!(
        "NOREPLICAS imid: this sequence's first value on this node skips imid.seq-gap and must \
         wait until the replicas hold the skip (imid.fence-replicas {}), which a call inside \
         MULTI, a script or a function cannot; the skip was made and sent to them, no value \
         was handed out: retry in a moment",
        state().required
    ))
}

pub(super) fn demoted() -> Error {
    Error::Static(
        c"NOREPLICAS imid: this node stopped being a primary before its replicas acknowledged; nothing was handed out, retry on the primary",
    )
}
