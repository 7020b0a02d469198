//! Everything the fence keeps between its rounds, and one round: the node reads the offsets,
//! the book says what they release and whether to ask the replicas again.

use super::{Marks, Members, Queue, Ring, Skips};

/// Which lease a renewal belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    Msgid,
    Uid,
}

/// Everything the fence keeps between its rounds, with the calls that wait held as `H`: the
/// replicas of the term, the budget's samples, the targets' gap skips, both leases' renewals.
#[derive(Debug)]
pub struct Book<H> {
    pub members: Members,
    ring: Ring,
    skips: Skips,
    msgid: Marks,
    uid: Marks,
    queue: Queue<H>,
    /// The count of the newest sample the replicas acknowledged.
    acked: Option<u64>,
    /// The offset the last GETACK asked for, and when (ms).
    asked: Option<u64>,
    asked_ms: u64,
}

/// What every call reads of a [`Book`]; the node keeps a copy it reads without the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// The count of the newest acknowledged sample ([`super::within`]'s `acked`).
    pub acked: Option<u64>,
    /// Message IDs and UIDs with a time below these may go out at once.
    pub msgid_acked: u64,
    pub uid_acked: u64,
    /// How many targets' gap skips wait for the replicas: while 0, calls look nothing up.
    pub skips: usize,
    /// Since when the longest-gone member is gone ([`super::Members::gone_since`]).
    pub gone_since: Option<u64>,
}

/// What one [`Book::round`] decided.
#[derive(Debug)]
pub struct Round<H> {
    /// Calls whose writes the replicas acknowledged: their replies go out.
    pub released: Vec<H>,
    /// Calls past their deadline, and every waiting call when too few replicas are online.
    pub expired: Vec<H>,
    /// Fewer replicas online than required: how many are.
    pub too_few: Option<usize>,
    /// Ask the replicas to acknowledge now.
    pub ask: bool,
}

/// Ask the replicas again this often while something waits for them (an answer lost with a
/// broken link).
const ASK_AGAIN_MS: u64 = 100;

impl<H> Book<H> {
    pub const fn new() -> Book<H> {
        Book {
            members: Members::new(),
            ring: Ring::new(),
            skips: Skips::new(),
            msgid: Marks::new(),
            uid: Marks::new(),
            queue: Queue::new(),
            acked: None,
            asked: None,
            asked_ms: 0,
        }
    }

    /// One round at `now_ms`: the primary's replication `offset`, the replicas `online` (`(addr,
    /// acknowledged offset)`), the node's count `advanced`, and how many replicas are
    /// `required`. What the term's acknowledged offset covers counts and is released; what was
    /// propagated since the last round is stamped with `offset`.
    pub fn round(
        &mut self,
        offset: u64,
        online: &[(String, u64)],
        advanced: u64,
        required: usize,
        now_ms: u64,
    ) -> Round<H> {
        if self.members.observe(online, now_ms).joined > 0 {
            self.restart();
        }
        let mut released = Vec::new();
        if let Some(a) = self.members.acked(required) {
            self.ack(a);
            released = self.queue.take_acked(a);
        }
        let mut expired = self.queue.take_expired(now_ms);
        let online = self.members.online();
        let too_few = (online < required).then_some(online);
        if too_few.is_some() {
            // No acknowledgement can come: nobody waits for the bound.
            expired.extend(self.queue.drain());
        }
        self.queue.stamp(offset);
        self.msgid.stamp(offset);
        self.uid.stamp(offset);
        self.ring.push(offset, advanced);
        let ask = self.ask(offset, now_ms);
        Round {
            released,
            expired,
            too_few,
            ask,
        }
    }

    /// The term acknowledged `offset`: the samples, skips and renewals it covers count.
    fn ack(&mut self, offset: u64) {
        if let Some(c) = self.ring.ack(offset) {
            let acked = self.acked.map_or(c, |p| p.max(c));
            self.acked = Some(acked);
            self.skips.ack(acked);
        }
        self.msgid.ack(offset);
        self.uid.ack(offset);
        // MSGID.FLOOR's replay raises a replica's UID floor too (`node::ids`).
        self.uid.raise(self.msgid.acked());
    }

    /// Whether to ask the replicas now: something new needs acknowledging, or something has
    /// waited [`ASK_AGAIN_MS`] since the last time.
    fn ask(&mut self, offset: u64, now_ms: u64) -> bool {
        let needed = [
            self.queue.highest_target(),
            self.ring.newest_offset(),
            self.msgid.highest_target(),
            self.uid.highest_target(),
        ]
        .into_iter()
        .flatten()
        .max();
        let ask = needed.is_some_and(|n| {
            self.asked.is_none_or(|a| n > a) || now_ms.saturating_sub(self.asked_ms) >= ASK_AGAIN_MS
        });
        if ask {
            self.asked = Some(offset);
            self.asked_ms = now_ms;
        }
        ask
    }

    pub fn view(&self) -> View {
        View {
            acked: self.acked,
            msgid_acked: self.msgid.acked(),
            uid_acked: self.uid.acked(),
            skips: self.skips.len(),
            gone_since: self.members.gone_since(),
        }
    }

