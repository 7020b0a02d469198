//! The fence's bookkeeping, Redis-free (issue 27; docs/durability.md, "The fence"): a primary
//! hands out nothing that the replica which would replace it does not know. "Knows" is read
//! from replication offsets: a replica that acknowledged offset `A` holds every write this
//! primary propagated up to `A`. Three things are tracked here, each against offsets the node
//! reads from the server (`node::fence`):
//!
//! - sequences, by a node-wide **budget** ([`Ring`], [`within`]): the node counts every increase
//!   of a sequence value it makes (`advanced`), and samples `(offset, advanced)` pairs. A call
//!   may reply at once while `advanced` (with the call's own increase) is at most `imid.seq-gap`
//!   above the count of the newest sample whose offset the replicas acknowledged. Why that is
//!   enough: such a replica holds every key at its value at that sample or later, each marked
//!   for the gap, so once promoted its first NEXT on a key lies at least `gap + 1` above that
//!   value, above everything this node handed out since (at most `gap` more);
//! - message IDs and UIDs, by acknowledged **lease marks** ([`Marks`]): an ID is handed out at
//!   once only when its time lies below a lease renewal (`MSGID.FLOOR`, `UID.FLOOR`) that the
//!   replicas acknowledged, which a promoted replica inherits as its floor;
//! - calls that must wait ([`Queue`]): each waits for the offset that covers its own write,
//!   stamped after the write was propagated, or until its deadline.

use std::collections::VecDeque;

/// How many replicas of a term are remembered at most (far above any replica count a server
/// has; a primary that sees more stops adding and counts none as acknowledged: [`Members`]).
pub const MEMBERS: usize = 256;

/// The replicas of this primary's term (issue 34): every replica that was online here since
/// the term began (this node became primary, started, or turned the fence on), each with the
/// offset it last acknowledged, counted until this node's term ends or an operator says one
/// is gone ([`Members::forget`]).
///
/// Why every one, not the `n` most up to date: Sentinel and Cluster promote the replica they
/// can reach, not the one that acknowledged. In a split, the replica on the primary's side
/// keeps acknowledging it while the other one is promoted; after an operator's failover the
/// replica not chosen acknowledges the old primary until it is told to follow the new one. A
/// member that is not online any more (cut off, promoted elsewhere, down) holds at least what
/// it last acknowledged, so its last offset still counts: the node goes on within the budget
/// above it and no further.
#[derive(Debug, Default)]
pub struct Members {
    list: Vec<Member>,
    /// More replicas were seen than [`MEMBERS`]: nothing counts as acknowledged.
    overflow: bool,
}

/// One replica of the term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// `ip:port`, as the replica announces itself (`ROLE`).
    pub addr: String,
    /// The offset it acknowledged last (on its current link while online).
    pub ack: u64,
    pub online: bool,
    /// When it joined (online) or went offline, ms on the caller's clock.
    pub since_ms: u64,
    /// Online, but silent: since when it has sent no acknowledgement ([`Members::lags`]).
    pub quiet_since: Option<u64>,
}

/// A replica online whose last acknowledgement is this many seconds old (Redis's `lag`) or
/// more is silent: a replica acknowledges every second by itself, so it is cut off or
/// stopped, though its link still looks up (a cut drops no connection until
/// `repl-timeout`).
pub const QUIET_S: u64 = 2;

/// What a reading of the online replicas changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Replicas that joined the term now: what was counted as acknowledged before did not
    /// count them, so the caller starts its acknowledgements over.
    pub joined: usize,
}

impl Members {
    pub const fn new() -> Members {
        Members {
            list: Vec::new(),
            overflow: false,
        }
    }

