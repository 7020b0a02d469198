//! Jepsen-style runs (issues 27, 34 and 44): partitions, splits, pauses, clock skew, kill -9
//! (of the primary, or of a replica without a failover) and an operator's `SENTINEL FAILOVER`
//! against Sentinel (a primary, two or three replicas, three
//! Sentinels) and Cluster (3 primaries with one or two replicas each), under load, with every
//! successful reply checked for anything handed out twice. Issue 44's faults, against Sentinel:
//! a split with two replicas announcing one address, a replica the Sentinels can promote after
//! it was told to follow a primary it never reached, and an operator's `FENCE.FORGET` of a
//! replica cut off (not gone) in a split.
//!
//! Each run lives in a network namespace of its own ([`netns`]): every server and Sentinel on
//! its own 127.0.0.x, clients on 127.0.0.1, partitions as nftables DROP rules between
//! addresses ([`nemesis`]). The load ([`load`]): clients pipelining SEQ.NEXT, MSGID.GEN and
//! UID.GEN on 50 conversations, some straight to the primary that gets cut off, some following
//! the Sentinels or the slots; IDMP clients retrying the same token, and IM.SEND clients the
//! same client message id, after a timeout and again 2–20 s later; hot conversations too
//! (every node runs with `imid.seq-idmp-max 1000000`, so a hot conversation's sequence still
//! knows a message at its late retry). The [`checker`] then counts values, IDs and UIDs
//! received twice, IDMP tokens answered with two values, IM.SEND client message ids answered
//! with two seqs and seqs given to two messages, and values of a later primary term not above
//! an earlier one's. Rows with readers (split, operator_failover) also run IM.SYNC clients
//! on the IM.SEND clients' inboxes, on the Sentinels' primary or any data node, and the
//! checker counts the messages shown that the surviving data lacks at that seq or whose send
//! was answered with another seq (reads shown then taken back). Each run also says how soon
//! the last primary answered each kind of call after the fault, the longest time no client got
//! an answer of each kind, and how many calls were refused or timed out from the fault on.
//!
//! One test per row ([`ROWS`]) and server (`redis7`: Debian's redis-server on PATH; `redis8`,
//! `redis86`, `valkey9`: Redis 8.2.3, Redis 8.6.3 and Valkey 9.1.2 from `scripts/servers.sh`
//! under `target/servers/`, or `IMID_REDIS8`, `IMID_REDIS86`, `IMID_VALKEY9`):
//! `jepsen::<row>::<server>`, `#[ignore]`d like the other soak runs (`make soak` runs the
//! ignored tests).
//! - `IMID_JEPSEN_ROWS`: which (row, server) pairs run. Unset: the CI set ([`CI`]); `all`; or
//!   a comma list of `row` or `row/server` (`split/redis8.6` or `split/redis86`). The others
//!   say SKIPPED and pass.
//! - `IMID_JEPSEN_EXPECT`: `report` (the default with `IMID_JEPSEN_FENCE=off`): print the
//!   findings, fail only when the run itself did not happen as planned (no load before the
//!   fault, no failover where the row makes one or one where it does not, the nodes never
//!   settled) or a node repeated itself; `dupes`: also
//!   fail unless something was handed out twice (today's code, showing the suite sees it);
//!   `clean` (the default with the fence on, so in `make soak` and CI): also fail on any
//!   duplicate or any value of a later term not above an earlier one's (the fence's target).
//!   Times (how soon the new primary answered) are reported, never asserted.
//! - `IMID_JEPSEN_FENCE`: `on` (the default: as docs/durability.md sets it) or `off`
//!   (`imid.fence-replicas 0`: imid without the fence, for the figures before it).
//! - `IMID_JEPSEN_SCALE` (default 1): more clients and longer phases before and after the
//!   fault (the fault itself is the row's).
//! - `IMID_JEPSEN_REPORT=<file>`: append the row's result as a Markdown table row (server, row,
//!   settings, values / message IDs / UIDs twice, IDMP tokens with two values, values below an
//!   earlier term's per category (sequence values / message IDs / UIDs / IM.SEND seqs), the
//!   first primary's last reply and the last primary's first after the fault, triples,
//!   failover, IM.SEND client message ids answered with two seqs, seqs given to two messages,
//!   the last primary's first reply after the fault per kind (a sequence value / a message ID
//!   or UID / an IDMP answer / an IM.SEND answer), the calls refused with NOREPLICAS / refused
//!   otherwise / timed out from the fault on, reads shown then taken back (by a primary / by a
//!   replica, of the distinct messages the readers were shown; `-` in rows without readers),
//!   the run's time).
//! - `IMID_JEPSEN_READS`: where the readers of the rows that have them (split,
//!   operator_failover) read: `any` (the default: every other round the primary the Sentinels
//!   name, else any data node) or `old` (the first primary only, the node a fault cuts off).
//! - `IMID_JEPSEN_NODE_ARGS`: more server arguments for every data node (e.g.
//!   `--repl-diskless-sync-delay 0`), appended after the row's.
//! - `IMID_JEPSEN_KEEP=1`: keep every node's directory (its log) after a passing run too (a
//!   failing run keeps them always), under the temp dir as `imid-jepsen-<namespace>-<node>`.
mod checker;
mod cluster;
mod load;
mod nemesis;
mod netns;
mod node;
mod run;
mod sentinel;

