//! What every run shares, whatever the topology: the clients, the phases around the fault
//! ([`drive`]), and what the replies say beyond the checker ([`outcome`]).
use super::load::{self, Conv, Shared, TokenLoad, Tokened, Via};
use super::node::Node;
use super::{checker, secs, Load, Row, Size};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a run saw, beyond the checker's findings.
pub(super) struct Outcome {
    pub findings: checker::Findings,
    /// The node that is primary at the end differs from the first one, or is the first one
    /// in a later term (demoted, then promoted again: a new replication ID).
    pub failover: bool,
    /// When the fault began, ms since the start.
    pub fault_ms: u32,
    /// The last reply of the first primary (any), and the first of the node that is primary at
    /// the end (for the same slots in Cluster), relative to the fault (ms). When the first
    /// node is primary again at the end, "the first primary" is its earlier terms and "the
    /// last" its last term.
    pub old_last: Option<i64>,
    /// The first primary's last reply of each kind of the plain load (a sequence value, a
    /// message ID, a UID), relative to the fault (ms): a cut-off primary may still give
    /// sequence values within its acknowledged budget while its IDs wait, so one batch can
    /// mix values and refusals.
    pub old_last_kind: [Option<i64>; 3],
    /// The time field of the first primary's highest message ID, and of the last primary's
    /// lowest, relative to the fault's wall clock (ms).
    pub old_id_time: Option<i64>,
    pub new_id_time: Option<i64>,
    pub new_first: Option<i64>,
    /// The last primary's first reply after the fault of each kind: a plain sequence value, a
    /// plain message ID or UID, an IDMP answer, an IM.SEND answer (ms, relative to the fault):
    /// how soon the new primary served each.
    pub new_first_kind: [Option<i64>; 4],
    /// Per kind (as `new_first_kind`), the longest time (ms) without a successful answer from
    /// any node, from the fault until the nodes settled: what a client saw of the fault.
    pub longest_gap: [Option<i64>; 4],
    /// Calls refused with NOREPLICAS, refused otherwise, and timed out, from the fault on.
    pub noreplicas: u64,
    pub refused: u64,
    pub timed_out: u64,
    /// Replies from the first primary before the fault, and from the last one after it.
    pub before_fault: usize,
    pub after_settled: usize,
    pub triples: u64,
    /// Messages the readers were shown (with repeats).
    pub shown: usize,
    pub terms: Vec<load::Term>,
    pub took: Duration,
}

pub(super) fn wait_for(
    what: &str,
    secs: u64,
    mut done: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "{what}\n{}", context());
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(super) fn logs(nodes: &[&Node]) -> String {
    nodes
        .iter()
        .map(|n| n.log_tail())
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn shared(row: &Row, convs: Vec<Conv>) -> Shared {
    let start = Instant::now();
    let hot_percent = if row.unthrottled { 80 } else { 10 };
    let throttle = (!row.unthrottled).then(|| Duration::from_millis(10));
    let idmp = TokenLoad {
        batch: 2,
        pause: Duration::from_millis(40),
        hot_percent: 0,
    };
    Shared {
        convs,
        hot: 2,
        hot_percent,
        throttle,
        batch: if row.unthrottled { 50 } else { 20 },
        max_triples: 1_500_000,
        idmp,
        // Alongside the others, as the IDMP clients; alone, as the plain clients.
        im_send: match row.load {
            Load::All => idmp,
            Load::ImSend => TokenLoad {
                batch: 20,
                pause: throttle.unwrap_or_default(),
                hot_percent,
            },
        },
        max_tokens: 200_000,
        late_retry: (secs(2), secs(20)),
        start,
        // Load, fault and settling together never take this long; the test fails first.
        deadline: start + secs(600),
        stop: AtomicBool::new(false),
        stop_tokens: AtomicBool::new(false),
        terms: Mutex::new(Vec::new()),
        triples: AtomicU64::new(0),
        answers: AtomicU64::new(0),
        fault_ms: AtomicU32::new(u32::MAX),
        noreplicas: AtomicU64::new(0),
        refused: AtomicU64::new(0),
        timed_out: AtomicU64::new(0),
        misplaced: AtomicU64::new(0),
        misplaced_examples: Mutex::new(Vec::new()),
    }
}

/// The clients of a run.
pub(super) struct Clients {
    /// (how, conversations it picks from: the first n)
    pub plain: Vec<(Via, usize)>,
    pub idmp: Vec<(Via, usize)>,
    pub im_send: Vec<(Via, usize)>,
    /// IM.SYNC readers (none unless the row has them).
    pub readers: Vec<(load::ReadVia, usize)>,
}

impl Clients {
    /// `size`'s clients: plain ones straight to `first` (on the first `mine` conversations:
    /// those it serves) and following `follow` (on all `all`); IDMP and IM.SEND clients, half
    /// of them on `first` until it turns them away, then following `follow` (on `mine`), half
    /// following it throughout (on `all`).
    pub fn new(size: &Size, first: &str, follow: &Via, mine: usize, all: usize) -> Clients {
        let tokens = |n: usize| -> Vec<(Via, usize)> {
            (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        let pinned = Via::Pinned(first.to_owned(), Box::new(follow.clone()));
                        (pinned, mine)
                    } else {
                        (follow.clone(), all)
                    }
                })
                .collect()
        };
        let direct = (0..size.direct).map(|_| (Via::Direct(first.to_owned()), mine));
        let following = (0..size.follow).map(|_| (follow.clone(), all));
        Clients {
            plain: direct.chain(following).collect(),
            idmp: tokens(size.idmp),
            im_send: tokens(size.im_send),
            readers: Vec::new(),
        }
    }
}

