//! What every run shares, whatever the topology: the clients, the phases around the fault
//! ([`drive`]), and what the replies say beyond the checker ([`outcome`]).
use super::load::{self, Conv, Shared, Via};
use super::node::Node;
use super::{checker, secs, Row, Size};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a run saw, beyond the checker's findings.
pub(super) struct Outcome {
    pub findings: checker::Findings,
    /// The node that is primary at the end differs from the first one.
    pub failover: bool,
    /// When the fault began, ms since the start.
    pub fault_ms: u32,
    /// The last reply of the first primary (any), and the first of the node that is primary at
    /// the end (for the same slots in Cluster), relative to the fault (ms).
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
    /// Replies from the first primary before the fault, and from the last one after it.
    pub before_fault: usize,
    pub after_settled: usize,
    pub triples: u64,
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
    Shared {
        convs,
        hot: 2,
        hot_percent: if row.unthrottled { 80 } else { 10 },
        throttle: (!row.unthrottled).then(|| Duration::from_millis(10)),
        batch: if row.unthrottled { 50 } else { 20 },
        max_triples: 1_500_000,
        idmp_batch: 2,
        idmp_pause: Duration::from_millis(40),
        late_retry: (secs(2), secs(20)),
        start,
        // Load, fault and settling together never take this long; the test fails first.
        deadline: start + secs(600),
        stop: AtomicBool::new(false),
        stop_tokens: AtomicBool::new(false),
        terms: Mutex::new(Vec::new()),
        triples: AtomicU64::new(0),
        idmp_answers: AtomicU64::new(0),
    }
}

/// The clients of a run.
pub(super) struct Clients {
    /// (how, conversations it picks from: the first n)
    pub plain: Vec<(Via, usize)>,
    pub idmp: Vec<(Via, usize)>,
}

pub(super) struct Received {
    pub recs: Vec<load::Rec>,
    pub idmp: Vec<load::IdmpRec>,
    pub fault_ms: u32,
    /// The fault's wall-clock time (Unix ms).
    pub fault_unix_ms: i64,
    pub settled_ms: u32,
}

/// The steps every topology shares: the clients, load for `size.before`, the fault and the
/// wait until the nodes settled (`fault_then_settle`, which returns when the fault began: ms
/// since the start, and Unix ms), load for `size.after`, then the IDMP
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
        let idmp: Vec<_> = clients
            .idmp
            .into_iter()
            .enumerate()
            .map(|(i, (via, only))| {
                s.spawn(move || load::idmp(via, sh, i as u32 + 1, 1000 + i as u64, only))
            })
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
            || sh.triples.load(Ordering::Relaxed) > 500,
            String::new,
        );
        std::thread::sleep(size.before);
        let (fault_ms, fault_unix_ms) = fault_then_settle();
        let settled_ms = sh.ms();
        std::thread::sleep(size.after);
        // The plain load stops; the IDMP clients make no new tokens and finish their retries.
        sh.stop.store(true, Ordering::Relaxed);
        sh.stop_tokens.store(true, Ordering::Relaxed);
        let recs: Vec<load::Rec> = plain
            .into_iter()
            .flat_map(|h| h.join().expect("plain client"))
            .collect();
        let idmp: Vec<load::IdmpRec> = idmp
            .into_iter()
            .flat_map(|h| h.join().expect("IDMP client"))
            .collect();
        drop(guard);
        Received {
            recs,
            idmp,
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
) -> Outcome {
    let terms = sh.terms.lock().unwrap().clone();
    let node_of = |t: u16| terms.get(t as usize).map_or("", |t| t.node.as_str());
    let fault = i64::from(got.fault_ms);
    let mut old_last = None;
    let old_last_kind = [load::Kind::Seq, load::Kind::MsgId, load::Kind::Uid].map(|k| {
        got.recs
            .iter()
            .filter(|r| r.kind == k && node_of(r.term) == first)
            .map(|r| i64::from(r.at_ms) - fault)
            .max()
    });
    let mut new_first = None;
    let mut before_fault = 0;
    let mut after_settled = 0;
    for (term, at) in got
        .recs
        .iter()
        .map(|r| (r.term, r.at_ms))
        .chain(got.idmp.iter().map(|r| (r.term, r.at_ms)))
    {
        let rel = i64::from(at) - fault;
        if node_of(term) == first {
            old_last = old_last.max(Some(rel));
            if rel < 0 {
                before_fault += 1;
            }
        } else if node_of(term) == last && rel >= 0 {
            new_first = Some(new_first.map_or(rel, |n: i64| n.min(rel)));
        }
        if node_of(term) == last && at >= got.settled_ms {
            after_settled += 1;
        }
    }
    // The time field of the message IDs: the first primary's highest, the last one's lowest,
    // relative to the fault's wall clock (how far the lease the new primary inherited reached).
    let id_time = |pick: &dyn Fn(&str) -> bool, highest: bool| {
        let times = got
            .recs
            .iter()
            .filter(|r| r.kind == load::Kind::MsgId && pick(node_of(r.term)))
            .map(|r| load::msgid_time_ms(r.v) - got.fault_unix_ms);
        if highest {
            times.max()
        } else {
            times.min()
        }
    };
    let old_id_time = id_time(&|n| n == first, true);
    let new_id_time = (first != last)
        .then(|| id_time(&|n| n == last, false))
        .flatten();
    let findings = checker::run(&got.recs, &got.idmp, &terms, id_lane);
    Outcome {
        findings,
        failover: first != last,
        fault_ms: got.fault_ms,
        old_last,
        old_last_kind,
        old_id_time,
        new_id_time,
        new_first,
        before_fault,
        after_settled,
        triples: sh.triples.load(Ordering::Relaxed),
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
    a.into_iter().map(str::to_owned).collect()
}