use crate::common::{hooks_module_path, module_path};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The (row, server) pairs `make soak` (and so CI) runs when `IMID_JEPSEN_ROWS` is unset.
const CI: &[&str] = &[
    "partition/redis7",
    "pause_no_min_replicas/redis7",
    "kill/redis7",
    "cluster_partition/redis7",
    "partition/valkey9",
    "split/redis7",
    "operator_failover/redis7",
    "operator_failover/valkey9",
    "alias_split/redis7",
    "stale_candidate/redis7",
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
    /// The primary and one of its replicas cut off from the other nodes and the Sentinels
    /// (each side keeps its own links; clients reach everyone).
    Split(Duration),
    /// The primary cut off from the Sentinels only (its replicas stay attached).
    SentinelCut(Duration),
    /// SIGSTOP, then SIGCONT.
    Pause(Duration),
    /// kill -9 under load; back (from its AOF) once another node is primary.
    Kill,
    /// No fault: an operator's `SENTINEL FAILOVER` to one Sentinel.
    OperatorFailover,
    /// A replica (the last) killed with kill -9, back from its AOF after this long; the
    /// primary stays primary (what its clients see while a replica of its term is down).
    ReplicaDown(Duration),
    /// Replica n2 announces n1's address (`replica-announce-ip`), so the primary lists two
    /// replicas under one `ip:port` and the Sentinels know one (n1); then the primary and n2
    /// cut off from n1 and the Sentinels: n1, the address's owner, is promoted while the
    /// primary still gets acknowledgements under its address (n2's).
    AliasSplit(Duration),
    /// n1 cut off from n2 only; an operator's `SENTINEL FAILOVER` (the Sentinels pick n2,
    /// `replica-priority 10`; n1 is told to follow it and never reaches it); n2 serves, then is
    /// killed with kill -9, back from its AOF once another node is primary; the cut healed.
    /// n0, the old primary, has `replica-priority 200`: Sentinel prefers n1 to it, n1 which
    /// holds only n0's data.
    StaleCandidate,
    /// A split as [`Fault::Split`], and 1 s in an operator on the primary who kills the
    /// replication link of the replica cut off (n2) and runs `FENCE.FORGET` of it: the replica
    /// is cut off, not gone, and the Sentinels promote it.
    ForgetSplit(Duration),
}

impl Fault {
    /// Whether the fault makes the Sentinels or the Cluster promote a replica.
    fn fails_over(self) -> bool {
        !matches!(self, Fault::ReplicaDown(_))
    }
}

/// Who makes the load.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Load {
    /// Plain clients, IDMP clients and IM.SEND clients.
    All,
    /// IM.SEND clients only, as many as the others together, on the hot conversations like
    /// the plain clients of an unthrottled row.
    ImSend,
}

struct Row {
    name: &'static str,
    what: &'static str,
    topology: Topology,
    fault: Fault,
    /// Sentinel: the primary's replicas; Cluster: the replicas of each primary.
    replicas: usize,
    /// `min-replicas-to-write 1`, `min-replicas-max-lag 2` on every node.
    min_replicas: bool,
    down_after_ms: u32,
    node_timeout_ms: u32,
    /// No sleep between batches, and most of the load on two hot conversations.
    unthrottled: bool,
    load: Load,
    /// The replicas' module clocks this far behind (ms; the test-hooks build).
    replicas_behind_ms: Option<[i64; 2]>,
    /// The cut just before the primary renews its message-ID lease.
    before_renewal: bool,
    /// IM.SYNC readers on the IM.SEND clients' inboxes (Sentinel rows).
    readers: bool,
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The Sentinel rows' common settings (docs/durability.md's): a primary and two replicas,
/// `min-replicas-to-write 1`, down-after 1000, throttled clients of every kind.
const SENTINEL: Row = Row {
    name: "",
    what: "",
    topology: Topology::Sentinel,
    fault: Fault::Partition(secs(10)),
    replicas: 2,
    min_replicas: true,
    down_after_ms: 1000,
    node_timeout_ms: 0,
    unthrottled: false,
    load: Load::All,
    replicas_behind_ms: None,
    before_renewal: false,
    readers: false,
};