    /// One reading of the replicas online now (`(addr, acknowledged offset)`, as `ROLE` lists
    /// them) at `now_ms`: new ones join, each member's offset and state follow.
    pub fn observe(&mut self, online: &[(String, u64)], now_ms: u64) -> Observed {
        let mut seen = Observed::default();
        for m in &mut self.list {
            let now = online
                .iter()
                .filter(|(a, _)| *a == m.addr)
                .map(|&(_, ack)| ack)
                .max();
            match now {
                // Online: its link's offset (0 until its first acknowledgement on a new link:
                // lower, so never more than it holds).
                Some(ack) => {
                    if !m.online {
                        m.online = true;
                        m.since_ms = now_ms;
                        m.quiet_since = None;
                    }
                    m.ack = ack;
                }
                // Offline: it holds at least what it acknowledged last.
                None if m.online => {
                    m.online = false;
                    m.since_ms = now_ms;
                    m.quiet_since = None;
                }
                None => {}
            }
        }
        for (addr, ack) in online {
            if self.list.iter().any(|m| m.addr == *addr) {
                continue;
            }
            if self.list.len() >= MEMBERS {
                self.overflow = true;
                continue;
            }
            self.list.push(Member {
                addr: addr.clone(),
                ack: *ack,
                online: true,
                since_ms: now_ms,
                quiet_since: None,
            });
            seen.joined += 1;
        }
        seen
    }

    /// The offset every member holds, once at least `required` of them are online: the lowest
    /// acknowledgement among them all, the offline ones included. `None` when `required` is 0
    /// (the fence is off), fewer are online, or no member is known.
    pub fn acked(&self, required: usize) -> Option<u64> {
        if required == 0 || self.overflow || self.online() < required {
            return None;
        }
        self.list.iter().map(|m| m.ack).min()
    }

    pub fn online(&self) -> usize {
        self.list.iter().filter(|m| m.online).count()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn list(&self) -> &[Member] {
        &self.list
    }

    /// Redis's `lag` of each replica online (`(addr, seconds since its last
    /// acknowledgement)`, from `INFO replication`) at `now_ms`: one silent for [`QUIET_S`] or
    /// more is noted quiet from when it last acknowledged; one that acknowledges again is not.
    pub fn lags(&mut self, lags: &[(String, u64)], now_ms: u64) {
        for m in self.list.iter_mut().filter(|m| m.online) {
            let lag = lags.iter().find(|(a, _)| *a == m.addr).map(|&(_, l)| l);
            m.quiet_since = match lag {
                Some(l) if l >= QUIET_S => {
                    let since = now_ms.saturating_sub(l.saturating_mul(1000));
                    Some(m.quiet_since.map_or(since, |q| q.min(since)))
                }
                _ => None,
            };
        }
    }

    /// Since when the longest-gone member is gone: offline, or online but silent.
    pub fn gone_since(&self) -> Option<u64> {
        self.gone().first().map(|m| gone_at(m))
    }

    /// The members offline now, the longest gone first.
    pub fn offline(&self) -> Vec<&Member> {
        let mut v: Vec<&Member> = self.list.iter().filter(|m| !m.online).collect();
        v.sort_by_key(|m| m.since_ms);
        v
    }

    /// The members offline or silent now, the longest gone first.
    pub fn gone(&self) -> Vec<&Member> {
        let mut v: Vec<&Member> = self
            .list
            .iter()
            .filter(|m| !m.online || m.quiet_since.is_some())
            .collect();
        v.sort_by_key(|m| gone_at(m));
        v
    }

    /// An operator says the member at `addr` is gone for good: it stops counting. Refused
    /// for a member online now (the next reading would count it again at once).
    pub fn forget(&mut self, addr: &str) -> Result<bool, ForgetError> {
        match self.list.iter().position(|m| m.addr == addr) {
            None => Ok(false),
            Some(i) if self.list.get(i).is_some_and(|m| m.online) => Err(ForgetError::Online),
            Some(i) => {
                self.list.remove(i);
                Ok(true)
            }
        }
    }

    /// The term ended (or began): nobody counts.
    pub fn clear(&mut self) {
        self.list.clear();
        self.overflow = false;
    }
}

/// Of the `addrs` (members offline now), those `CLUSTER NODES` (`nodes`, this node's view)
/// shows as replicas of another primary: in Cluster, a replica runs for its own primary's
/// slots only, so one that migrated to another primary (replica migration, or `CLUSTER
/// REPLICATE` by an operator) can no longer take over from this one. A member the view does
/// not show at all is kept (its address there may differ from the one it announces to
/// `ROLE`), as is one shown as a primary or as this node's replica.
pub fn replicating_elsewhere(nodes: &[u8], addrs: &[&str]) -> Vec<String> {
    let text = String::from_utf8_lossy(nodes);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split(' ').collect::<Vec<&str>>())
        .filter(|f| f.len() >= 4)
        .collect();
    let flags =
        |f: &Vec<&str>, flag: &str| f.get(2).is_some_and(|x| x.split(',').any(|y| y == flag));
    let Some(me) = lines
        .iter()
        .find(|f| flags(f, "myself"))
        .and_then(|f| f.first().copied())
    else {
        return Vec::new();
    };
    addrs
        .iter()
        .filter(|a| {
            lines.iter().any(|f| {
                let addr = f.get(1).and_then(|x| x.split('@').next());
                let master = f.get(3).copied().unwrap_or("-");
                addr == Some(**a)
                    && (flags(f, "slave") || flags(f, "replica"))
                    && master != "-"
                    && master != me
            })
        })
        .map(|a| (*a).to_owned())
        .collect()
}

