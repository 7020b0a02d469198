//! Jepsen-style runs (issue 27): partitions, pauses, clock skew and kill -9 against Sentinel
//! (a primary, two replicas, three Sentinels) and Cluster (3 primaries + 3 replicas), under
//! load, with every successful reply checked for anything handed out twice.
//!
//! Each run lives in a network namespace of its own ([`netns`]): every server and Sentinel on
//! its own 127.0.0.x, clients on 127.0.0.1, partitions as nftables DROP rules between
//! addresses ([`nemesis`]). The load ([`load`]): clients pipelining SEQ.NEXT, MSGID.GEN and
//! UID.GEN on 50 conversations, some straight to the primary that gets cut off, some following
//! the Sentinels or the slots; IDMP clients retrying the same token after a timeout and again
//! 2–20 s later; hot conversations too. The [`checker`] then counts values, IDs and UIDs
//! received twice, IDMP tokens answered with two values, and values of a later primary term
//! not above an earlier one's.
//!
//! One test per row of issue 27's table and server: `jepsen::<row>::<server>`, `#[ignore]`d
//! like the other soak runs (`make soak` runs the ignored tests).
//! - `IMID_JEPSEN_ROWS`: which (row, server) pairs run. Unset: the CI set ([`CI`]); `all`; or
//!   a comma list of `row` or `row/server`. The others say SKIPPED and pass.
//! - `IMID_JEPSEN_EXPECT`: `report` (the default with `IMID_JEPSEN_FENCE=off`): print the
//!   findings, fail only when the run itself did not happen as planned (no load before the
//!   fault, no failover, the nodes never settled) or a node repeated itself; `dupes`: also
//!   fail unless something was handed out twice (today's code, showing the suite sees it);
//!   `clean` (the default with the fence on, so in `make soak` and CI): also fail on any
//!   duplicate or any value of a later term not above an earlier one's (the fence's target).
//! - `IMID_JEPSEN_FENCE`: `on` (the default: as docs/durability.md sets it) or `off`
//!   (`imid.fence-replicas 0`: imid without the fence, for the figures before it).
//! - `IMID_JEPSEN_SCALE` (default 1): more clients and longer phases before and after the
//!   fault (the fault itself is the row's).
//! - `IMID_JEPSEN_REPORT=<file>`: append the row's result as a Markdown table row.
mod checker;
mod load;
mod nemesis;
mod netns;
mod node;

use crate::common::{hooks_module_path, module_path};
use load::{Conv, Shared, Via};
use nemesis::Firewall;
use node::Node;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The name the Sentinels monitor the primary under.
const MASTER: &str = "imid";