pub(super) struct Received {
    pub recs: Vec<load::Rec>,
    pub idmp: Vec<load::TokenRec>,
    pub sends: Vec<load::TokenRec>,
    pub shown: Vec<load::Shown>,
    pub fault_ms: u32,
    /// The fault's wall-clock time (Unix ms).
    pub fault_unix_ms: i64,
    pub settled_ms: u32,
}

/// The steps every topology shares: the clients, load for `size.before`, the fault and the
/// wait until the nodes settled (`fault_then_settle`, which returns when the fault began: ms
/// since the start, and Unix ms), load for `size.after`, then the token
/// clients finish their late retries and everything stops. Returns what the clients received
/// and when the fault began and the nodes settled (ms since the start).
pub(super) fn drive(
    sh: &Shared,
    clients: Clients,
    size: &Size,
    fault_then_settle: impl FnOnce() -> (u32, i64),
) -> Received {
    std::thread::scope(|s| {
        let plain: Vec<_> = clients
            .plain
            .into_iter()
            .enumerate()
            .map(|(i, (via, only))| s.spawn(move || load::plain(via, sh, i as u64 + 1, only)))
            .collect();
        // Token clients numbered from 1 across both kinds: each token is its client's.
        let tokened = |what: Tokened, vias: Vec<(Via, usize)>, from: usize| {
            vias.into_iter()
                .enumerate()
                .map(|(i, (via, only))| {
                    let c = from + i;
                    s.spawn(move || load::tokens(what, via, sh, c as u32, 1000 + c as u64, only))
                })
                .collect::<Vec<_>>()
        };
        let n_idmp = clients.idmp.len();
        let idmp = tokened(Tokened::Idmp, clients.idmp, 1);
        let sends = tokened(Tokened::ImSend, clients.im_send, 1 + n_idmp);
        let readers: Vec<_> = clients
            .readers
            .into_iter()
            .enumerate()
            .map(|(i, (via, only))| s.spawn(move || load::reader(via, sh, 5000 + i as u64, only)))
            .collect();
        let stop_all = || {
            sh.stop.store(true, Ordering::Relaxed);
            sh.stop_tokens.store(true, Ordering::Relaxed);
        };
        // Stop the clients whatever happens below (a failed wait panics).
        struct Stop<F: Fn()>(F);
        impl<F: Fn()> Drop for Stop<F> {
            fn drop(&mut self) {
                (self.0)();
            }
        }
        let guard = Stop(stop_all);
        wait_for(
            "the clients receive replies",
            60,
            || sh.triples.load(Ordering::Relaxed) + sh.answers.load(Ordering::Relaxed) > 500,
            String::new,
        );
        std::thread::sleep(size.before);
        let (fault_ms, fault_unix_ms) = fault_then_settle();
        let settled_ms = sh.ms();
        std::thread::sleep(size.after);
        // The plain load stops; the token clients make no new tokens and finish their retries.
        sh.stop.store(true, Ordering::Relaxed);
        sh.stop_tokens.store(true, Ordering::Relaxed);
        let recs: Vec<load::Rec> = plain
            .into_iter()
            .flat_map(|h| h.join().expect("plain client"))
            .collect();
        let idmp: Vec<load::TokenRec> = idmp
            .into_iter()
            .flat_map(|h| h.join().expect("IDMP client"))
            .collect();
        let sends: Vec<load::TokenRec> = sends
            .into_iter()
            .flat_map(|h| h.join().expect("IM.SEND client"))
            .collect();
        let shown: Vec<load::Shown> = readers
            .into_iter()
            .flat_map(|h| h.join().expect("reader"))
            .collect();
        drop(guard);
        Received {
            recs,
            idmp,
            sends,
            shown,
            fault_ms,
            fault_unix_ms,
            settled_ms,
        }
    })
}