/// Since when a member is gone: offline since, or silent since.
pub fn gone_at(m: &Member) -> u64 {
    if m.online {
        m.quiet_since.unwrap_or(u64::MAX)
    } else {
        m.since_ms
    }
}

/// One replica of `INFO replication` (`slave0:ip=127.0.0.3,port=6379,state=online,
/// offset=1234,lag=0`, the value after the colon): `(ip:port, lag)` of an online one.
pub fn info_replica(value: &str) -> Option<(String, u64)> {
    let field = |name: &str| {
        value
            .split(',')
            .find_map(|kv| kv.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
    };
    if field("state")? != "online" {
        return None;
    }
    let lag = field("lag")?.parse().ok()?;
    Some((format!("{}:{}", field("ip")?, field("port")?), lag))
}

/// Why [`Members::forget`] refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ForgetError {
    Online,
}

/// Whether a call that raises sequence values by `increase` may reply at once: `advanced`
/// (the node's count before the call) plus `increase` is at most `gap` above `acked`, the count
/// of the newest acknowledged sample (`None`: nothing acknowledged yet, so nothing may be
/// handed out unacknowledged).
#[inline(always)]
pub fn within(advanced: u64, increase: u64, acked: Option<u64>, gap: u64) -> bool {
    match acked {
        Some(a) => advanced.saturating_add(increase).saturating_sub(a) <= gap,
        None => false,
    }
}

/// How many samples the ring keeps; when full, the newest is replaced (a later sample covers
/// more, so nothing is lost but granularity).
pub const RING: usize = 64;

/// `(offset, advanced)` samples not yet acknowledged, oldest first; offsets and counts never
/// decrease along the ring.
#[derive(Debug, Default)]
pub struct Ring {
    samples: VecDeque<(u64, u64)>,
    /// The count of the newest sample kept since the last [`Ring::clear`], acknowledged or not.
    last: Option<u64>,
}

impl Ring {
    pub const fn new() -> Ring {
        Ring {
            samples: VecDeque::new(),
            last: None,
        }
    }

    /// Records that every increase counted in `advanced` was propagated at or before `offset`.
    /// A sample that adds nothing (the count has not moved since the newest one, even one
    /// already acknowledged) is dropped: it would only make the replicas acknowledge again (the
    /// offset moves with every `REPLCONF GETACK` the fence sends itself).
    pub fn push(&mut self, offset: u64, advanced: u64) {
        if self.last.is_some_and(|a| a >= advanced) {
            return;
        }
        self.last = Some(advanced);
        let full = self.samples.len() >= RING;
        match self.samples.back_mut() {
            Some(last) if full => *last = (offset.max(last.0), advanced),
            _ => self.samples.push_back((offset, advanced)),
        }
    }

    /// The replicas acknowledged `offset`: drops every sample at or below it and returns the
    /// count of the newest of them (`None` when none was).
    pub fn ack(&mut self, offset: u64) -> Option<u64> {
        let mut newest = None;
        while let Some(&(o, a)) = self.samples.front() {
            if o > offset {
                break;
            }
            newest = Some(a);
            self.samples.pop_front();
        }
        newest
    }

    /// The count of the newest sample, acknowledged or not.
    pub fn newest(&self) -> Option<u64> {
        self.samples.back().map(|&(_, a)| a)
    }