/// The (row, server) pairs `make soak` (and so CI) runs when `IMID_JEPSEN_ROWS` is unset.
const CI: &[&str] = &[
    "partition/redis7",
    "pause_no_min_replicas/redis7",
    "kill/redis7",
    "cluster_partition/redis7",
    "partition/valkey9",
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Topology {
    Sentinel,
    Cluster,
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The primary cut off from every other node and Sentinel (clients still reach it).
    Partition(Duration),
    /// SIGSTOP, then SIGCONT.
    Pause(Duration),
    /// kill -9 under load; back (from its AOF) once another node is primary.
    Kill,
}

struct Row {
    name: &'static str,
    what: &'static str,
    topology: Topology,
    fault: Fault,
    /// `min-replicas-to-write 1`, `min-replicas-max-lag 2` on every node.
    min_replicas: bool,
    down_after_ms: u32,
    node_timeout_ms: u32,
    /// No sleep between batches, and most of the load on two hot conversations.
    unthrottled: bool,
    /// The replicas' module clocks this far behind (ms; the test-hooks build).
    replicas_behind_ms: Option<[i64; 2]>,
    /// The cut just before the primary renews its message-ID lease.
    before_renewal: bool,
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

const ROWS: &[Row] = &[
    Row {
        name: "partition",
        what: "partition of the primary from replicas and Sentinels, 10 s",
        topology: Topology::Sentinel,
        fault: Fault::Partition(secs(10)),
        min_replicas: true,
        down_after_ms: 1000,
        node_timeout_ms: 0,
        unthrottled: false,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "partition_down_after_3000",
        what: "same, down-after 3000",
        topology: Topology::Sentinel,
        fault: Fault::Partition(secs(10)),
        min_replicas: true,
        down_after_ms: 3000,
        node_timeout_ms: 0,
        unthrottled: false,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "partition_hot",
        what: "same, clients unthrottled (hot keys)",
        topology: Topology::Sentinel,
        fault: Fault::Partition(secs(10)),
        min_replicas: true,
        down_after_ms: 1000,
        node_timeout_ms: 0,
        unthrottled: true,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "cluster_partition",
        what: "Cluster, primary cut off from the other 5 nodes for 12 s, unthrottled",
        topology: Topology::Cluster,
        fault: Fault::Partition(secs(12)),
        min_replicas: true,
        down_after_ms: 0,
        node_timeout_ms: 5000,
        unthrottled: true,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "partition_no_min_replicas",
        what: "partition 10 s",
        topology: Topology::Sentinel,
        fault: Fault::Partition(secs(10)),
        min_replicas: false,
        down_after_ms: 1000,
        node_timeout_ms: 0,
        unthrottled: false,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "pause_no_min_replicas",
        what: "pause (SIGSTOP) 5 s",
        topology: Topology::Sentinel,
        fault: Fault::Pause(secs(5)),
        min_replicas: false,
        down_after_ms: 1000,
        node_timeout_ms: 0,
        unthrottled: false,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "clock_skew",
        what: "replicas' clocks 10 and 30 s behind, partition 10 s cut just before a lease renewal",
        topology: Topology::Sentinel,
        fault: Fault::Partition(secs(10)),
        min_replicas: true,
        down_after_ms: 3000,
        node_timeout_ms: 0,
        unthrottled: false,
        replicas_behind_ms: Some([-10_000, -30_000]),
        before_renewal: true,
    },
    Row {
        name: "pause",
        what: "pause (SIGSTOP) 8 s",
        topology: Topology::Sentinel,
        fault: Fault::Pause(secs(8)),
        min_replicas: true,
        down_after_ms: 1000,
        node_timeout_ms: 0,
        unthrottled: false,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "kill",
        what: "kill -9 of the primary, back from its AOF",
        topology: Topology::Sentinel,
        fault: Fault::Kill,
        min_replicas: true,
        down_after_ms: 1000,
        node_timeout_ms: 0,
        unthrottled: false,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "cluster_pause",
        what: "Cluster, pause (SIGSTOP) of a primary 8 s",
        topology: Topology::Cluster,
        fault: Fault::Pause(secs(8)),
        min_replicas: true,
        down_after_ms: 0,
        node_timeout_ms: 5000,
        unthrottled: false,
        replicas_behind_ms: None,
        before_renewal: false,
    },
    Row {
        name: "cluster_kill",
        what: "Cluster, kill -9 of a primary, back from its AOF",
        topology: Topology::Cluster,
        fault: Fault::Kill,
        min_replicas: true,
        down_after_ms: 0,
        node_timeout_ms: 5000,
        unthrottled: false,
        replicas_behind_ms: None,
        before_renewal: false,
    },
];

impl Row {
    fn settings(&self) -> String {
        let mut s = Vec::new();
        s.push(if self.min_replicas {
            "min-replicas-to-write 1, max-lag 2".to_owned()
        } else {
            "no min-replicas".to_owned()
        });
        match self.topology {
            Topology::Sentinel => s.push(format!("down-after {}", self.down_after_ms)),
            Topology::Cluster => s.push(format!("node-timeout {}", self.node_timeout_ms)),
        }
        if let Some([a, b]) = self.replicas_behind_ms {
            s.push(format!("replica clocks {a}/{b} ms"));
        }
        s.push(if self.unthrottled {
            "unthrottled, hot keys".to_owned()
        } else {
            "throttled".to_owned()
        });
        s.push("AOF everysec".to_owned());
        s.push(match fence_replicas(self) {
            Some(n) => format!("imid.fence-replicas {n}"),
            None => "imid.fence-replicas auto".to_owned(),
        });
        s.join(", ")
    }
}

/// The fence as a run sets it (`IMID_JEPSEN_FENCE`): `on` (the default) as docs/durability.md
/// gives it, `imid.fence-replicas auto` where the row has `min-replicas-to-write 1`, `1` where
/// it has none; `off`: `0` everywhere (imid without the fence, for the figures before it).
/// `None`: left at its default, `auto`.
fn fence_replicas(row: &Row) -> Option<&'static str> {
    match std::env::var("IMID_JEPSEN_FENCE").as_deref() {
        Ok("off") => Some("0"),
        Ok("on") | Err(_) => (!row.min_replicas).then_some("1"),
        Ok(other) => panic!("IMID_JEPSEN_FENCE={other}: on or off"),
    }
}

/// The sizes of a run.
struct Size {
    convs: usize,
    /// Plain clients straight to the primary that gets cut off.
    direct: usize,
    /// Plain clients following the Sentinels or the slots.
    follow: usize,
    idmp: usize,
    /// Load before the fault, and after the nodes settled.
    before: Duration,
    after: Duration,
}

fn scale() -> f64 {
    std::env::var("IMID_JEPSEN_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s: &f64| *s > 0.0)
        .unwrap_or(1.0)
}

impl Size {
    fn from_env() -> Size {
        let scale = scale();
        let n = |base: f64| ((base * scale).round() as usize).max(1);
        Size {
            convs: 50,
            direct: n(1.0),
            follow: n(2.0),
            idmp: n(2.0),
            before: Duration::from_secs_f64(4.0 * scale),
            after: Duration::from_secs_f64(3.0 * scale),
        }
    }
}

/// The server binary of `server`, or None (said on stderr) when it is missing.
fn server_bin(server: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (var, p) = match server {
        "redis7" => return Some(PathBuf::from("redis-server")),
        "redis8" => (
            "IMID_REDIS8",
            root.join("target/servers/redis-server-8.2.3"),
        ),
        "valkey9" => (
            "IMID_VALKEY9",
            root.join("target/servers/valkey-server-9.1.2"),
        ),
        other => panic!("unknown server {other}"),
    };
    let p = std::env::var_os(var).map_or(p, PathBuf::from);
    if p.exists() {
        return Some(p);
    }
    let how = format!("`bash scripts/servers.sh {server}` fetches it (`make test` does)");
    assert!(
        std::env::var("IMID_NEWER_SERVERS").as_deref() != Ok("require"),
        "{} not found: {how}",
        p.display()
    );
    eprintln!(
        "SKIPPED jepsen on {server}: {} not found: {how}",
        p.display()
    );
    None
}

fn selected(row: &str, server: &str) -> bool {
    let pair = format!("{row}/{server}");
    match std::env::var("IMID_JEPSEN_ROWS") {
        Err(_) => CI.contains(&pair.as_str()),
        Ok(v) if v == "all" => true,
        Ok(v) => v.split(',').map(str::trim).any(|s| s == row || s == pair),
    }
}

/// The test of one (row, server): outside the namespace, makes it and runs this same test in
/// it; inside, the run itself.
fn run(row: &str, server: &str) {
    let r = ROWS
        .iter()
        .find(|r| r.name == row)
        .unwrap_or_else(|| panic!("no row {row}"));
    if netns::inside() {
        return inside(r, server);
    }
    if !selected(row, server) {
        eprintln!("SKIPPED jepsen::{row}::{server}: not selected (IMID_JEPSEN_ROWS=all runs it)");
        return;
    }
    let Some(bin) = server_bin(server) else {
        return;
    };
    // The clock row needs IMID.TEST-CLOCK; the others run the build users run.
    let module = if r.replicas_behind_ms.is_some() {
        hooks_module_path()
    } else {
        module_path()
    };
    netns::run_inside(
        &format!("jepsen::{row}::{server}"),
        &[
            ("IMID_JEPSEN_BIN", bin.display().to_string()),
            ("IMID_JEPSEN_MODULE", module.display().to_string()),
        ],
    );
}

/// What a run saw, beyond the checker's findings.
struct Outcome {
    findings: checker::Findings,
    /// The node that is primary at the end differs from the first one.
    failover: bool,
    /// When the fault began, ms since the start.
    fault_ms: u32,
    /// The last reply of the first primary, and the first of the node that is primary at the
    /// end (for the same slots in Cluster), relative to the fault (ms).
    old_last: Option<i64>,
    new_first: Option<i64>,
    /// Replies from the first primary before the fault, and from the last one after it.
    before_fault: usize,
    after_settled: usize,
    triples: u64,
    terms: Vec<load::Term>,
    took: Duration,
}

fn inside(row: &Row, server: &str) {
    let bin = PathBuf::from(std::env::var("IMID_JEPSEN_BIN").expect("IMID_JEPSEN_BIN"));
    let module = PathBuf::from(std::env::var("IMID_JEPSEN_MODULE").expect("IMID_JEPSEN_MODULE"));
    let version = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let size = Size::from_env();
    let name = format!("jepsen {} on {server}", row.name);
    eprintln!("{name}: {version}; {}; {}", row.what, row.settings());
    let o = match row.topology {
        Topology::Sentinel => sentinel_run(row, &bin, &module, &size),
        Topology::Cluster => cluster_run(row, &bin, &module, &size),
    };
    let f = &o.findings;
    f.print(&name);
    let rel =
        |v: Option<i64>| v.map_or("-".to_owned(), |ms| format!("{:+.2} s", ms as f64 / 1000.0));
    eprintln!(
        "{name}: {} triples, {} IDMP tokens; terms: {}; fault at {} ms; first primary's last reply \
         {}, another node's first {}; failover {}; {:.0} s",
        o.triples,
        f.idmp_tokens,
        o.terms
            .iter()
            .map(|t| format!("{} from {} ms", t.label(), t.first_ms))
            .collect::<Vec<_>>()
            .join(", "),
        o.fault_ms,
        rel(o.old_last),
        rel(o.new_first),
        o.failover,
        o.took.as_secs_f64()
    );
    let line = format!(
        "| {server} | {} | {} | {} | {} | {} | {} of {} | {} / {} / {} | {} | {} | {} | {} |",
        row.name,
        row.settings(),
        f.seq.twice,
        f.msgid.twice,
        f.uid.twice,
        f.idmp_two_values,
        f.idmp_tokens,
        f.seq.order,
        f.msgid.order,
        f.uid.order,
        rel(o.old_last),
        rel(o.new_first),
        o.triples,
        if o.failover { "yes" } else { "no" },
    );
    eprintln!("{name}: row {line}");
    if let Ok(path) = std::env::var("IMID_JEPSEN_REPORT") {
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(file, "{line}");
        }
    }

    // The run happened as planned, whatever the mode.
    assert!(
        o.before_fault > 100,
        "{name}: only {} replies from the first primary before the fault",
        o.before_fault
    );
    assert!(o.failover, "{name}: no failover happened");
    assert!(
        o.after_settled > 100,
        "{name}: only {} replies from the last primary after the nodes settled",
        o.after_settled
    );
    assert_eq!(
        f.same_term(),
        0,
        "{name}: a node repeated itself (see the examples above)"
    );
    // Unset: `clean` with the fence on (CI: a duplicate fails it), `report` with it off.
    let fence_off = std::env::var("IMID_JEPSEN_FENCE").as_deref() == Ok("off");
    let expect = std::env::var("IMID_JEPSEN_EXPECT")
        .unwrap_or_else(|_| if fence_off { "report" } else { "clean" }.to_owned());
    match expect.as_str() {
        "clean" => {
            assert_eq!(
                (f.duplicates(), f.order_violations()),
                (0, 0),
                "{name}: handed out twice, or a later term not above an earlier one (above)"
            );
        }
        "dupes" => assert!(
            f.duplicates() > 0,
            "{name}: nothing handed out twice (IMID_JEPSEN_EXPECT=dupes)"
        ),
        "report" => {}
        other => panic!("IMID_JEPSEN_EXPECT={other}: report, dupes or clean"),
    }
}

fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "{what}\n{}", context());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn logs(nodes: &[&Node]) -> String {
    nodes
        .iter()
        .map(|n| n.log_tail())
        .collect::<Vec<_>>()
        .join("\n")
}

