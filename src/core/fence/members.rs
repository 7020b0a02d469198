//! The replicas of a primary's term, and what the server says of them (`ROLE`, `INFO
//! replication`, `CLUSTER NODES`): who must hold an offset before it counts as acknowledged.

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

/// One replica of the term: one address, as `ROLE` lists it. Two or more replicas that
/// announce the same `ip:port` (a copied `replica-announce-ip` line, a replica restarted under
/// another's address) cannot be told apart: they are one member of [`Member::width`]
/// replicas, counted by the lowest acknowledgement among them, and while fewer are connected
/// than were at once, as offline (the one missing may be any of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// `ip:port`, as the replica announces itself (`ROLE`).
    pub addr: String,
    /// The offset it holds by its acknowledgements: the one it acknowledged last on its
    /// current link while online; offline, the last one (with several replicas under the
    /// address, the lowest; while one of them is missing, no more than the lowest when all
    /// were there).
    pub ack: u64,
    /// The offset it reported fsynced to its AOF last (`REPLCONF ACK <off> FACK <aofoff>`,
    /// Redis 7.2+ and Valkey with AOF on); `None` while it reports none.
    pub fsynced: Option<u64>,
    /// Every replica seen under the address is connected.
    pub online: bool,
    /// When it joined (online) or went offline, ms on the caller's clock.
    pub since_ms: u64,
    /// Online, but silent: since when it has sent no acknowledgement ([`Members::lags`]).
    pub quiet_since: Option<u64>,
    /// The most replicas `ROLE` listed at once under this address during the term (1 but for
    /// a misconfiguration).
    pub width: usize,
    /// How many are connected now.
    pub connected: usize,
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
    /// Addresses that now have more replicas behind them than before, above one: the caller
    /// says so (the log), once per growth.
    pub shared: Vec<(String, usize)>,
}

impl Members {
    pub const fn new() -> Members {
        Members {
            list: Vec::new(),
            overflow: false,
        }
    }