    /// The offset of the newest sample not yet acknowledged.
    pub fn newest_offset(&self) -> Option<u64> {
        self.samples.back().map(|&(o, _)| o)
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn clear(&mut self) {
        self.samples.clear();
        self.last = None;
    }
}

/// How many lease renewals wait for their acknowledgement at most; beyond it the newest is
/// replaced by the newer renewal (its later offset covers both).
pub const MARKS: usize = 8;

/// A lease's renewals waiting for the replicas (each with the offset that carries it, once
/// known) and the highest one they acknowledged: IDs with a time below [`Marks::acked`] may be
/// handed out at once.
#[derive(Debug, Default)]
pub struct Marks {
    pending: VecDeque<(u64, Option<u64>)>,
    acked: u64,
}

impl Marks {
    pub const fn new() -> Marks {
        Marks {
            pending: VecDeque::new(),
            acked: 0,
        }
    }

    /// A renewal to `until` was propagated in the running call; its offset is stamped later.
    pub fn push(&mut self, until: u64) {
        if self.pending.len() >= MARKS {
            if let Some(last) = self.pending.back_mut() {
                *last = (until.max(last.0), None);
            }
            return;
        }
        self.pending.push_back((until, None));
    }

    /// Every renewal propagated so far lies at or below `offset`.
    pub fn stamp(&mut self, offset: u64) {
        for (_, at) in self.pending.iter_mut().rev() {
            if at.is_some() {
                break;
            }
            *at = Some(offset);
        }
    }

    /// The replicas acknowledged `offset`: renewals stamped at or below it count.
    pub fn ack(&mut self, offset: u64) {
        while let Some(&(until, Some(at))) = self.pending.front() {
            if at > offset {
                break;
            }
            self.acked = self.acked.max(until);
            self.pending.pop_front();
        }
    }

    /// A renewal the replicas acknowledged by another way (a message-ID renewal, whose replay
    /// raises the UID floor too).
    pub fn raise(&mut self, until: u64) {
        self.acked = self.acked.max(until);
    }

    /// Every ID with a time below this may be handed out at once.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// The highest renewal not yet acknowledged.
    pub fn pending(&self) -> Option<u64> {
        self.pending.iter().map(|&(u, _)| u).max()
    }

    /// The highest offset a renewal not yet acknowledged was stamped with.
    pub fn highest_target(&self) -> Option<u64> {
        self.pending.iter().filter_map(|&(_, at)| at).max()
    }

    /// A replica joined: nothing counts as acknowledged until it acknowledges too. The highest
    /// renewal (acknowledged or not) waits again, to be stamped with the next offset (every
    /// renewal was propagated by then).
    pub fn restart(&mut self) {
        let top = self.pending().map_or(self.acked, |p| p.max(self.acked));
        self.pending.clear();
        self.acked = 0;
        if top > 0 {
            self.pending.push_back((top, None));
        }
    }

    pub fn clear(&mut self) {
        self.pending.clear();
        self.acked = 0;
    }
}

/// The calls waiting for the replicas, oldest first: each with the offset that covers its
/// write (stamped after the write was propagated) and its deadline.
#[derive(Debug)]
pub struct Queue<H> {
    waiting: VecDeque<Waiter<H>>,
}

#[derive(Debug)]
struct Waiter<H> {
    handle: H,
    target: Option<u64>,
    deadline_ms: u64,
}

impl<H> Default for Queue<H> {
    fn default() -> Self {
        Queue {
            waiting: VecDeque::new(),
        }
    }
}

impl<H> Queue<H> {
    pub const fn new() -> Queue<H> {
        Queue {
            waiting: VecDeque::new(),
        }
    }

    /// A call waits from now on; its offset is stamped by the next [`Queue::stamp`].
    pub fn push(&mut self, handle: H, deadline_ms: u64) {
        self.waiting.push_back(Waiter {
            handle,
            target: None,
            deadline_ms,
        });
    }

    /// Every write of the waiting calls was propagated at or below `offset`. Returns whether
    /// any call was stamped.
    pub fn stamp(&mut self, offset: u64) -> bool {
        let mut any = false;
        for w in self.waiting.iter_mut().rev() {
            if w.target.is_some() {
                break;
            }
            w.target = Some(offset);
            any = true;
        }
        any
    }

    /// The highest offset a waiting call needs.
    pub fn highest_target(&self) -> Option<u64> {
        self.waiting.iter().filter_map(|w| w.target).max()
    }

