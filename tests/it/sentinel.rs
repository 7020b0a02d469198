//! Failover with Sentinel (issue 13, part 2): standalone Redis made highly available the way
//! users run it. A primary with the module, two replicas, three `redis-sentinel` processes
//! (Debian's; they run without the module). Client threads find the primary through Sentinel
//! (the `redis` crate's Sentinel client, which also checks the node's role), pipeline SEQ.NEXT,
//! MSGID.GEN and UID.GEN on many keys, and record every reply with the run id of the node that
//! sent it. The primary is killed with SIGKILL under that load; the Sentinels promote a replica, the
//! clients follow it; the old primary is restarted and the Sentinels turn it into a replica of
//! the new one; then all of it once more. Afterwards: no sequence value was received twice for
//! one key, every value a key received from a later primary is above every value it received
//! from an earlier one, and the same holds for message IDs and UIDs, all of them unique.
//!
//! The short run is part of the normal suite; `make soak` runs a longer one (`#[ignore]`d here).
use crate::common;
use common::*;
use redis::sentinel::{SentinelClient, SentinelServerType};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The name the Sentinels monitor the primary under.
const MASTER: &str = "imid";

/// Every wait for the cluster of processes to settle gives up after this long.
const SETTLE: Duration = Duration::from_secs(90);

/// The Sentinel binary: `$REDIS_SENTINEL`, else Debian's `redis-sentinel` (scripts/deps.sh
/// installs it).
fn sentinel_bin() -> String {
    binary("REDIS_SENTINEL", "redis-sentinel")
}

/// One `redis-sentinel` on a loopback port, with a config file of its own (Sentinel rewrites
/// it with what it learns). Killed on drop.
struct Sentinel {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Sentinel {
    /// Watches the primary on `primary_port`: down after 1 s without replies, a quorum of 2.
    fn start(primary_port: u16) -> Sentinel {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = temp_dir("sentinel");
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel.log\n\
                     sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {MASTER} 1000\n\
                     sentinel failover-timeout {MASTER} 5000\n\
                     sentinel parallel-syncs {MASTER} 2\n",
                    dir = dir.display()
                ),
            )
            .unwrap();
            let child = Command::new(sentinel_bin())
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run redis-sentinel");
            let mut s = Sentinel {
                port,
                dir,
                child: Some(child),
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Some(Ok(Some(st))) = s.child.as_mut().map(|c| c.try_wait()) {
                    last = format!("exited with {st}: {}", s.log());
                    s.child = None;
                    break;
                }
                if s.query::<String>(&["PING"]).is_ok() {
                    return s;
                }
                if Instant::now() > deadline {
                    last = format!("no PONG within 20 s: {}", s.log());
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("redis-sentinel did not start: {last}");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let mut con =
            redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(2))?;
        cmd(&mut con, args)
    }

    /// The port of the primary this Sentinel names now.
    fn master_port(&self) -> Option<u16> {
        let addr: Vec<String> = self
            .query(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER])
            .ok()?;
        addr.get(1)?.parse().ok()
    }

    /// How many replicas and other Sentinels it knows of.
    fn known(&self) -> (usize, usize) {
        let n = |what: &str| {
            self.query::<Vec<Value>>(&["SENTINEL", what, MASTER])
                .map(|v| v.len())
                .unwrap_or(0)
        };
        (n("REPLICAS"), n("SENTINELS"))
    }

    fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// One term of one node as a primary: the process (run id) and the replication ID it took
/// when it became primary (a promotion always takes a new one), so that a node demoted and
/// promoted again, or restarted, counts as a new term.
type Term = String;

/// Everything the clients received, by the term that replied.
#[derive(Default)]
struct Received {
    /// term -> where it starts: `second_repl_offset` (the replication offset at which the
    /// node was promoted, -1 for a node that was never a replica), and when a client first met
    /// it. Terms sort by these: a promotion starts from the offset the replica had reached,
    /// past the start of every term it replicated.
    terms: HashMap<Term, (i64, Instant)>,
    /// term -> key -> sequence values
    seq: HashMap<Term, HashMap<String, Vec<i64>>>,
    /// term -> message IDs
    ids: HashMap<Term, Vec<String>>,
    /// term -> UIDs
    uids: HashMap<Term, Vec<i64>>,
}