    /// One reading of the replicas online now (`(addr, acknowledged offset, fsynced offset)`,
    /// as `ROLE` lists them with what they reported fsynced) at `now_ms`: new ones join, each
    /// member's offsets and state follow. Entries that share an address are one member: never
    /// the highest of their acknowledgements (the budget would renew from one replica while
    /// another, the one a failover promotes, stands still), but the lowest; and when fewer are
    /// listed than were at once, the member is offline and holds no more than the lowest did
    /// when all were there.
    pub fn observe(&mut self, online: &[(String, u64, Option<u64>)], now_ms: u64) -> Observed {
        let mut seen = Observed::default();
        for m in &mut self.list {
            let (n, lowest, fsynced) = under(online, &m.addr);
            m.connected = n;
            match lowest {
                None => {
                    // Offline: it holds at least what it acknowledged last.
                    if m.online {
                        m.online = false;
                        m.since_ms = now_ms;
                        m.quiet_since = None;
                    }
                }
                Some(low) if n >= m.width => {
                    // Every replica of the address is there (0 on a new link until its first
                    // acknowledgement there: lower, so never more than it holds).
                    if n > m.width {
                        seen.joined += n - m.width;
                        m.width = n;
                        seen.shared.push((m.addr.clone(), n));
                    }
                    if !m.online {
                        m.online = true;
                        m.since_ms = now_ms;
                        m.quiet_since = None;
                    }
                    m.ack = low;
                    m.fsynced = fsynced;
                }
                Some(low) => {
                    // One of several is missing, which one is not known: offline, holding no
                    // more than the lowest did, nor more than those still there.
                    if m.online {
                        m.online = false;
                        m.since_ms = now_ms;
                        m.quiet_since = None;
                    }
                    m.ack = m.ack.min(low);
                    m.fsynced = match (m.fsynced, fsynced) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
            }
        }
        for (addr, ..) in online {
            if self.list.iter().any(|m| m.addr == *addr) {
                continue;
            }
            if self.list.len() >= MEMBERS {
                self.overflow = true;
                continue;
            }
            let (n, ack, fsynced) = under(online, addr);
            self.list.push(Member {
                addr: addr.clone(),
                ack: ack.unwrap_or(0),
                fsynced,
                online: true,
                since_ms: now_ms,
                quiet_since: None,
                width: n,
                connected: n,
            });
            seen.joined += n;
            if n > 1 {
                seen.shared.push((addr.clone(), n));
            }
        }
        seen
    }

    /// The offset every member holds, once at least `required` of them are online: the lowest
    /// acknowledgement among them all, the offline ones included, and with `fsynced` (count a
    /// replica by what its AOF holds) a member that reports its fsynced offset by that, when
    /// lower. `None` when `required` is 0 (the fence is off), fewer are online, or no member is
    /// known.
    pub fn acked(&self, required: usize, fsynced: bool) -> Option<u64> {
        if required == 0 || self.overflow || self.online() < required {
            return None;
        }
        self.list.iter().map(|m| m.holds(fsynced)).min()
    }

    /// The replicas connected now (several under one address count each).
    pub fn online(&self) -> usize {
        self.list.iter().map(|m| m.connected).sum()
    }

    /// The members with more than one replica behind their address.
    pub fn shared(&self) -> usize {
        self.list.iter().filter(|m| m.width > 1).count()
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
    /// Of several replicas under one address, the most silent one counts.
    pub fn lags(&mut self, lags: &[(String, u64)], now_ms: u64) {
        for m in self.list.iter_mut().filter(|m| m.online) {
            let lag = lags
                .iter()
                .filter(|(a, _)| *a == m.addr)
                .map(|&(_, l)| l)
                .max();
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

    /// Whether the member at `addr` could be forgotten now: `Ok(false)` for no such member,
    /// refused while any replica under its address is connected (the next reading would
    /// count it again at once).
    pub fn may_forget(&self, addr: &str) -> Result<bool, ForgetError> {
        match self.list.iter().find(|m| m.addr == addr) {
            None => Ok(false),
            Some(m) if m.connected > 0 => Err(ForgetError::Online),
            Some(_) => Ok(true),
        }
    }

    /// An operator says the member at `addr` is gone for good: it stops counting. Refused
    /// as [`Members::may_forget`] says.
    pub fn forget(&mut self, addr: &str) -> Result<bool, ForgetError> {
        if !self.may_forget(addr)? {
            return Ok(false);
        }
        self.list.retain(|m| m.addr != addr);
        Ok(true)
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

/// The entries of `online` under `addr`: how many, the lowest acknowledgement, and the lowest
/// of what each holds on disk (its fsynced offset, or its acknowledgement where it reports
/// none; `None` when none reports one).
fn under(online: &[(String, u64, Option<u64>)], addr: &str) -> (usize, Option<u64>, Option<u64>) {
    let entries = online.iter().filter(|(a, ..)| a == addr);
    let fsynced = entries
        .clone()
        .any(|(.., f)| f.is_some())
        .then(|| entries.clone().map(|&(_, ack, f)| f.unwrap_or(ack)).min())
        .flatten();
    (
        entries.clone().count(),
        entries.map(|&(_, ack, _)| ack).min(),
        fsynced,
    )
}

impl Member {
    /// The offset it holds: what it acknowledged, and with `fsynced`, no more than it
    /// reported fsynced (a replica that reports none counts by its acknowledgement).
    pub fn holds(&self, fsynced: bool) -> u64 {
        match self.fsynced {
            Some(f) if fsynced => f.min(self.ack),
            _ => self.ack,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fence::{online, pairs};

    #[test]
    fn every_member_of_the_term_must_hold_the_offset() {
        let mut m = Members::default();
        assert_eq!(m.acked(1, true), None, "no member yet");
        let seen = m.observe(&online(&[("a:1", 50), ("b:1", 90)]), 0);
        assert_eq!(seen.joined, 2);
        assert_eq!(m.acked(0, true), None, "required 0: the fence is off");
        assert_eq!(m.acked(1, true), Some(50), "the lowest, not the highest");
        assert_eq!(m.acked(2, true), Some(50));
        assert_eq!(m.acked(3, true), None, "fewer online than required");
        // b is cut off (promoted elsewhere, or down): its last offset still counts, and a's
        // later acknowledgements do not pass it.
        assert_eq!(m.observe(&online(&[("a:1", 500)]), 10).joined, 0);
        assert_eq!(m.acked(1, true), Some(90));
        assert_eq!(m.online(), 1);
        assert_eq!(
            m.offline().first().map(|x| (x.addr.as_str(), x.since_ms)),
            Some(("b:1", 10))
        );
        assert_eq!(m.acked(2, true), None);
        // b comes back on a new link, 0 until its first acknowledgement there.
        m.observe(&online(&[("a:1", 600), ("b:1", 0)]), 20);
        assert_eq!(m.acked(1, true), Some(0));
        m.observe(&online(&[("a:1", 600), ("b:1", 700)]), 30);
        assert_eq!(m.acked(2, true), Some(600));
        // A third joins: the caller hears of it.
        assert_eq!(
            m.observe(&online(&[("a:1", 600), ("b:1", 700), ("c:1", 0)]), 40)
                .joined,
            1
        );
        assert_eq!(m.acked(1, true), Some(0));
    }

    #[test]
    fn replicas_sharing_an_address_count_by_the_lowest_and_one_missing_is_offline() {
        let mut m = Members::default();
        let seen = m.observe(&online(&[("a:1", 50), ("a:1", 90), ("b:1", 70)]), 0);
        assert_eq!(seen.joined, 3);
        assert_eq!(seen.shared, [("a:1".to_owned(), 2)]);
        assert_eq!((m.len(), m.online(), m.shared()), (2, 3, 1));
        assert_eq!(
            m.acked(1, true),
            Some(50),
            "the lowest of the two, never the highest"
        );
        // One keeps acknowledging, the other (cut off, the one a failover promotes) does not.
        m.observe(&online(&[("a:1", 50), ("a:1", 900), ("b:1", 900)]), 10);
        assert_eq!(m.acked(1, true), Some(50));
        // Its link drops: the one left acknowledges more, but the missing one may be either.
        m.observe(&online(&[("a:1", 1000), ("b:1", 1000)]), 20);
        assert_eq!(m.acked(1, true), Some(50));
        assert_eq!(m.online(), 2);
        assert_eq!(
            m.offline().first().map(|x| (x.addr.as_str(), x.connected)),
            Some(("a:1", 1))
        );
        assert_eq!(m.gone_since(), Some(20));
        assert_eq!(
            m.forget("a:1"),
            Err(ForgetError::Online),
            "one is connected"
        );
        m.observe(&online(&[("a:1", 2000), ("b:1", 2000)]), 30);
        assert_eq!(m.acked(1, true), Some(50), "still");
        // Both there again (the new link at 0 until it acknowledges): by the lowest.
        m.observe(&online(&[("a:1", 2000), ("a:1", 0), ("b:1", 2000)]), 40);
        assert_eq!(m.acked(1, true), Some(0));
        assert!(m.gone().is_empty());
        m.observe(&online(&[("a:1", 2100), ("a:1", 2050), ("b:1", 2100)]), 50);
        assert_eq!(m.acked(1, true), Some(2050));
        // The most silent of them counts.
        m.lags(&pairs(&[("a:1", 0), ("a:1", 5), ("b:1", 0)]), 60_000);
        assert_eq!(m.gone_since(), Some(55_000));
        m.lags(&pairs(&[("a:1", 5), ("a:1", 0), ("b:1", 0)]), 60_100);
        assert_eq!(m.gone_since(), Some(55_000), "whichever is listed first");
        // An address that gains a replica: it joins, and the caller hears of it.
        let seen = m.observe(
            &online(&[("a:1", 1), ("a:1", 1), ("b:1", 1), ("b:1", 1)]),
            70_000,
        );
        assert_eq!((seen.joined, seen.shared), (1, vec![("b:1".to_owned(), 2)]));
        // What they hold on disk: the lowest of each one's fsynced offset (or, for one that
        // reports none, its acknowledgement).
        let mut m = Members::default();
        let list = [
            ("c:1".to_owned(), 100, Some(80)),
            ("c:1".to_owned(), 90, None),
        ];
        m.observe(&list, 0);
        assert_eq!((m.acked(1, true), m.acked(1, false)), (Some(80), Some(90)));
        let list = [
            ("c:1".to_owned(), 100, Some(95)),
            ("c:1".to_owned(), 99, None),
        ];
        m.observe(&list, 1);
        assert_eq!((m.acked(1, true), m.acked(1, false)), (Some(95), Some(99)));
    }

    #[test]
    fn a_silent_member_is_gone_though_its_link_looks_up() {
        let mut m = Members::default();
        m.observe(&online(&[("a:1", 5), ("b:1", 9)]), 0);
        assert_eq!(m.gone_since(), None);
        m.lags(&pairs(&[("a:1", 0), ("b:1", 1)]), 1_000);
        assert_eq!(
            m.gone_since(),
            None,
            "a lag of 1 s is a replica acknowledging"
        );
        m.lags(&pairs(&[("a:1", 0), ("b:1", 3)]), 10_000);
        assert_eq!(m.gone_since(), Some(7_000));
        assert_eq!(m.gone().first().map(|x| x.addr.as_str()), Some("b:1"));
        m.lags(&pairs(&[("a:1", 0), ("b:1", 4)]), 11_500);
        assert_eq!(m.gone_since(), Some(7_000), "the earliest silence holds");
        m.lags(&pairs(&[("a:1", 0), ("b:1", 0)]), 12_000);
        assert_eq!(m.gone_since(), None, "acknowledging again");
        // Silent, then offline: gone from when it went offline; back online, neither.
        m.lags(&pairs(&[("a:1", 5)]), 20_000);
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
        assert_eq!(m.acked(1, true), Some(9));
        assert_eq!(m.forget("b:1"), Ok(true));
        assert_eq!(m.acked(1, true), Some(50), "b no longer holds a back");
        assert_eq!(m.len(), 1);
        // Back later: a member again, from its first reading.
        assert_eq!(m.observe(&online(&[("a:1", 60), ("b:1", 0)]), 2).joined, 1);
        m.clear();
        assert!(m.is_empty());
        assert_eq!(m.acked(1, true), None);
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
        let many: Vec<(String, u64, Option<u64>)> =
            (0..=MEMBERS).map(|i| (format!("r:{i}"), 7, None)).collect();
        m.observe(&many, 0);
        assert_eq!(m.len(), MEMBERS);
        assert_eq!(m.acked(1, true), None);
        m.clear();
        m.observe(&online(&[("a:1", 5)]), 1);
        assert_eq!(m.acked(1, true), Some(5));
    }
}