    /// The calls whose writes the replicas acknowledged with `offset`, oldest first.
    pub fn take_acked(&mut self, offset: u64) -> Vec<H> {
        let mut out = Vec::new();
        while self
            .waiting
            .front()
            .is_some_and(|w| w.target.is_some_and(|t| t <= offset))
        {
            if let Some(w) = self.waiting.pop_front() {
                out.push(w.handle);
            }
        }
        out
    }

    /// The calls whose deadline has passed (from the oldest, until one that has not).
    pub fn take_expired(&mut self, now_ms: u64) -> Vec<H> {
        let mut out = Vec::new();
        while self
            .waiting
            .front()
            .is_some_and(|w| w.deadline_ms <= now_ms)
        {
            if let Some(w) = self.waiting.pop_front() {
                out.push(w.handle);
            }
        }
        out
    }

    /// Every waiting call.
    pub fn drain(&mut self) -> Vec<H> {
        self.waiting.drain(..).map(|w| w.handle).collect()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// How many targets' gap skips wait for the replicas at most; beyond it a skip is charged to
/// the node-wide budget instead (as a whole `imid.seq-gap`: safe, it only makes every sequence
/// call of the node wait for it).
pub const SKIPS: usize = 1024;

/// Gap skips not yet acknowledged, each charged to its own target (a sequence key, a map's
/// field: `id`, a hash of its name, so a collision only makes another target wait too) rather
/// than to the node-wide budget: until the replicas acknowledge the sample whose count reaches
/// `count`, that target's calls wait and the node's other sequences go on within the budget.
/// Why this is enough: a promoted replica that never saw the skip holds the target at its
/// value before it (marked, or missing on a node that is itself inherited), so it would hand
/// out the very values the skip made room for; once it holds the skip, the budget's argument
/// applies to the target as to any other.
#[derive(Debug, Default)]
pub struct Skips {
    pending: Vec<(u64, u64)>,
}

impl Skips {
    pub const fn new() -> Skips {
        Skips {
            pending: Vec::new(),
        }
    }

    /// The skip of `id`, covered once the acknowledged count reaches `count`; `false` (nothing
    /// recorded) when [`SKIPS`] are pending already.
    pub fn insert(&mut self, id: u64, count: u64) -> bool {
        if let Some(e) = self.pending.iter_mut().find(|e| e.0 == id) {
            e.1 = e.1.max(count);
            return true;
        }
        if self.pending.len() >= SKIPS {
            return false;
        }
        self.pending.push((id, count));
        true
    }

    /// Whether `id` has a skip the acknowledged count `acked` does not cover.
    pub fn pending(&self, id: u64, acked: Option<u64>) -> bool {
        self.pending
            .iter()
            .any(|&(i, c)| i == id && acked.is_none_or(|a| c > a))
    }

    /// Forgets the skips `acked` covers.
    pub fn ack(&mut self, acked: u64) {
        self.pending.retain(|&(_, c)| c > acked);
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn online(list: &[(&str, u64)]) -> Vec<(String, u64)> {
        list.iter().map(|&(a, o)| (a.to_owned(), o)).collect()
    }

    #[test]
    fn every_member_of_the_term_must_hold_the_offset() {
        let mut m = Members::default();
        assert_eq!(m.acked(1), None, "no member yet");
        let seen = m.observe(&online(&[("a:1", 50), ("b:1", 90)]), 0);
        assert_eq!(seen.joined, 2);
        assert_eq!(m.acked(0), None, "required 0: the fence is off");
        assert_eq!(m.acked(1), Some(50), "the lowest, not the highest");
        assert_eq!(m.acked(2), Some(50));
        assert_eq!(m.acked(3), None, "fewer online than required");
        // b is cut off (promoted elsewhere, or down): its last offset still counts, and a's
        // later acknowledgements do not pass it.
        assert_eq!(m.observe(&online(&[("a:1", 500)]), 10).joined, 0);
        assert_eq!(m.acked(1), Some(90));
        assert_eq!(m.online(), 1);
        assert_eq!(
            m.offline().first().map(|x| (x.addr.as_str(), x.since_ms)),
            Some(("b:1", 10))
        );
        assert_eq!(m.acked(2), None);
        // b comes back on a new link, 0 until its first acknowledgement there.
        m.observe(&online(&[("a:1", 600), ("b:1", 0)]), 20);
        assert_eq!(m.acked(1), Some(0));
        m.observe(&online(&[("a:1", 600), ("b:1", 700)]), 30);
        assert_eq!(m.acked(2), Some(600));
        // A third joins: the caller hears of it.
        assert_eq!(
            m.observe(&online(&[("a:1", 600), ("b:1", 700), ("c:1", 0)]), 40)
                .joined,
            1
        );
        assert_eq!(m.acked(1), Some(0));
    }

    #[test]
    fn a_silent_member_is_gone_though_its_link_looks_up() {
        let mut m = Members::default();
        m.observe(&online(&[("a:1", 5), ("b:1", 9)]), 0);
        assert_eq!(m.gone_since(), None);
        m.lags(&online(&[("a:1", 0), ("b:1", 1)]), 1_000);
        assert_eq!(
            m.gone_since(),
            None,
            "a lag of 1 s is a replica acknowledging"
        );
        m.lags(&online(&[("a:1", 0), ("b:1", 3)]), 10_000);
        assert_eq!(m.gone_since(), Some(7_000));
        assert_eq!(m.gone().first().map(|x| x.addr.as_str()), Some("b:1"));
        m.lags(&online(&[("a:1", 0), ("b:1", 4)]), 11_500);
        assert_eq!(m.gone_since(), Some(7_000), "the earliest silence holds");
        m.lags(&online(&[("a:1", 0), ("b:1", 0)]), 12_000);
        assert_eq!(m.gone_since(), None, "acknowledging again");
        // Silent, then offline: gone from when it went offline; back online, neither.
        m.lags(&online(&[("a:1", 5)]), 20_000);
        assert_eq!(m.gone_since(), Some(15_000));
        m.observe(&online(&[("b:1", 9)]), 21_000);
        assert_eq!(m.gone_since(), Some(21_000));
        assert_eq!(m.gone().len(), 1);
        m.observe(&online(&[("a:1", 9), ("b:1", 9)]), 22_000);
        assert!(m.gone().is_empty());
        assert_eq!(
            info_replica("ip=127.0.0.3,port=6379,state=online,offset=1234,lag=3"),
            Some(("127.0.0.3:6379".to_owned(), 3))
        );
        assert_eq!(
            info_replica("ip=127.0.0.3,port=6379,state=wait_bgsave,offset=0,lag=0"),
            None
        );
        assert_eq!(info_replica("garbage"), None);
    }

    #[test]
    fn only_an_offline_member_can_be_forgotten() {
        let mut m = Members::default();
        m.observe(&online(&[("a:1", 5), ("b:1", 9)]), 0);
        assert_eq!(m.forget("a:1"), Err(ForgetError::Online));
        assert_eq!(m.forget("x:1"), Ok(false));
        m.observe(&online(&[("a:1", 50)]), 1);
        assert_eq!(m.acked(1), Some(9));
        assert_eq!(m.forget("b:1"), Ok(true));
        assert_eq!(m.acked(1), Some(50), "b no longer holds a back");
        assert_eq!(m.len(), 1);
        // Back later: a member again, from its first reading.
        assert_eq!(m.observe(&online(&[("a:1", 60), ("b:1", 0)]), 2).joined, 1);
        m.clear();
        assert!(m.is_empty());
        assert_eq!(m.acked(1), None);
    }

    #[test]
    fn a_member_replicating_another_primary_in_cluster_is_found() {
        let nodes = b"aaa 127.0.0.21:6379@16379 myself,master - 0 0 1 connected 0-5460\n\
bbb 127.0.0.22:6379@16379,host-b slave aaa 0 0 1 connected\n\
ccc 127.0.0.23:6379@16379 slave ddd 0 0 2 connected\n\
ddd 127.0.0.24:6379@16379 master - 0 0 2 connected 5461-10922\n\
eee 127.0.0.25:6379@16379 replica,fail ddd 0 0 2 disconnected\n";
        let gone = [
            "127.0.0.22:6379",
            "127.0.0.23:6379",
            "127.0.0.24:6379",
            "127.0.0.25:6379",
            "10.0.0.9:6379",
        ];
        assert_eq!(
            replicating_elsewhere(nodes, &gone),
            ["127.0.0.23:6379", "127.0.0.25:6379"],
            "mine, a primary and an unknown address stay"
        );
        assert!(
            replicating_elsewhere(b"garbage\n", &gone).is_empty(),
            "no myself line: nothing"
        );
    }

    #[test]
    fn too_many_replicas_count_as_none_acknowledged() {
        let mut m = Members::default();
        let many: Vec<(String, u64)> = (0..=MEMBERS).map(|i| (format!("r:{i}"), 7)).collect();
        m.observe(&many, 0);
        assert_eq!(m.len(), MEMBERS);
        assert_eq!(m.acked(1), None);
        m.clear();
        m.observe(&online(&[("a:1", 5)]), 1);
        assert_eq!(m.acked(1), Some(5));
    }

    #[test]
    fn the_budget_is_the_gap_above_the_acknowledged_count() {
        assert!(!within(0, 1, None, 1000), "nothing acknowledged yet");
        assert!(within(0, 1000, Some(0), 1000));
        assert!(!within(0, 1001, Some(0), 1000));
        assert!(within(5000, 1, Some(4001), 1000));
        assert!(!within(5000, 2, Some(4001), 1000));
        // gap 0: every increase waits for its own write
        assert!(!within(10, 1, Some(10), 0));
        assert!(within(10, 0, Some(10), 0));
        // never wraps
        assert!(!within(u64::MAX, u64::MAX, Some(0), 1000));
    }

    #[test]
    fn a_skip_is_pending_for_its_target_until_its_count_is_acknowledged() {
        let mut s = Skips::default();
        assert!(!s.pending(7, None));
        assert!(s.insert(7, 10));
        assert!(s.pending(7, None), "nothing acknowledged yet");
        assert!(s.pending(7, Some(9)));
        assert!(!s.pending(8, Some(9)), "another target goes on");
        assert!(!s.pending(7, Some(10)), "covered");
        // A second skip of the same target: the later count holds.
        assert!(s.insert(7, 12));
        assert_eq!(s.len(), 1);
        s.ack(11);
        assert!(s.pending(7, Some(11)));
        s.ack(12);
        assert!(s.is_empty());
        // Full: refused, so the caller charges the node instead.
        for i in 0..SKIPS as u64 {
            assert!(s.insert(i, 1));
        }
        assert!(!s.insert(u64::MAX, 1));
        assert!(s.insert(0, 2), "a pending target is updated even when full");
    }

    #[test]
    fn samples_are_acknowledged_in_order() {
        let mut r = Ring::default();
        r.push(100, 10);
        r.push(150, 10); // nothing new: dropped
        assert_eq!(r.len(), 1);
        r.push(200, 20);
        r.push(300, 35);
        assert_eq!(r.ack(99), None);
        assert_eq!(r.ack(250), Some(20));
        assert_eq!(r.newest(), Some(35));
        assert_eq!(r.ack(250), None, "already taken");
        assert_eq!(r.ack(1000), Some(35));
        assert!(r.is_empty());
        // Acknowledged, the count is still not new: a later offset (the fence's own GETACK
        // moved it) adds nothing to ask the replicas for.
        r.push(1100, 35);
        assert!(r.is_empty());
        r.push(1200, 36);
        assert_eq!(r.newest_offset(), Some(1200));
        r.clear();
        r.push(1300, 36);
        assert_eq!(
            r.newest_offset(),
            Some(1300),
            "after clear, nothing is acknowledged"
        );
    }

    #[test]
    fn a_full_ring_replaces_its_newest_sample() {
        let mut r = Ring::default();
        for i in 0..RING as u64 {
            r.push(i * 10, i + 1);
        }
        assert_eq!(r.len(), RING);
        r.push(10_000, 500);
        assert_eq!(r.len(), RING);
        assert_eq!(r.newest(), Some(500));
        // the replaced sample's offset is the newer one: acknowledging the older offset no
        // longer credits the newer count
        assert_eq!(r.ack((RING as u64 - 1) * 10), Some(RING as u64 - 1));
        assert_eq!(r.ack(10_000), Some(500));
    }

    #[test]
    fn lease_marks_count_once_acknowledged() {
        let mut m = Marks::default();
        m.push(5_000);
        assert_eq!(m.acked(), 0);
        m.ack(1_000); // not stamped yet: nothing
        assert_eq!(m.acked(), 0);
        m.stamp(100);
        m.push(7_500);
        m.ack(99);
        assert_eq!((m.acked(), m.pending()), (0, Some(7_500)));
        m.ack(100);
        assert_eq!(m.acked(), 5_000, "the second is not stamped yet");
        m.stamp(180);
        m.ack(180);
        assert_eq!((m.acked(), m.pending()), (7_500, None));
        m.raise(6_000); // never back
        assert_eq!(m.acked(), 7_500);
        m.raise(9_000);
        assert_eq!(m.acked(), 9_000);
        // A replica joins: the highest renewal waits for it again, from the next stamp.
        m.push(9_500);
        m.restart();
        assert_eq!((m.acked(), m.pending()), (0, Some(9_500)));
        m.ack(u64::MAX);
        assert_eq!(m.acked(), 0, "not stamped yet");
        m.stamp(300);
        m.ack(300);
        assert_eq!((m.acked(), m.pending()), (9_500, None));
        m.clear();
        assert_eq!(m.acked(), 0);
    }

    #[test]
    fn many_renewals_collapse_into_the_newest() {
        let mut m = Marks::default();
        for i in 0..20 {
            m.push(1_000 + i);
        }
        assert_eq!(m.pending(), Some(1_019));
        m.stamp(50);
        m.ack(50);
        assert_eq!(m.acked(), 1_019);
    }

    #[test]
    fn waiters_leave_when_acknowledged_or_expired() {
        let mut q = Queue::default();
        q.push('a', 1_000);
        q.push('b', 1_000);
        assert!(
            q.take_acked(u64::MAX).is_empty(),
            "not stamped: never released"
        );
        assert!(q.stamp(10));
        q.push('c', 1_100);
        assert_eq!(q.highest_target(), Some(10));
        assert_eq!(q.take_acked(9), Vec::<char>::new());
        assert_eq!(q.take_acked(10), vec!['a', 'b']);
        assert!(q.take_acked(10).is_empty(), "c is not stamped");
        assert!(q.stamp(20));
        assert!(!q.stamp(30), "nothing left to stamp");
        assert_eq!(q.take_expired(1_099), Vec::<char>::new());
        assert_eq!(q.take_expired(1_100), vec!['c']);
        q.push('d', 5);
        assert_eq!(q.drain(), vec!['d']);
        assert!(q.is_empty());
    }

    /// What the budget promises, against a model that remembers every sample: whatever a call
    /// was allowed to hand out at once lies at most `gap` above the count the replicas hold.
    #[derive(Clone, Debug)]
    enum Op {
        /// A call raising the count by this much asks to reply at once.
        Advance(u64),
        /// The node samples (offset grows by this much first).
        Sample(u64),
        /// The replicas acknowledge up to this fraction of the propagated offset.
        Ack(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u64..400).prop_map(Op::Advance),
            (1u64..50).prop_map(Op::Sample),
            any::<u8>().prop_map(Op::Ack),
        ]
    }

    proptest! {
        #[test]
        fn nothing_at_once_beyond_the_gap_above_what_the_replicas_hold(
            ops in proptest::collection::vec(op(), 1..400),
            gap in 0u64..1500,
        ) {
            let mut ring = Ring::default();
            let mut acked: Option<u64> = None;
            let (mut advanced, mut offset) = (0u64, 0u64);
            // the model: every sample ever taken, and the highest offset acknowledged
            let mut history: Vec<(u64, u64)> = Vec::new();
            let mut acked_offset = None;
            for op in ops {
                match op {
                    Op::Advance(n) => {
                        let now = within(advanced, n, acked, gap);
                        advanced += n;
                        if now {
                            // the replicas hold the count of the newest sample at or below
                            // the acknowledged offset
                            let held = acked_offset.and_then(|a| {
                                history.iter().rev().find(|&&(o, _)| o <= a).map(|&(_, c)| c)
                            });
                            let held = held.expect("something acknowledged");
                            prop_assert!(advanced - held <= gap);
                        }
                        // every increase is propagated at once: the offset moves
                        offset += 1;
                    }
                    Op::Sample(d) => {
                        offset += d;
                        ring.push(offset, advanced);
                        history.push((offset, advanced));
                    }
                    Op::Ack(f) => {
                        let a = offset * u64::from(f) / 255;
                        let a = acked_offset.map_or(a, |p: u64| p.max(a));
                        acked_offset = Some(a);
                        if let Some(c) = ring.ack(a) {
                            acked = Some(acked.map_or(c, |p| p.max(c)));
                        }
                    }
                }
            }
        }
    }
}
