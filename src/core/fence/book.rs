//! Everything the fence keeps between its rounds, and one round: the node reads the offsets,
//! the book says what the replicas of the term hold and whether to ask them again.

use super::{Channel, Members};

/// Which lease a renewal belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    Msgid,
    Uid,
}

/// Everything the fence keeps between its rounds: the replicas of the term and what they
/// acknowledged of the node's hand-outs (`channel`, by replication offset).
#[derive(Debug)]
pub struct Book {
    pub members: Members,
    pub channel: Channel,
    /// The offset the last GETACK asked for, and when (ms).
    asked: Option<u64>,
    asked_ms: u64,
}

/// What every call reads of a [`Book`]; the node keeps a copy it reads without the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// The node's count may reach this at once ([`Channel::limit`]).
    pub limit: u64,
    /// Message IDs and UIDs with a time below these may go out at once.
    pub msgid_acked: u64,
    pub uid_acked: u64,
    /// How many targets' gap skips wait for the replicas: while 0, calls look nothing up.
    pub skips: usize,
    /// Since when the longest-gone member is gone ([`super::Members::gone_since`]).
    pub gone_since: Option<u64>,
}

/// What one [`Book::round`] found.
#[derive(Debug, PartialEq, Eq)]
pub struct Round {
    /// The offset every member holds (`None`: too few online, or nobody known yet).
    pub acked: Option<u64>,
    /// Fewer replicas online than required: how many are.
    pub too_few: Option<usize>,
    /// Ask the replicas to acknowledge now.
    pub ask: bool,
    /// Addresses that more replicas than before announce, above one (`(addr, how many)`):
    /// the node says so ([`super::Observed::shared`]).
    pub shared: Vec<(String, usize)>,
}

/// What one round reads: the primary's replication `offset`, the replicas `online` (`(addr,
/// acknowledged offset, fsynced offset where reported)`), the node's count `advanced`, how many
/// replicas are `required`, whether a replica counts by what it fsynced (`fsynced`), the
/// highest offset a waiting call needs (`waiting`: the replicas are asked again for it), and
/// when (`now_ms`).
#[derive(Debug)]
pub struct Reading<'a> {
    pub offset: u64,
    pub online: &'a [(String, u64, Option<u64>)],
    pub advanced: u64,
    pub required: usize,
    pub fsynced: bool,
    pub waiting: Option<u64>,
    pub now_ms: u64,
}

/// Ask the replicas again this often while something waits for them (an answer lost with a
/// broken link).
const ASK_AGAIN_MS: u64 = 100;

impl Book {
    pub const fn new() -> Book {
        Book {
            members: Members::new(),
            channel: Channel::new(),
            asked: None,
            asked_ms: 0,
        }
    }

    /// One round on what was just read ([`Reading`]): what the term's acknowledged offset
    /// covers counts; what was propagated since the last round is stamped with the offset.
    pub fn round(&mut self, r: &Reading) -> Round {
        let Reading {
            offset,
            online,
            advanced,
            required,
            fsynced,
            waiting,
            now_ms,
        } = *r;
        let seen = self.members.observe(online, now_ms);
        if seen.joined > 0 {
            self.restart();
        }
        let acked = self.members.acked(required, fsynced);
        if let Some(a) = acked {
            self.channel.ack(a, now_ms);
        }
        let online = self.members.online();
        let too_few = (online < required).then_some(online);
        self.channel.stamp(offset, advanced, now_ms);
        let ask = self.ask(offset, waiting, now_ms);
        Round {
            acked,
            too_few,
            ask,
            shared: seen.shared,
        }
    }

    /// Whether to ask the replicas now: something new needs acknowledging, or something has
    /// waited [`ASK_AGAIN_MS`] since the last time.
    fn ask(&mut self, offset: u64, waiting: Option<u64>, now_ms: u64) -> bool {
        let needed = waiting.max(self.channel.highest_target());
        let ask = needed.is_some_and(|n| {
            self.asked.is_none_or(|a| n > a) || now_ms.saturating_sub(self.asked_ms) >= ASK_AGAIN_MS
        });
        if ask {
            self.asked = Some(offset);
            self.asked_ms = now_ms;
        }
        ask
    }

    pub fn view(&self, gap: u64) -> View {
        let (msgid_acked, uid_acked) = self.channel.ids_acked();
        View {
            limit: self.channel.limit(gap),
            msgid_acked,
            uid_acked,
            skips: self.channel.skips(),
            gone_since: self.members.gone_since(),
        }
    }

    /// A replica joined the term: what was acknowledged so far was acknowledged without it, so
    /// nothing counts until every member acknowledges again.
    fn restart(&mut self) {
        self.channel.restart();
        self.asked = None;
    }