    /// A replica joined the term: what was acknowledged so far was acknowledged without it, so
    /// nothing counts until every member acknowledges again. The pending skips stay (their
    /// counts still say what must be acknowledged); the leases' highest renewal waits for one
    /// round trip, not for the next renewal.
    fn restart(&mut self) {
        self.ring.clear();
        self.msgid.restart();
        self.uid.restart();
        self.asked = None;
        self.acked = None;
    }

    /// A new term (the fence came on, the role changed): nothing acknowledged, no member. The
    /// calls waiting stay.
    pub fn reset(&mut self) {
        self.restart();
        self.members.clear();
        self.skips.clear();
        self.msgid.clear();
        self.uid.clear();
    }

    /// A lease renewal to `until` was propagated in the running call.
    pub fn renewed(&mut self, lease: Lease, until: u64) {
        match lease {
            Lease::Msgid => self.msgid.push(until),
            Lease::Uid => self.uid.push(until),
        }
    }

    /// A call skipped the gap on target `id` and brought the node's count to `count`: charged
    /// to the target until the replicas acknowledge that count, or (no id, or too many pending)
    /// to the node as a whole `gap`. The node's count after it.
    pub fn charge_skip(&mut self, id: Option<u64>, count: u64, gap: u64) -> u64 {
        match id {
            Some(id) if self.skips.insert(id, count) => count,
            _ => count.saturating_add(gap),
        }
    }

    /// Whether target `id` has a gap skip the replicas have not acknowledged.
    pub fn skip_pending(&self, id: u64) -> bool {
        self.skips.pending(id, self.acked)
    }

    /// A call waits from now on, until `deadline_ms` at the latest.
    pub fn wait(&mut self, handle: H, deadline_ms: u64) {
        self.queue.push(handle, deadline_ms);
    }

    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// The earliest deadline of a waiting call (ms).
    pub fn next_deadline(&self) -> Option<u64> {
        self.queue.next_deadline()
    }

    /// Every waiting call, taken out.
    pub fn drain(&mut self) -> Vec<H> {
        self.queue.drain()
    }
}

impl<H> Default for Book<H> {
    fn default() -> Self {
        Book::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fence::online;

    #[test]
    fn a_round_releases_what_every_member_acknowledged() {
        let mut b: Book<char> = Book::new();
        let r = b.round(100, &online(&[("a:1", 0)]), 10, 1, 0);
        assert!(r.released.is_empty() && r.expired.is_empty());
        assert_eq!(
            (r.too_few, r.ask),
            (None, true),
            "the sample needs acknowledging"
        );
        b.wait('x', 1_000);
        b.renewed(Lease::Msgid, 5_000);
        let r = b.round(150, &online(&[("a:1", 100)]), 12, 1, 10);
        assert_eq!(b.view().acked, Some(10), "the first sample, acknowledged");
        assert!(r.released.is_empty(), "x is stamped with 150 only now");
        let r = b.round(160, &online(&[("a:1", 150)]), 12, 1, 20);
        assert_eq!(r.released, ['x']);
        assert_eq!(b.view().msgid_acked, 5_000);
        assert_eq!(
            b.view().uid_acked,
            5_000,
            "a message-ID renewal raises the UID floor"
        );
        // A second replica joins: nothing counts until both acknowledge again.
        b.round(170, &online(&[("a:1", 160), ("b:1", 0)]), 12, 1, 30);
        assert_eq!(b.view().acked, None);
        assert_eq!(b.view().msgid_acked, 0);
    }

    #[test]
    fn a_round_with_too_few_replicas_answers_every_waiting_call() {
        let mut b: Book<char> = Book::new();
        b.wait('x', 1_000);
        b.wait('y', 5);
        let mut r = b.round(100, &[], 0, 1, 10);
        r.expired.sort_unstable();
        assert_eq!((r.expired, r.too_few), (vec!['x', 'y'], Some(0)));
        assert_eq!(b.waiting(), 0);
    }

    #[test]
    fn the_replicas_are_asked_again_while_something_waits() {
        let mut b: Book<char> = Book::new();
        assert!(
            b.round(100, &online(&[("a:1", 100)]), 0, 1, 0).ask,
            "the first sample"
        );
        assert!(
            !b.round(100, &online(&[("a:1", 100)]), 0, 1, 0).ask,
            "nothing new"
        );
        b.wait('x', 10_000);
        assert!(b.round(110, &online(&[("a:1", 100)]), 0, 1, 0).ask);
        assert!(
            !b.round(110, &online(&[("a:1", 100)]), 0, 1, 50).ask,
            "asked 50 ms ago"
        );
        assert!(
            b.round(110, &online(&[("a:1", 100)]), 0, 1, 100).ask,
            "100 ms: again"
        );
    }

    #[test]
    fn a_skip_is_charged_to_its_target_until_acknowledged() {
        let mut b: Book<char> = Book::new();
        assert_eq!(b.charge_skip(Some(7), 11, 1000), 11);
        assert!(b.skip_pending(7) && !b.skip_pending(8));
        assert_eq!(
            b.charge_skip(None, 12, 1000),
            1012,
            "no target: a whole gap"
        );
        assert_eq!(b.view().skips, 1);
        b.round(100, &online(&[("a:1", 0)]), 12, 1, 0);
        b.round(100, &online(&[("a:1", 100)]), 12, 1, 0);
        assert!(!b.skip_pending(7));
        assert_eq!(b.view().skips, 0);
        b.reset();
        assert_eq!(b.view(), Book::<char>::new().view());
    }
}