/// The Cluster rows' common settings: 3 primaries with a replica each, node-timeout 5000,
/// `min-replicas-to-write 1`, unthrottled.
const CLUSTER: Row = Row {
    topology: Topology::Cluster,
    replicas: 1,
    down_after_ms: 0,
    node_timeout_ms: 5000,
    unthrottled: true,
    ..SENTINEL
};

const ROWS: &[Row] = &[
    Row {
        name: "partition",
        what: "partition of the primary from replicas and Sentinels, 10 s",
        ..SENTINEL
    },
    Row {
        name: "partition_down_after_3000",
        what: "same, down-after 3000",
        down_after_ms: 3000,
        ..SENTINEL
    },
    Row {
        name: "partition_hot",
        what: "same, clients unthrottled (hot keys)",
        unthrottled: true,
        ..SENTINEL
    },
    Row {
        name: "cluster_partition",
        what: "Cluster, primary cut off from the other 5 nodes for 12 s, unthrottled",
        fault: Fault::Partition(secs(12)),
        ..CLUSTER
    },
    Row {
        name: "partition_no_min_replicas",
        what: "partition 10 s",
        min_replicas: false,
        ..SENTINEL
    },
    Row {
        name: "pause_no_min_replicas",
        what: "pause (SIGSTOP) 5 s",
        fault: Fault::Pause(secs(5)),
        min_replicas: false,
        ..SENTINEL
    },
    Row {
        name: "clock_skew",
        what: "replicas' clocks 10 and 30 s behind, partition 10 s cut just before a lease renewal",
        down_after_ms: 3000,
        replicas_behind_ms: Some([-10_000, -30_000]),
        before_renewal: true,
        ..SENTINEL
    },
    Row {
        name: "pause",
        what: "pause (SIGSTOP) 8 s",
        fault: Fault::Pause(secs(8)),
        ..SENTINEL
    },
    Row {
        name: "kill",
        what: "kill -9 of the primary, back from its AOF",
        fault: Fault::Kill,
        ..SENTINEL
    },
    Row {
        name: "cluster_pause",
        what: "Cluster, pause (SIGSTOP) of a primary 15 s",
        // 8 s was too short for Valkey 9.1 to fail over (node-timeout 5 s, then the election):
        // the node came back first, and nothing was tested.
        fault: Fault::Pause(secs(15)),
        unthrottled: false,
        ..CLUSTER
    },
    Row {
        name: "cluster_kill",
        what: "Cluster, kill -9 of a primary, back from its AOF",
        fault: Fault::Kill,
        unthrottled: false,
        ..CLUSTER
    },
    // Issue 34: the failovers Sentinel and Cluster make while a replica still acknowledges
    // the old primary.
    Row {
        name: "split",
        what: "split: {primary, replica n1} cut off from {replica n2, the 3 Sentinels}, 10 s",
        fault: Fault::Split(secs(10)),
        readers: true,
        ..SENTINEL
    },
    Row {
        name: "split_hot",
        what: "same, clients unthrottled (hot keys)",
        fault: Fault::Split(secs(10)),
        unthrottled: true,
        ..SENTINEL
    },
    Row {
        name: "split_im_send_hot",
        what: "same, IM.SEND clients only, unthrottled (hot conversations)",
        fault: Fault::Split(secs(10)),
        unthrottled: true,
        load: Load::ImSend,
        ..SENTINEL
    },
    Row {
        name: "split3",
        what:
            "split with three replicas: {primary, n1} cut off from {n2, n3, the 3 Sentinels}, 10 s",
        fault: Fault::Split(secs(10)),
        replicas: 3,
        ..SENTINEL
    },
    Row {
        name: "operator_failover",
        what: "no fault: SENTINEL FAILOVER by an operator, unthrottled (hot keys)",
        fault: Fault::OperatorFailover,
        unthrottled: true,
        readers: true,
        ..SENTINEL
    },
    Row {
        name: "sentinel_cut",
        what: "primary cut off from the 3 Sentinels only (replicas attached), 10 s, unthrottled",
        fault: Fault::SentinelCut(secs(10)),
        unthrottled: true,
        ..SENTINEL
    },
    Row {
        name: "replica_down",
        what: "a replica killed (kill -9) and back from its AOF after 10 s; no failover",
        fault: Fault::ReplicaDown(secs(10)),
        ..SENTINEL
    },
    Row {
        name: "cluster_split",
        what:
            "Cluster, 2 replicas per shard: {primary, one of its replicas} cut off from the other \
               7 nodes for 12 s, unthrottled",
        fault: Fault::Split(secs(12)),
        replicas: 2,
        node_timeout_ms: 3000,
        ..CLUSTER
    },
    // Issue 44: failovers the fence of issue 34 still let through, each by what the primary
    // believed of its replicas.
    Row {
        name: "alias_split",
        what: "replica n2 announces n1's address; split: {primary, n2} cut off from {n1, the 3 \
               Sentinels}, 10 s",
        fault: Fault::AliasSplit(secs(10)),
        ..SENTINEL
    },
    Row {
        name: "stale_candidate",
        what: "n1 cut off from n2 only; SENTINEL FAILOVER by an operator (to n2, replica-priority \
               10), n2 serves 4 s, kill -9 of n2, back from its AOF; the cut healed",
        fault: Fault::StaleCandidate,
        down_after_ms: 3000,
        ..SENTINEL
    },
    Row {
        name: "forget_split",
        what: "split: {primary, n1} cut off from {n2, the 3 Sentinels}, 10 s; 1 s in, an \
               operator kills n2's replication link on the primary and runs FENCE.FORGET of n2",
        fault: Fault::ForgetSplit(secs(10)),
        ..SENTINEL
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
        match (self.topology, self.replicas) {
            (Topology::Sentinel, 2) | (Topology::Cluster, 1) => {}
            (Topology::Sentinel, n) => s.push(format!("{n} replicas")),
            (Topology::Cluster, n) => s.push(format!("{n} replicas per primary")),
        }
        if let Some([a, b]) = self.replicas_behind_ms {
            s.push(format!("replica clocks {a}/{b} ms"));
        }
        s.push(if self.unthrottled {
            "unthrottled, hot keys".to_owned()
        } else {
            "throttled".to_owned()
        });
        if self.load == Load::ImSend {
            s.push("IM.SEND clients only".to_owned());
        }
        if self.readers {
            s.push(match std::env::var("IMID_JEPSEN_READS").as_deref() {
                Ok("old") => "readers on the first primary only".to_owned(),
                _ => "readers".to_owned(),
            });
        }
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
    im_send: usize,
    /// IM.SYNC readers (rows with `readers`).
    readers: usize,
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
    fn from_env(row: &Row) -> Size {
        let scale = scale();
        let n = |base: f64| ((base * scale).round() as usize).max(1);
        let all = row.load == Load::All;
        let some = |base: f64| if all { n(base) } else { 0 };
        Size {
            convs: 50,
            direct: some(1.0),
            follow: some(2.0),
            idmp: some(2.0),
            im_send: if all { n(2.0) } else { n(4.0) },
            readers: if row.readers { n(2.0) } else { 0 },
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
        "redis8.6" => (
            "IMID_REDIS86",
            root.join("target/servers/redis-8.6.3/redis-server"),
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

/// Whether (row, server) runs; a server is named as `scripts/servers.sh` names it
/// (`redis8.6`) or as its test is (`redis86`).
fn selected(row: &str, server: &str) -> bool {
    let pair = format!("{row}/{server}");
    let test = pair.replace('.', "");
    match std::env::var("IMID_JEPSEN_ROWS") {
        Err(_) => CI.contains(&pair.as_str()),
        Ok(v) if v == "all" => true,
        Ok(v) => v
            .split(',')
            .map(str::trim)
            .any(|s| s == row || s == pair || s == test),
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
    // The test's name: the server without its dot (`redis8.6`'s test is `redis86`).
    netns::run_inside(
        &format!("jepsen::{row}::{}", server.replace('.', "")),
        &[
            ("IMID_JEPSEN_BIN", bin.display().to_string()),
            ("IMID_JEPSEN_MODULE", module.display().to_string()),
        ],
    );
}

fn inside(row: &Row, server: &str) {
    let bin = PathBuf::from(std::env::var("IMID_JEPSEN_BIN").expect("IMID_JEPSEN_BIN"));
    let module = PathBuf::from(std::env::var("IMID_JEPSEN_MODULE").expect("IMID_JEPSEN_MODULE"));
    let version = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let size = Size::from_env(row);
    let name = format!("jepsen {} on {server}", row.name);
    eprintln!("{name}: {version}; {}; {}", row.what, row.settings());
    let o = match row.topology {
        Topology::Sentinel => sentinel::run(row, &bin, &module, &size),
        Topology::Cluster => cluster::run(row, &bin, &module, &size),
    };
    let f = &o.findings;
    f.print(&name);
    let rel =
        |v: Option<i64>| v.map_or("-".to_owned(), |ms| format!("{:+.2} s", ms as f64 / 1000.0));
    let [seq_first, id_first, idmp_first, send_first] = o.new_first_kind.map(rel);
    let availability = format!("{seq_first} / {id_first} / {idmp_first} / {send_first}");
    let failed = format!("{} / {} / {}", o.noreplicas, o.refused, o.timed_out);
    // Reads shown then taken back: by a primary / by a replica, of the messages shown.
    let r = &f.reads;
    let reads = if row.readers {
        format!("{} / {} of {}", r.taken_back[0], r.taken_back[1], r.shown)
    } else {
        "-".to_owned()
    };
    eprintln!(
        "{name}: {} triples, {} IDMP tokens, {} IM.SEND messages, {} messages shown to readers; terms: {}; fault at {} ms; first primary's last reply \
         {} (a sequence value {}, a message ID {}, a UID {}), the last primary's first {}; message ID times: the first primary's \
         highest {}, the last primary's lowest {}; failover {}; {:.0} s",
        o.triples,
        f.idmp.tokens,
        f.im_send.tokens,
        o.shown,
        o.terms
            .iter()
            .map(|t| format!("{} from {} ms", t.label(), t.first_ms))
            .collect::<Vec<_>>()
            .join(", "),
        o.fault_ms,
        rel(o.old_last),
        rel(o.old_last_kind[0]),
        rel(o.old_last_kind[1]),
        rel(o.old_last_kind[2]),
        rel(o.new_first),
        rel(o.old_id_time),
        rel(o.new_id_time),
        o.failover,
        o.took.as_secs_f64()
    );
    let [seq_gap, id_gap, idmp_gap, send_gap] = o
        .longest_gap
        .map(|g| g.map_or("-".to_owned(), |ms| format!("{:.2} s", ms as f64 / 1000.0)));
    eprintln!(
        "{name}: availability: the last primary's first reply after the fault: a sequence value \
         {seq_first}, a message ID or UID {id_first}, an IDMP answer {idmp_first}, an IM.SEND \
         answer {send_first}; calls from the fault on refused with NOREPLICAS / refused \
         otherwise / timed out: {failed}; the longest time without an answer from the fault \
         until the nodes settled: a sequence value {seq_gap}, a message ID or UID {id_gap}, an \
         IDMP answer {idmp_gap}, an IM.SEND answer {send_gap}"
    );
    let line = format!(
        "| {server} | {} | {} | {} | {} | {} | {} of {} | {} / {} / {} / {} | {} | {} | {} | {} \
         | {} of {} | {} | {availability} | {failed} | {reads} | {:.0} s |",
        row.name,
        row.settings(),
        f.seq.twice,
        f.msgid.twice,
        f.uid.twice,
        f.idmp.two_values,
        f.idmp.tokens,
        f.seq.order,
        f.msgid.order,
        f.uid.order,
        f.im_seq.order,
        rel(o.old_last),
        rel(o.new_first),
        o.triples,
        if o.failover { "yes" } else { "no" },
        f.im_send.two_values,
        f.im_send.tokens,
        f.im_seq.twice,
        o.took.as_secs_f64(),
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
    assert_eq!(
        o.failover,
        row.fault.fails_over(),
        "{name}: a failover happened, or not, against the row's plan"
    );
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
    // In every mode: a reply that is not its command's is never a fault's fair price.
    assert_eq!(
        f.misplaced.count, 0,
        "{name}: replies that were not their command's (see the examples above)"
    );
    // Unset: `clean` with the fence on (CI: a duplicate fails it), `report` with it off.
    let fence_off = std::env::var("IMID_JEPSEN_FENCE").as_deref() == Ok("off");
    let expect = std::env::var("IMID_JEPSEN_EXPECT")
        .unwrap_or_else(|_| if fence_off { "report" } else { "clean" }.to_owned());
    match expect.as_str() {
        "clean" => {
            // Reads: those a primary answered (the fence's promise). A replica shows what it
            // applied, a send that timed out included (docs/commands.md, "The read side and
            // the fence"): counted and reported, not failed on.
            assert_eq!(
                (f.duplicates(), f.order_violations(), f.reads.taken_back[0]),
                (0, 0, 0),
                "{name}: handed out twice, a later term not above an earlier one, or a read a \
                 primary showed then taken back (above)"
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
                fn redis86() {
                    super::run(stringify!($row), "redis8.6");
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
    split,
    split_hot,
    split_im_send_hot,
    split3,
    operator_failover,
    sentinel_cut,
    replica_down,
    cluster_split,
    alias_split,
    stale_candidate,
    forget_split,
);