    /// A new term (the fence came on, the role changed): nothing acknowledged, no member. The
    /// calls waiting stay (they are the node's, not the book's).
    pub fn reset(&mut self) {
        self.channel.clear();
        self.asked = None;
        self.members.clear();
    }
}

impl Default for Book {
    fn default() -> Self {
        Book::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fence::online;

    /// A round with nothing waiting, counting replicas by what they acknowledged.
    fn round(b: &mut Book, offset: u64, on: &[(&str, u64)], advanced: u64, now: u64) -> Round {
        read(b, offset, &online(on), advanced, true, None, now)
    }

    fn read(
        b: &mut Book,
        offset: u64,
        online: &[(String, u64, Option<u64>)],
        advanced: u64,
        fsynced: bool,
        waiting: Option<u64>,
        now_ms: u64,
    ) -> Round {
        b.round(&Reading {
            offset,
            online,
            advanced,
            required: 1,
            fsynced,
            waiting,
            now_ms,
        })
    }

    #[test]
    fn a_round_counts_what_every_member_acknowledged() {
        let mut b = Book::new();
        let r = round(&mut b, 100, &[("a:1", 0)], 10, 0);
        assert_eq!(r.acked, Some(0));
        assert_eq!(
            (r.too_few, r.ask),
            (None, true),
            "the sample needs acknowledging"
        );
        b.channel.renewed(Lease::Msgid, 5_000);
        round(&mut b, 150, &[("a:1", 100)], 12, 10);
        assert_eq!(
            b.channel.acked(),
            Some(10),
            "the first sample, acknowledged"
        );
        assert_eq!(b.view(1000).limit, 1010);
        let r = round(&mut b, 160, &[("a:1", 150)], 12, 20);
        assert_eq!(r.acked, Some(150));
        assert_eq!(b.view(1000).msgid_acked, 5_000);
        assert_eq!(
            b.view(1000).uid_acked,
            5_000,
            "a message-ID renewal raises the UID floor"
        );
        // A second replica joins: nothing counts until both acknowledge again.
        round(&mut b, 170, &[("a:1", 160), ("b:1", 0)], 12, 30);
        assert_eq!(b.channel.acked(), None);
        assert_eq!(b.view(1000).msgid_acked, 0);
    }

    #[test]
    fn a_replica_reporting_its_fsynced_offset_counts_by_it() {
        let mut b = Book::new();
        let on = |ack, fsynced| vec![("a:1".to_owned(), ack, Some(fsynced))];
        read(&mut b, 100, &on(0, 0), 10, true, None, 0);
        let r = read(&mut b, 200, &on(150, 90), 12, true, None, 10);
        assert_eq!(r.acked, Some(90), "what its AOF holds, not what it applied");
        let r = read(&mut b, 200, &on(150, 90), 12, false, None, 20);
        assert_eq!(
            r.acked,
            Some(150),
            "counted by what it applied (imid.fence-ack applied)"
        );
    }

    #[test]
    fn a_round_with_too_few_replicas_says_so() {
        let mut b = Book::new();
        let r = read(&mut b, 100, &[], 0, true, None, 10);
        assert_eq!((r.acked, r.too_few), (None, Some(0)));
    }

    #[test]
    fn the_replicas_are_asked_again_while_something_waits() {
        let mut b = Book::new();
        assert!(
            round(&mut b, 100, &[("a:1", 100)], 0, 0).ask,
            "the first sample"
        );
        assert!(
            !round(&mut b, 100, &[("a:1", 100)], 0, 0).ask,
            "nothing new"
        );
        let on = online(&[("a:1", 100)]);
        assert!(
            read(&mut b, 110, &on, 0, true, Some(110), 0).ask,
            "a call waits for 110"
        );
        assert!(
            !read(&mut b, 110, &on, 0, true, Some(110), 50).ask,
            "asked 50 ms ago"
        );
        assert!(
            read(&mut b, 110, &on, 0, true, Some(110), 100).ask,
            "100 ms: again"
        );
    }

    #[test]
    fn a_skip_is_charged_to_its_target_until_acknowledged() {
        let mut b = Book::new();
        assert_eq!(b.channel.charge_skip(Some(7), 11, 1000), 11);
        assert!(b.channel.skip_pending(7) && !b.channel.skip_pending(8));
        assert_eq!(
            b.channel.charge_skip(None, 12, 1000),
            1012,
            "no target: a whole gap"
        );
        assert_eq!(b.view(1000).skips, 1);
        round(&mut b, 100, &[("a:1", 0)], 12, 0);
        round(&mut b, 100, &[("a:1", 100)], 12, 0);
        assert!(!b.channel.skip_pending(7));
        assert_eq!(b.view(1000).skips, 0);
        b.reset();
        assert_eq!(b.view(1000), Book::new().view(1000));
    }
}