fn shared(row: &Row, convs: Vec<Conv>) -> Shared {
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
struct Clients {
    /// (how, conversations it picks from: the first n)
    plain: Vec<(Via, usize)>,
    idmp: Vec<(Via, usize)>,
}

struct Received {
    recs: Vec<load::Rec>,
    idmp: Vec<load::IdmpRec>,
    fault_ms: u32,
    settled_ms: u32,
}

/// The steps every topology shares: the clients, load for `size.before`, the fault and the
/// wait until the nodes settled (`fault_then_settle`), load for `size.after`, then the IDMP
/// clients finish their late retries and everything stops. Returns what the clients received
/// and when the fault began and the nodes settled (ms since the start).
fn drive(sh: &Shared, clients: Clients, size: &Size, fault_then_settle: impl FnOnce()) -> Received {
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
        let fault_ms = sh.ms();
        fault_then_settle();
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
            settled_ms,
        }
    })
}

fn outcome(
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
    let findings = checker::run(&got.recs, &got.idmp, &terms, id_lane);
    Outcome {
        findings,
        failover: first != last,
        fault_ms: got.fault_ms,
        old_last,
        new_first,
        before_fault,
        after_settled,
        triples: sh.triples.load(Ordering::Relaxed),
        terms,
        took: started.elapsed(),
    }
}