impl Received {
    /// Values received from any term of the process `run_id`.
    fn values_from(&self, run_id: &str) -> usize {
        self.seq
            .iter()
            .filter(|(term, _)| term.starts_with(run_id))
            .map(|(_, keys)| keys.values().map(Vec::len).sum::<usize>())
            .sum()
    }

    /// The terms in the order they began.
    fn order(&self) -> Vec<Term> {
        let mut terms: Vec<(&Term, &(i64, Instant))> = self.terms.iter().collect();
        terms.sort_by_key(|(_, start)| **start);
        terms.into_iter().map(|(t, _)| t.clone()).collect()
    }
}

/// The term of the primary behind `con`, and where it starts; `None` if it is not a primary.
fn term(con: &mut Connection) -> Option<(Term, i64)> {
    let server: String = cmd(con, &["INFO", "server"]).ok()?;
    let repl: String = cmd(con, &["INFO", "replication"]).ok()?;
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_owned())
    };
    if field(&repl, "role")? != "master" {
        return None;
    }
    let start = field(&repl, "second_repl_offset")?.parse().ok()?;
    Some((
        format!(
            "{}/{}",
            field(&server, "run_id")?,
            field(&repl, "master_replid")?
        ),
        start,
    ))
}

/// A client thread: asks the Sentinels for the primary, pipelines SEQ.NEXT, MSGID.GEN and
/// UID.GEN on it until the connection breaks or a write is refused, then asks again; until
/// `stop`. `pause` between batches keeps what is recorded within memory while the test waits
/// for the nodes to settle. Returns its connections.
fn loader(
    sentinels: Vec<String>,
    keys: usize,
    pause: Duration,
    seed: u64,
    stop: Arc<AtomicBool>,
    received: Arc<Mutex<Received>>,
) -> u64 {
    let mut sc = SentinelClient::build(
        sentinels,
        MASTER.to_owned(),
        None,
        SentinelServerType::Master,
    )
    .expect("sentinel client");
    let mut x = seed * 7919 + 1;
    let mut connections = 0;
    let retry = Duration::from_millis(50);
    while !stop.load(Ordering::Relaxed) {
        // While the Sentinels have not promoted anyone, they name the dead primary (or a node
        // that is not a primary, which the client refuses): ask again shortly.
        let con = sc
            .get_client()
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)));
        let Ok(mut con) = con else {
            std::thread::sleep(retry);
            continue;
        };
        con.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let Some((term, start)) = term(&mut con) else {
            std::thread::sleep(retry);
            continue;
        };
        connections += 1;
        received
            .lock()
            .unwrap()
            .terms
            .entry(term.clone())
            .or_insert((start, Instant::now()));
        while !stop.load(Ordering::Relaxed) {
            let (p, batch) = load_batch(&mut x, keys, 20);
            // A batch without its replies (the node died, was demoted, or has no replica to
            // write to yet: NOREPLICAS) was not received.
            let Ok(replies) = p.query::<Vec<Value>>(&mut con) else {
                std::thread::sleep(retry);
                break;
            };
            {
                let mut guard = received.lock().unwrap();
                let r = &mut *guard;
                let seq = r.seq.entry(term.clone()).or_default();
                let ids = r.ids.entry(term.clone()).or_default();
                let uids = r.uids.entry(term.clone()).or_default();
                for (key, triple) in batch.iter().zip(replies.chunks(3)) {
                    match triple {
                        [Value::Int(v), Value::BulkString(id), Value::Int(uid)] => {
                            uids.push(*uid);
                            seq.entry(key.clone()).or_default().push(*v);
                            ids.push(String::from_utf8_lossy(id).into_owned());
                        }
                        other => panic!("unexpected replies from {term}: {other:?}"),
                    }
                }
            }
            std::thread::sleep(pause);
        }
    }
    connections
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + SETTLE;
    while !f() {
        assert!(Instant::now() < deadline, "{what}\n{}", context());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One INFO section of `node`, or `None` when the connection fails: Sentinel ends every
/// normal client (`CLIENT KILL TYPE normal`) on a node it reconfigures, so a query may be cut
/// off (where the harness's helpers would panic).
fn info(node: &Server, section: &str) -> Option<String> {
    let mut con = redis::Client::open(node.url())
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()?;
    cmd(&mut con, &["INFO", section]).ok()
}

fn info_field(node: &Server, section: &str, field: &str) -> Option<String> {
    info(node, section)?.lines().find_map(|l| {
        l.strip_prefix(&format!("{field}:"))
            .map(|v| v.trim().to_owned())
    })
}

/// An INFO field, asked again until a query gets through (see [`info`]).
fn info_field_retry(node: &Server, section: &str, field: &str) -> String {
    let mut v = None;
    wait_for(
        "INFO answers",
        || {
            v = info_field(node, section, field);
            v.is_some()
        },
        || node.log_tail(),
    );
    v.unwrap_or_default()
}

fn skips(node: &Server) -> i64 {
    info_field_retry(node, "imid", "imid_seq_gap_skips")
        .parse()
        .unwrap()
}

/// Whether `node` is a replica of the primary on `primary_port` with its link up.
fn replicates(node: &Server, primary_port: u16) -> bool {
    let field = |f| info_field(node, "replication", f);
    field("role").as_deref() == Some("slave")
        && field("master_port") == Some(primary_port.to_string())
        && field("master_link_status").as_deref() == Some("up")
}

/// The primary every Sentinel names, if they agree and it is not on `not_port`.
fn agreed_primary(sentinels: &[Sentinel], not_port: u16) -> Option<u16> {
    let ports: Vec<Option<u16>> = sentinels.iter().map(Sentinel::master_port).collect();
    match ports.first() {
        Some(Some(p)) if *p != not_port && ports.iter().all(|q| q == &Some(*p)) => Some(*p),
        _ => None,
    }
}

struct Outcome {
    /// Nodes killed under load.
    kills: usize,
    /// Promotions the clients saw (terms after the first); more than `kills` when the Sentinels
    /// also failed over a primary that was alive but slow to answer.
    failovers: usize,
    /// The most values one key lost in a failover (received, but not on the promoted replica).
    max_loss: i64,
    gap: i64,
    values: usize,
    keys: usize,
    ids: usize,
    uids: usize,
    /// Values received from each term, in order.
    per_term: Vec<usize>,
    /// Gap skips made by each promoted primary killed, and by the last primary.
    gap_skips: Vec<i64>,
    connections: u64,
}

/// The whole scenario: `threads` clients on `keys` keys, pausing `pause` after each batch of 20,
/// at least `per_phase` values received from each primary before it is killed (and from the
/// last one before the end), `kills` primaries killed in a row.
///
/// The nodes run with `min-replicas-to-write 1` and `min-replicas-max-lag 2`, as a Sentinel
/// deployment should: a primary the Sentinels fail over while it is still alive (slow, or cut
/// off) then refuses writes within about 2 s instead of issuing beside the new primary until
/// the Sentinels turn it into a replica.
fn failovers_through_sentinel(
    kills: usize,
    threads: usize,
    keys: usize,
    pause: Duration,
    per_phase: usize,
) -> Outcome {
    let node_args = [
        "--min-replicas-to-write",
        "1",
        "--min-replicas-max-lag",
        "2",
    ];
    let mut nodes = vec![Server::with(&node_args)];
    let gap: i64 = cmd::<Vec<String>>(&mut nodes[0].client(), &["CONFIG", "GET", "imid.seq-gap"])
        .unwrap()[1]
        .parse()
        .unwrap();
    nodes.push(nodes[0].replica(&node_args));
    nodes.push(nodes[0].replica(&node_args));
    let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(nodes[0].port)).collect();
    let logs = |sentinels: &[Sentinel]| {
        sentinels
            .iter()
            .map(|s| format!("--- sentinel {}:\n{}", s.port, s.log()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    wait_for(
        "the Sentinels find both replicas and each other",
        || sentinels.iter().all(|s| s.known() == (2, 2)),
        || logs(&sentinels),
    );

    let received = Arc::new(Mutex::new(Received::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let urls: Vec<String> = sentinels.iter().map(Sentinel::url).collect();
    let connections = Arc::new(AtomicU64::new(0));
    let loaders: Vec<_> = (0..threads)
        .map(|t| {
            let (urls, stop, received, connections) = (
                urls.clone(),
                stop.clone(),
                received.clone(),
                connections.clone(),
            );
            std::thread::spawn(move || {
                let n = loader(urls, keys, pause, t as u64, stop, received);
                connections.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();

    let mut primary = 0usize;
    let mut gap_skips = Vec::new();
    for round in 0..kills {
        let serving = info_field_retry(&nodes[primary], "server", "run_id");
        wait_for(
            "the clients receive values from the primary",
            || received.lock().unwrap().values_from(&serving) >= per_phase,
            || logs(&sentinels),
        );
        // The primary dies under load (a promoted one first says how many keys it skipped).
        if round > 0 {
            gap_skips.push(skips(&nodes[primary]));
        }
        let old_port = nodes[primary].port;
        nodes[primary].kill();
        wait_for(
            "the Sentinels promote a replica",
            || {
                agreed_primary(&sentinels, old_port).is_some_and(|p| {
                    nodes.iter().any(|n| {
                        n.port == p
                            && info_field(n, "replication", "role").as_deref() == Some("master")
                    })
                })
            },
            || logs(&sentinels),
        );
        // The old primary comes back, as a primary: empty (the harness runs without
        // persistence) or, if it was a replica once, with the RDB its last full sync wrote.
        // The Sentinels make it a replica of the new primary; the third node follows too.
        nodes[primary].restart();
        assert_eq!(
            nodes[primary].port, old_port,
            "the old primary must come back on its port for the Sentinels to find it"
        );
        // Settled: the Sentinels agree on a primary (the one promoted, or another if they
        // failed that one over too) and every other node replicates it.
        let mut settled = 0;
        wait_for(
            "the Sentinels agree on a primary that every other node replicates",
            || {
                let Some(p) = agreed_primary(&sentinels, 0) else {
                    return false;
                };
                let Some(at) = nodes.iter().position(|n| n.port == p) else {
                    return false;
                };
                settled = at;
                info_field(&nodes[at], "replication", "role").as_deref() == Some("master")
                    && nodes.iter().all(|n| n.port == p || replicates(n, p))
                    && agreed_primary(&sentinels, 0) == Some(p)
            },
            || {
                let tails: Vec<String> = nodes.iter().map(Server::log_tail).collect();
                format!("{}\n{}", tails.join("\n"), logs(&sentinels))
            },
        );
        primary = settled;
    }
    let last = info_field_retry(&nodes[primary], "server", "run_id");
    wait_for(
        "the clients receive values from the last primary",
        || received.lock().unwrap().values_from(&last) >= per_phase,
        || logs(&sentinels),
    );
    stop.store(true, Ordering::Relaxed);
    for l in loaders {
        l.join().unwrap();
    }
    gap_skips.push(skips(&nodes[primary]));

    let r = received.lock().unwrap();
    let order = r.order();
    // Per key, in the order the terms began: nothing twice, and every later value above every
    // earlier one.
    let mut per_key: HashMap<&str, Vec<(usize, &[i64])>> = HashMap::new();
    for (i, term) in order.iter().enumerate() {
        for (key, values) in r.seq.get(term).into_iter().flatten() {
            per_key.entry(key).or_default().push((i, values));
        }
    }
    let mut values = 0;
    let mut max_loss = 0;
    for (key, phases) in &per_key {
        let mut seen = HashSet::new();
        let mut high = 0i64;
        let mut before: Option<(usize, i64)> = None;
        for &(i, phase) in phases {
            for &v in phase {
                assert!(seen.insert(v), "{key}: value {v} received twice");
                values += 1;
            }
            let (min, max) = (*phase.iter().min().unwrap(), *phase.iter().max().unwrap());
            assert!(
                min > high,
                "{key}: {min} handed out by {} after {high}",
                order[i]
            );
            // Right after a failover a key's first value is the promoted replica's value plus
            // the gap plus one: how far the replica was behind what clients had received.
            if let Some((j, last)) = before {
                if j + 1 == i {
                    max_loss = max_loss.max(last - (min - gap - 1));
                }
            }
            high = max;
            before = Some((i, max));
        }
    }
    // Message IDs: unique, and each term's above every earlier one's (string order is numeric
    // order).
    let mut all = HashSet::new();
    let mut high = String::new();
    for term in &order {
        let ids = r.ids.get(term).map(Vec::as_slice).unwrap_or_default();
        for id in ids {
            assert!(all.insert(id.clone()), "message id {id} received twice");
        }
        if let (Some(min), Some(max)) = (ids.iter().min(), ids.iter().max()) {
            assert!(*min > high, "message id {min} from {term} after {high}");
            high = max.clone();
        }
    }
    // UIDs: the same.
    let mut all_uids = HashSet::new();
    let mut high = 0;
    for term in &order {
        let uids = r.uids.get(term).map(Vec::as_slice).unwrap_or_default();
        for &u in uids {
            assert!(all_uids.insert(u), "UID {u} received twice");
        }
        if let (Some(&min), Some(&max)) = (uids.iter().min(), uids.iter().max()) {
            assert!(min > high, "UID {min} from {term} after {high}");
            high = max;
        }
    }
    assert_eq!(all_uids.len(), all.len(), "one UID per message ID");
    Outcome {
        kills,
        failovers: order.len().saturating_sub(1),
        max_loss,
        gap,
        values,
        keys: per_key.len(),
        ids: all.len(),
        uids: all_uids.len(),
        per_term: order
            .iter()
            .map(|t| r.seq.get(t).map_or(0, |k| k.values().map(Vec::len).sum()))
            .collect(),
        gap_skips,
        connections: connections.load(Ordering::Relaxed),
    }
}

fn report(name: &str, o: &Outcome) {
    eprintln!(
        "{name}: {} primaries killed under load, {} failovers seen by the clients (the old \
         primary back as a replica each time); {} sequence values over {} keys, {} message ids \
         and {} UIDs checked, received from the successive primaries {:?}; gap skips by each \
         promoted primary {:?}; {} client connections through Sentinel",
        o.kills,
        o.failovers,
        o.values,
        o.keys,
        o.ids,
        o.uids,
        o.per_term,
        o.gap_skips,
        o.connections
    );
    eprintln!(
        "{name}: the most values one key lost in a failover: {} (imid.seq-gap {})",
        o.max_loss, o.gap
    );
}

#[test]
fn clients_follow_two_sentinel_failovers_and_nothing_is_received_twice() {
    let o = failovers_through_sentinel(2, 2, 50, Duration::from_millis(5), 2_000);
    assert!(o.failovers >= 2, "{} failovers", o.failovers);
    // Each promoted primary skipped the gap on the keys it inherited.
    assert!(o.gap_skips.iter().all(|&n| n > 0), "{:?}", o.gap_skips);
    report("sentinel", &o);
}

#[test]
#[ignore = "soak: run by `make soak` (part of `make test`)"]
fn soak_sentinel_failovers_under_heavier_load() {
    let keys = std::env::var("IMID_SOAK_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let kills = std::env::var("IMID_SOAK_FAILOVERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let o = failovers_through_sentinel(kills, 4, keys, Duration::from_millis(2), 30_000);
    assert!(o.failovers >= kills, "{} failovers", o.failovers);
    assert!(o.gap_skips.iter().all(|&n| n > 0), "{:?}", o.gap_skips);
    report("soak sentinel", &o);
}