pub(super) fn outcome(
    sh: &Shared,
    got: Received,
    first: &str,
    last: &str,
    id_lane: impl Fn(u16) -> u32,
    started: Instant,
    fin: &checker::Final,
) -> Outcome {
    let terms = sh.terms.lock().unwrap().clone();
    let node_of = |t: u16| terms.get(t as usize).map_or("", |t| t.node.as_str());
    // The first primary's replies and the last one's, by node; when the last primary is the
    // first node again (stale_candidate: demoted by the operator's failover, promoted back
    // after the next one), by term: the last is its term met last (terms are kept in the order
    // clients first met them), the first every earlier one.
    let last_term = terms.iter().rposition(|t| t.node == last);
    let back = first == last && last_term != terms.iter().position(|t| t.node == first);
    let is_last_term = |t: u16| back && Some(usize::from(t)) == last_term;
    let is_old = |t: u16| node_of(t) == first && !is_last_term(t);
    let is_new = |t: u16| {
        if back {
            is_last_term(t)
        } else {
            node_of(t) == last
        }
    };
    let failover = first != last || back;
    let fault = i64::from(got.fault_ms);
    let mut old_last = None;
    let old_last_kind = [load::Kind::Seq, load::Kind::MsgId, load::Kind::Uid].map(|k| {
        got.recs
            .iter()
            .filter(|r| r.kind == k && is_old(r.term))
            .map(|r| i64::from(r.at_ms) - fault)
            .max()
    });
    let mut new_first = None;
    let mut new_first_kind = [None; 4];
    let mut before_fault = 0;
    let mut after_settled = 0;
    // Every reply as (term, when, kind: 0 a sequence value, 1 a message ID or UID, 2 an IDMP
    // answer, 3 an IM.SEND answer).
    let plain = got
        .recs
        .iter()
        .map(|r| (r.term, r.at_ms, usize::from(r.kind != load::Kind::Seq)));
    let idmp = got.idmp.iter().map(|r| (r.term, r.at_ms, 2));
    let sends = got.sends.iter().map(|r| (r.term, r.at_ms, 3));
    for (term, at, kind) in plain.chain(idmp).chain(sends) {
        let rel = i64::from(at) - fault;
        if is_old(term) {
            old_last = old_last.max(Some(rel));
            if rel < 0 {
                before_fault += 1;
            }
        } else if is_new(term) && rel >= 0 {
            new_first = Some(new_first.map_or(rel, |n: i64| n.min(rel)));
            if let Some(k) = new_first_kind.get_mut(kind) {
                *k = Some(k.map_or(rel, |n: i64| n.min(rel)));
            }
        }
        if is_new(term) && at >= got.settled_ms {
            after_settled += 1;
        }
    }
    // The time field of the message IDs: the first primary's highest, the last one's lowest,
    // relative to the fault's wall clock (how far the lease the new primary inherited reached).
    let id_time = |pick: &dyn Fn(u16) -> bool, highest: bool| {
        let times = got
            .recs
            .iter()
            .filter(|r| r.kind == load::Kind::MsgId && pick(r.term))
            .map(|r| load::msgid_time_ms(r.v) - got.fault_unix_ms);
        if highest {
            times.max()
        } else {
            times.min()
        }
    };
    let old_id_time = id_time(&is_old, true);
    let new_id_time = failover.then(|| id_time(&is_new, false)).flatten();
    let mut times: [Vec<i64>; 4] = Default::default();
    let plain = got
        .recs
        .iter()
        .map(|r| (r.at_ms, usize::from(r.kind != load::Kind::Seq)));
    let idmp = got.idmp.iter().map(|r| (r.at_ms, 2));
    let sends = got.sends.iter().map(|r| (r.at_ms, 3));
    for (at, kind) in plain.chain(idmp).chain(sends) {
        if (got.fault_ms..=got.settled_ms).contains(&at) {
            if let Some(t) = times.get_mut(kind) {
                t.push(i64::from(at));
            }
        }
    }
    let (from, to) = (fault, i64::from(got.settled_ms));
    let longest_gap = times.map(|mut t| {
        if t.is_empty() && from >= to {
            return None;
        }
        t.sort_unstable();
        let mut prev = from;
        let mut longest = 0;
        for &x in t.iter().chain(std::iter::once(&to)) {
            longest = longest.max(x - prev);
            prev = x;
        }
        Some(longest)
    });
    let mut findings = checker::run(&got.recs, &got.idmp, &got.sends, &terms, id_lane);
    findings.reads = checker::reads(&got.shown, fin, &got.sends);
    findings.misplaced = checker::Misplaced {
        count: sh.misplaced.load(Ordering::Relaxed),
        examples: sh
            .misplaced_examples
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default(),
    };
    Outcome {
        findings,
        failover,
        fault_ms: got.fault_ms,
        old_last,
        old_last_kind,
        old_id_time,
        new_id_time,
        new_first,
        new_first_kind,
        longest_gap,
        noreplicas: sh.noreplicas.load(Ordering::Relaxed),
        refused: sh.refused.load(Ordering::Relaxed),
        timed_out: sh.timed_out.load(Ordering::Relaxed),
        before_fault,
        after_settled,
        triples: sh.triples.load(Ordering::Relaxed),
        shown: got.shown.len(),
        terms,
        took: started.elapsed(),
    }
}