fn node_args(row: &Row) -> Vec<String> {
    let mut a: Vec<&str> = Vec::new();
    if row.min_replicas {
        a.extend([
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "2",
        ]);
    }
    if let Some(n) = fence_replicas(row) {
        a.extend(["--imid.fence-replicas", n]);
    }
    a.into_iter().map(str::to_owned).collect()
}

/// The primary every Sentinel names, if they agree.
fn agreed(sentinels: &[Node]) -> Option<String> {
    let mut named = sentinels.iter().map(|s| {
        let a: Vec<String> = s
            .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER])
            .ok()?;
        Some(format!("{}:{}", a.first()?, a.get(1)?))
    });
    let first = named.next()??;
    named
        .all(|n| n.as_deref() == Some(first.as_str()))
        .then_some(first)
}

fn sentinel_run(row: &Row, bin: &Path, module: &Path, size: &Size) -> Outcome {
    let started = Instant::now();
    let fw = Firewall::new();
    let args = node_args(row);
    let ips = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
    let mut nodes = vec![Node::server("n0", bin, module, ips[0], &args)];
    for (i, ip) in ips.iter().enumerate().skip(1) {
        let mut a = args.clone();
        a.extend(["--replicaof", ips[0], "6379"].map(str::to_owned));
        nodes.push(Node::server(&format!("n{i}"), bin, module, ip, &a));
    }
    let sentinels: Vec<Node> = (0..3)
        .map(|i| {
            Node::sentinel(
                &format!("s{i}"),
                bin,
                &format!("127.0.0.{}", 11 + i),
                MASTER,
                ips[0],
                row.down_after_ms,
            )
        })
        .collect();
    let all = |nodes: &[Node]| logs(&nodes.iter().chain(&sentinels).collect::<Vec<_>>());
    wait_for(
        "the replicas sync and the Sentinels find them and each other",
        90,
        || {
            nodes.iter().skip(1).all(|n| n.replicates(&nodes[0]))
                && sentinels.iter().all(|s| {
                    let n = |what| {
                        s.query::<Vec<redis::Value>>(&["SENTINEL", what, MASTER])
                            .map_or(0, |v| v.len())
                    };
                    n("REPLICAS") == 2 && n("SENTINELS") == 2
                })
        },
        || all(&nodes),
    );
    if let Some(behind) = row.replicas_behind_ms {
        for (n, ms) in nodes.iter().skip(1).zip(behind) {
            nemesis::skew_clock(n, ms);
        }
    }
    let convs: Vec<Conv> = (0..size.convs)
        .map(|i| Conv::new(&format!("c{i}")))
        .collect();
    let n_convs = convs.len();
    let sh = shared(row, convs);
    let sentinel_addrs: Vec<String> = sentinels.iter().map(Node::addr).collect();
    let follow = Via::Sentinel(sentinel_addrs, MASTER.to_owned());
    let mut clients = Clients {
        plain: Vec::new(),
        idmp: Vec::new(),
    };
    for _ in 0..size.direct {
        clients.plain.push((Via::Direct(nodes[0].addr()), n_convs));
    }
    for _ in 0..size.follow {
        clients.plain.push((follow.clone(), n_convs));
    }
    // Half the IDMP clients start on the primary that gets cut off and follow the Sentinels
    // once it turns them away; the others follow the Sentinels throughout.
    for i in 0..size.idmp {
        clients.idmp.push(if i % 2 == 0 {
            (
                Via::Pinned(nodes[0].addr(), Box::new(follow.clone())),
                n_convs,
            )
        } else {
            (follow.clone(), n_convs)
        });
    }
    let others: Vec<String> = ips
        .iter()
        .skip(1)
        .map(|s| s.to_string())
        .chain(sentinels.iter().map(|s| s.ip.clone()))
        .collect();
    let first = nodes[0].addr();
    let mut last = first.clone();
    let got = {
        let nodes = &mut nodes;
        let last = &mut last;
        let fw = &fw;
        drive(&sh, clients, size, || {
            if row.before_renewal {
                // Just before the primary's next lease renewal: its replicated lease then
                // reaches only 2.5 s past the cut.
                let deadline = Instant::now() + secs(15);
                loop {
                    let now = nemesis::now_ms();
                    if let Some(at) = nemesis::next_renewal_ms(&nodes[0], 0) {
                        let wait = at - 100 - now;
                        if (0..2500).contains(&wait) {
                            std::thread::sleep(Duration::from_millis(wait as u64));
                            break;
                        }
                    }
                    assert!(Instant::now() < deadline, "no lease renewal seen");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            let others: Vec<&str> = others.iter().map(String::as_str).collect();
            match row.fault {
                Fault::Partition(d) => {
                    fw.isolate(&nodes[0].ip, &others);
                    eprintln!("partition: {}", Firewall::rules());
                    std::thread::sleep(d);
                    eprintln!("healed: {}", Firewall::rules());
                    fw.heal();
                }
                Fault::Pause(d) => {
                    nodes[0].pause();
                    std::thread::sleep(d);
                    nodes[0].resume();
                }
                Fault::Kill => {
                    nodes[0].kill();
                    let old = nodes[0].addr();
                    wait_for(
                        "the Sentinels promote a replica",
                        90,
                        || agreed(&sentinels).is_some_and(|p| p != old),
                        || all(nodes),
                    );
                    nodes[0].restart();
                }
            }
            wait_for(
                "the Sentinels agree on a primary that every other node replicates",
                120,
                || {
                    let Some(p) = agreed(&sentinels) else {
                        return false;
                    };
                    let Some(primary) = nodes.iter().find(|n| n.addr() == p) else {
                        return false;
                    };
                    if primary.role().as_deref() != Some("master")
                        || !nodes.iter().all(|n| n.addr() == p || n.replicates(primary))
                    {
                        return false;
                    }
                    *last = p;
                    true
                },
                || all(nodes),
            );
        })
    };
    outcome(&sh, got, &first, &last, |_| 0, started)
}

fn cluster_run(row: &Row, bin: &Path, module: &Path, size: &Size) -> Outcome {
    let started = Instant::now();
    let fw = Firewall::new();
    let ips: Vec<String> = (0..6).map(|i| format!("127.0.0.{}", 21 + i)).collect();
    let mut nodes: Vec<Node> = ips
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let mut a = node_args(row);
            a.extend(
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    &row.node_timeout_ms.to_string(),
                    "--cluster-announce-ip",
                    ip,
                ]
                .map(str::to_owned),
            );
            Node::server(&format!("n{i}"), bin, module, ip, &a)
        })
        .collect();
    let mut create = std::process::Command::new("redis-cli");
    create.args(["--cluster", "create"]);
    create.args(nodes.iter().map(Node::addr));
    create.args(["--cluster-replicas", "1", "--cluster-yes"]);
    let out = create.output().expect("redis-cli (redis-tools)");
    assert!(
        out.status.success(),
        "redis-cli --cluster create: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let all = |nodes: &[Node]| logs(&nodes.iter().collect::<Vec<_>>());
    // Who owns slot 0, and the slots of each primary (node 0's view, once settled).
    let owner_of = |n: &Node, slot: u16| -> Option<String> {
        let v: redis::Value = n.query(&["CLUSTER", "SLOTS"]).ok()?;
        let redis::Value::Array(ranges) = v else {
            return None;
        };
        ranges.iter().find_map(|r| {
            let redis::Value::Array(r) = r else {
                return None;
            };
            let (a, b) = (node::int(r.first()?)?, node::int(r.get(1)?)?);
            if !(a..=b).contains(&i64::from(slot)) {
                return None;
            }
            let redis::Value::Array(o) = r.get(2)? else {
                return None;
            };
            let (redis::Value::BulkString(ip), port) = (o.first()?, node::int(o.get(1)?)?) else {
                return None;
            };
            Some(format!("{}:{port}", String::from_utf8_lossy(ip)))
        })
    };
    let settled = |nodes: &[Node], slot: u16| -> Option<String> {
        let ok = nodes.iter().all(|n| {
            n.query::<String>(&["CLUSTER", "INFO"])
                .is_ok_and(|i| i.contains("cluster_state:ok"))
        });
        let replicas_up = nodes
            .iter()
            .filter(|n| n.role().as_deref() == Some("slave"))
            .filter(|n| n.info_field("replication", "master_link_status").as_deref() == Some("up"))
            .count();
        let owners: Vec<Option<String>> = nodes.iter().map(|n| owner_of(n, slot)).collect();
        let first = owners.first()?.clone()?;
        (ok && replicas_up == 3 && owners.iter().all(|o| o.as_deref() == Some(first.as_str())))
            .then_some(first)
    };
    let mut victim_addr = String::new();
    wait_for(
        "the cluster settles",
        90,
        || match settled(&nodes, 0) {
            Some(o) => {
                victim_addr = o;
                true
            }
            None => false,
        },
        || all(&nodes),
    );
    let victim = nodes
        .iter()
        .position(|n| n.addr() == victim_addr)
        .expect("slot 0's owner is a node");
    // Conversations: half in the victim's slots (the hot ones among them), half elsewhere.
    let mut mine = Vec::new();
    let mut elsewhere = Vec::new();
    let mut i = 0;
    while mine.len() < size.convs / 2 || elsewhere.len() < size.convs - size.convs / 2 {
        let tag = format!("c{i}");
        i += 1;
        let owner = owner_of(&nodes[victim], load::slot_of(&tag));
        if owner.as_deref() == Some(victim_addr.as_str()) {
            if mine.len() < size.convs / 2 {
                mine.push(Conv::new(&tag));
            }
        } else if elsewhere.len() < size.convs - size.convs / 2 {
            elsewhere.push(Conv::new(&tag));
        }
    }
    let n_mine = mine.len();
    let convs: Vec<Conv> = mine.into_iter().chain(elsewhere).collect();
    let n_convs = convs.len();
    let slots: Vec<u16> = convs.iter().map(|c| c.slot).collect();
    let hot_slot = slots.first().copied().unwrap_or(0);
    let sh = shared(row, convs);
    let seeds: Vec<String> = nodes.iter().map(Node::addr).collect();
    let mut clients = Clients {
        plain: Vec::new(),
        idmp: Vec::new(),
    };
    for _ in 0..size.direct {
        clients
            .plain
            .push((Via::Direct(victim_addr.clone()), n_mine));
    }
    for _ in 0..size.follow {
        clients
            .plain
            .push((Via::Cluster(seeds.clone()), slots.len()));
    }
    for i in 0..size.idmp {
        let slots = Via::Cluster(seeds.clone());
        clients.idmp.push(if i % 2 == 0 {
            (Via::Pinned(victim_addr.clone(), Box::new(slots)), n_mine)
        } else {
            (slots, n_convs)
        });
    }
    let others: Vec<String> = ips
        .iter()
        .filter(|ip| **ip != nodes[victim].ip)
        .cloned()
        .collect();
    let mut last = victim_addr.clone();
    let got = {
        let nodes = &mut nodes;
        let last = &mut last;
        let fw = &fw;
        let victim_addr = &victim_addr;
        drive(&sh, clients, size, || {
            let others: Vec<&str> = others.iter().map(String::as_str).collect();
            match row.fault {
                Fault::Partition(d) => {
                    fw.isolate(&nodes[victim].ip, &others);
                    eprintln!("partition: {}", Firewall::rules());
                    std::thread::sleep(d);
                    eprintln!("healed: {}", Firewall::rules());
                    fw.heal();
                }
                Fault::Pause(d) => {
                    nodes[victim].pause();
                    std::thread::sleep(d);
                    nodes[victim].resume();
                }
                Fault::Kill => {
                    nodes[victim].kill();
                    wait_for(
                        "the victim's replica takes over",
                        90,
                        || {
                            nodes.iter().enumerate().any(|(i, n)| {
                                i != victim
                                    && owner_of(n, hot_slot).is_some_and(|o| o != *victim_addr)
                            })
                        },
                        || all(nodes),
                    );
                    nodes[victim].restart();
                }
            }
            wait_for(
                "the cluster settles after the fault",
                120,
                || match settled(nodes, hot_slot) {
                    Some(o) => {
                        *last = o;
                        true
                    }
                    None => false,
                },
                || all(nodes),
            );
        })
    };
    let lane_of: Vec<u32> = slots.iter().map(|&s| u32::from(s)).collect();
    outcome(
        &sh,
        got,
        &victim_addr,
        &last,
        |c| lane_of.get(c as usize).copied().unwrap_or(u32::MAX),
        started,
    )
}

/// `rows!(name, ...)`: for each row a module with one `#[ignore]`d test per server.
macro_rules! rows {
    ($($row:ident),* $(,)?) => {
        $(
            mod $row {
                #[test]
                #[ignore = "soak: run by `make soak` (IMID_JEPSEN_ROWS picks the rows)"]
                fn redis7() {
                    super::run(stringify!($row), "redis7");
                }

                #[test]
                #[ignore = "soak: run by `make soak` (IMID_JEPSEN_ROWS picks the rows)"]
                fn redis8() {
                    super::run(stringify!($row), "redis8");
                }

                #[test]
                #[ignore = "soak: run by `make soak` (IMID_JEPSEN_ROWS picks the rows)"]
                fn valkey9() {
                    super::run(stringify!($row), "valkey9");
                }
            }
        )*

        /// Every row has its tests, and every test its row.
        #[test]
        fn every_row_has_tests() {
            let names = [$(stringify!($row)),*];
            for r in ROWS {
                assert!(names.contains(&r.name), "row {} has no tests", r.name);
            }
            assert_eq!(names.len(), ROWS.len());
            for pair in CI {
                let (row, _) = pair.split_once('/').expect("row/server");
                assert!(names.contains(&row), "CI names an unknown row {row}");
            }
        }
    };
}

rows!(
    partition,
    partition_down_after_3000,
    partition_hot,
    cluster_partition,
    partition_no_min_replicas,
    pause_no_min_replicas,
    clock_skew,
    pause,
    kill,
    cluster_pause,
    cluster_kill,
);