pub(super) fn node_args(row: &Row) -> Vec<String> {
    let mut a: Vec<&str> = Vec::new();
    if row.min_replicas {
        a.extend([
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "2",
        ]);
    }
    if let Some(n) = super::fence_replicas(row) {
        a.extend(["--imid.fence-replicas", n]);
    }
    // A hot conversation's sequence remembers every client message id of the run (it gets
    // thousands a second), so that a late retry finds its first answer: the default 1000
    // would drop the oldest within a second and the retry would count as a message losing
    // its seq.
    a.extend(["--imid.seq-idmp-max", "1000000"]);
    let mut a: Vec<String> = a.into_iter().map(str::to_owned).collect();
    // More server settings for every data node (`IMID_JEPSEN_NODE_ARGS`, e.g.
    // `--repl-diskless-sync-delay 0`), to measure what they change.
    if let Ok(extra) = std::env::var("IMID_JEPSEN_NODE_ARGS") {
        a.extend(extra.split_whitespace().map(str::to_owned));
    }
    a
}

/// The surviving data of `convs` on `node` (the last primary, after the run): every inbox's
/// members by seq and its trimmed marker.
pub(super) fn final_inboxes(node: &Node, convs: &[Conv]) -> checker::Final {
    let mut fin = checker::Final::new();
    let mut con = node.connect().expect("the last primary answers");
    for (c, conv) in convs.iter().enumerate() {
        for (i, (inbox, trimmed)) in conv.inboxes.iter().enumerate() {
            let members: Vec<(Vec<u8>, i64)> = redis::cmd("ZRANGE")
                .arg(inbox)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(&mut con)
                .expect("ZRANGE of an inbox");
            let marker: Option<i64> = redis::cmd("SEQ.GET")
                .arg(trimmed)
                .query(&mut con)
                .expect("SEQ.GET of a trimmed marker");
            fin.insert(
                (c as u16, i as u8),
                (
                    members.into_iter().map(|(m, s)| (s, m)).collect(),
                    marker.unwrap_or(0),
                ),
            );
        }
    }
    fin
}
