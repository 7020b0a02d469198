//! Real cluster nodes for the resharding tests: three primaries of the test-hooks build made
//! into a cluster by `redis-cli --cluster create`, slot moves (`redis-cli --cluster reshard`,
//! CLUSTER SETSLOT + MIGRATE), a client that follows MOVED/ASK, and the load that issues
//! message IDs, UIDs and sequence values for targets in slots that move.

use super::*;
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::RedisResult;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The server arguments that make a node a cluster node (the bus port stays Redis's default,
/// port + 10000: the harness picks ports whose bus twin is free too).
pub const NODE_ARGS: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "2000",
];

pub struct Cluster {
    pub nodes: Vec<Server>,
    pub ids: Vec<String>,
    /// The slots whose ownership [`Cluster::wait_settled`] waits for every node to agree on.
    pub watched: std::ops::Range<u16>,
    /// The server the nodes run (None: the default server).
    bin: Option<PathBuf>,
}

/// `redis-cli args...` (Debian's redis-tools); fails the test when it fails.
fn cli(args: &[&str]) {
    run(Command::new("redis-cli").args(args));
}

/// A cluster node (not yet in a cluster) with the test-hooks module, on `bin` (None: the
/// default server) with `extra` arguments after [`NODE_ARGS`].
pub fn start_node(bin: Option<&Path>, extra: &[&str]) -> Server {
    let mut args = NODE_ARGS.to_vec();
    args.extend_from_slice(extra);
    let mut b = Server::build().hooked().args(&args);
    if let Some(bin) = bin {
        b = b.bin(bin);
    }
    b.start()
}

/// `redis-cli --cluster create` of `nodes` with `replicas` replicas per primary.
pub fn create(nodes: &[Server], replicas: u8) {
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let replicas = replicas.to_string();
    let mut args = vec!["--cluster", "create"];
    args.extend(addrs.iter().map(String::as_str));
    args.extend(["--cluster-replicas", &replicas, "--cluster-yes"]);
    cli(&args);
}

/// Routes a command to the primary of `slot`.
pub fn primary(slot: u16) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
        slot,
        SlotAddr::Master,
    )))
}

impl Cluster {
    /// Three primaries, no replicas, with the test-hooks module, on `bin` (None: the default
    /// server) with `extra` arguments.
    pub fn start(bin: Option<&Path>, extra: &[&str], watched: std::ops::Range<u16>) -> Cluster {
        let nodes: Vec<Server> = (0..3).map(|_| start_node(bin, extra)).collect();
        create(&nodes, 0);
        let ids = nodes
            .iter()
            .map(|n| cmd::<String>(&mut n.client(), &["CLUSTER", "MYID"]).unwrap())
            .collect();
        let c = Cluster {
            nodes,
            ids,
            watched,
            bin: bin.map(Path::to_path_buf),
        };
        c.wait_settled();
        c
    }

    /// Adds a replica of primary `of` (same server, `extra` arguments): CLUSTER MEET, then
    /// CLUSTER REPLICATE once the new node knows the primary (retried: until gossip reaches it
    /// the answer is "Unknown node", which `redis-cli --cluster add-node` does not wait out on
    /// a loaded machine); waits until it has synced; returns its index. It never migrates by
    /// itself (`cluster-allow-replica-migration no`): once its primary has two replicas and
    /// another primary none, Cluster moves one of them there at the next cron, whichever has
    /// the lower node ID (seen on Redis 7.0), so a test's replica would vanish
    /// from under it at random.
    pub fn add_replica(&mut self, of: usize, extra: &[&str]) -> usize {
        let mut args = vec!["--cluster-allow-replica-migration", "no"];
        args.extend_from_slice(extra);
        let r = start_node(self.bin.as_deref(), &args);
        let mut rc = r.client();
        let primary = &self.nodes[of];
        let _: () = cmd(
            &mut rc,
            &["CLUSTER", "MEET", "127.0.0.1", &primary.port.to_string()],
        )
        .unwrap();
        let master = self.ids[of].clone();
        let mut last = String::new();
        let replicating = poll_until(60, || {
            match cmd::<()>(&mut rc, &["CLUSTER", "REPLICATE", &master]) {
                Ok(()) => true,
                Err(e) => {
                    last = e.to_string();
                    false
                }
            }
        });
        assert!(
            replicating,
            "CLUSTER REPLICATE {master}: {last}\n{}",
            r.log_tail()
        );
        let id: String = cmd(&mut rc, &["CLUSTER", "MYID"]).unwrap();
        self.nodes.push(r);
        self.ids.push(id);
        let last = self.nodes.len() - 1;
        let node = &self.nodes[last];
        node.wait_until("the replica synced", 60, || {
            node.info_field("replication", "master_link_status")
                .as_deref()
                == Some("up")
        });
        self.wait_settled();
        last
    }

    /// The node that owns `key`'s slot ([`Cluster::owner`]).
    pub fn owner_of(&self, key: &str) -> &Server {
        &self.nodes[self.owner(slot(key))]
    }

    /// The index of the node that owns `slot`, in node 0's view (`CLUSTER SLOTS`).
    pub fn owner(&self, slot: u16) -> usize {
        let slots: Vec<(i64, i64, Vec<Value>)> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query::<Vec<Vec<Value>>>(&mut self.nodes[0].client())
            .unwrap()
            .into_iter()
            .map(|r| {
                let a: i64 = redis::from_redis_value(r[0].clone()).unwrap();
                let b: i64 = redis::from_redis_value(r[1].clone()).unwrap();
                (a, b, r[2..].to_vec())
            })
            .collect();
        let (_, _, nodes) = slots
            .iter()
            .find(|(a, b, _)| (*a..=*b).contains(&i64::from(slot)))
            .expect("slot covered");
        let port: i64 = match &nodes[0] {
            Value::Array(v) => redis::from_redis_value(v[1].clone()).unwrap(),
            other => panic!("CLUSTER SLOTS node {other:?}"),
        };
        self.nodes
            .iter()
            .position(|n| i64::from(n.port) == port)
            .unwrap()
    }

    /// Every node says cluster_state:ok and its CLUSTER NODES names the same owner for every
    /// watched slot as every other node's.
    pub fn wait_settled(&self) {
        /// The ID of the node that owns `slot` in a CLUSTER NODES reply, "" if none.
        fn owner_in(nodes: &str, slot: u16) -> &str {
            nodes
                .lines()
                .find(|l| {
                    l.split_whitespace().skip(8).any(|r| {
                        let (a, b) = r.split_once('-').unwrap_or((r, r));
                        match (a.parse::<u16>(), b.parse::<u16>()) {
                            (Ok(a), Ok(b)) => (a..=b).contains(&slot),
                            _ => false,
                        }
                    })
                })
                .and_then(|l| l.split_whitespace().next())
                .unwrap_or("")
        }
        wait_until("the cluster settled", 60, || {
            let mut views = Vec::new();
            for n in &self.nodes {
                let mut con = n.client();
                let info: String = cmd(&mut con, &["CLUSTER", "INFO"]).unwrap();
                if !info.contains("cluster_state:ok") {
                    return false;
                }
                views.push(cmd::<String>(&mut con, &["CLUSTER", "NODES"]).unwrap());
            }
            self.watched.clone().all(|s| {
                let owners: HashSet<&str> = views.iter().map(|v| owner_in(v, s)).collect();
                owners.len() == 1 && !owners.contains("")
            })
        });
    }

    /// A client of the whole cluster that follows MOVED and ASK (and retries while a slot's
    /// writes are paused or it has no owner yet).
    pub fn client(&self) -> ClusterConnection {
        cluster_client(self.nodes.iter().map(Server::url).collect(), 50)
    }

    /// Freezes every node's clock (IMID.TEST-CLOCK) at `at(node index)` Unix ms.
    pub fn freeze(&self, at: impl Fn(usize) -> u64) {
        for i in 0..self.nodes.len() {
            self.freeze_node(i, at(i));
        }
    }

    /// Freezes node `i`'s clock (IMID.TEST-CLOCK) at `at` Unix ms.
    pub fn freeze_node(&self, i: usize, at: u64) {
        freeze(&mut self.nodes[i].client(), at);
    }

    /// The primary that owns `slot`, and another primary (the next one) to move it to.
    pub fn owner_and_next(&self, slot: u16) -> (usize, usize) {
        let a = self.owner(slot);
        (a, (a + 1) % 3)
    }

    /// `redis-cli --cluster reshard`: `n` slots from node `from` to node `to`.
    pub fn reshard(&self, from: usize, to: usize, n: u16) {
        let at = format!("127.0.0.1:{}", self.nodes[from].port);
        cli(&[
            "--cluster",
            "reshard",
            &at,
            "--cluster-from",
            &self.ids[from],
            "--cluster-to",
            &self.ids[to],
            "--cluster-slots",
            &n.to_string(),
            "--cluster-yes",
        ]);
        self.wait_settled();
    }

    /// Slots 0..n (owned by `a`) there and back, both ways a slot moves: to `b` by
    /// [`reshard`](Self::reshard), back to `a` by [`migrate_by_hand`](Self::migrate_by_hand);
    /// `pause` before each move and after the last (a load keeps running meanwhile).
    pub fn reshard_and_back(&self, a: usize, b: usize, n: u16, pause: impl Fn()) {
        pause();
        self.reshard(a, b, n);
        assert_eq!(self.owner(0), b);
        pause();
        for s in 0..n {
            self.migrate_by_hand(s, b, a);
        }
        assert_eq!(self.owner(0), a);
        pause();
    }

    /// The manual way: SETSLOT IMPORTING / MIGRATING, MIGRATE every key, SETSLOT NODE.
    pub fn migrate_by_hand(&self, slot: u16, from: usize, to: usize) {
        let s = slot.to_string();
        let (src, dst) = (&self.nodes[from], &self.nodes[to]);
        let ok = |n: &Server, args: &[&str]| {
            let _: String = cmd(&mut n.client(), args).unwrap();
        };
        ok(
            dst,
            &["CLUSTER", "SETSLOT", &s, "IMPORTING", &self.ids[from]],
        );
        ok(src, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &self.ids[to]]);
        loop {
            let keys: Vec<String> =
                cmd(&mut src.client(), &["CLUSTER", "GETKEYSINSLOT", &s, "100"]).unwrap();
            if keys.is_empty() {
                break;
            }
            let port = dst.port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let _: Value = cmd(&mut src.client(), &args).unwrap();
        }
        for n in [dst, src] {
            ok(n, &["CLUSTER", "SETSLOT", &s, "NODE", &self.ids[to]]);
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let primary = n.info_field("replication", "role").as_deref() == Some("master");
            if i != from && i != to && primary {
                ok(n, &["CLUSTER", "SETSLOT", &s, "NODE", &self.ids[to]]);
            }
        }
        self.wait_settled();
    }

    /// Starts [`load`] on `id_tags` and `seq_tags` with a client of its own.
    pub fn start_load(&self, id_tags: &[String], seq_tags: &[String]) -> Loader {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (s, ids, seqs) = (stop.clone(), id_tags.to_vec(), seq_tags.to_vec());
        let mut c = self.client();
        let worker = std::thread::spawn(move || load(&mut c, &ids, &seqs, &s));
        Loader { stop, worker }
    }
}

/// A key whose slot differs from `key`'s (whichever node owns it).
pub fn key_of_another_slot(key: &str) -> String {
    (0..)
        .map(|i| format!("other{i}"))
        .find(|k| slot(k) != slot(key))
        .unwrap()
}

/// Conversation tags whose key slot is in `slots`, `per_slot` of them for each slot.
pub fn tags_in(slots: std::ops::Range<u16>, per_slot: usize) -> Vec<String> {
    let mut found: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    let want = slots.len() * per_slot;
    let mut i = 0u32;
    while found.values().map(Vec::len).sum::<usize>() < want {
        let t = format!("c{i}");
        let s = slot(&t);
        if slots.contains(&s) && found.get(&s).map_or(0, Vec::len) < per_slot {
            found.entry(s).or_default().push(t);
        }
        i += 1;
    }
    found.into_values().flatten().collect()
}

/// A cluster client (the `redis` crate's: follows MOVED/ASK) of the nodes at `urls`, retrying
/// a command up to `retries` times while slots move or a failover runs.
pub fn cluster_client(urls: Vec<String>, retries: u32) -> ClusterConnection {
    ClusterClient::builder(urls)
        .retries(retries)
        .build()
        .unwrap()
        .get_connection()
        .unwrap()
}

/// What the load's client received, in order.
#[derive(Default)]
pub struct Received {
    /// Per slot, the message IDs in the order the client received them.
    pub ids: HashMap<u16, Vec<String>>,
    /// Per slot, the UIDs in the order the client received them.
    pub uids: HashMap<u16, Vec<i64>>,
    /// Per sequence key, the values in the order received.
    pub seqs: HashMap<String, Vec<i64>>,
    pub errors: usize,
}

impl Received {
    /// Never issued twice, and in order across owners: per slot every message ID and UID
    /// lies above the one received before it (and carries its slot), per key every sequence
    /// value does. Returns (message IDs, UIDs, sequence values) checked.
    pub fn check(&self) -> (usize, usize, usize) {
        let mut all = HashSet::new();
        for (s, ids) in &self.ids {
            // (an owner issued at or below an earlier owner's ID, if not)
            assert_increasing(format!("slot {s}"), ids);
            for id in ids {
                assert_eq!(hash_of(id) >> 8, u32::from(*s), "{id} carries slot {s}");
                assert!(all.insert(id.clone()), "{id} received twice");
            }
        }
        // UIDs (cluster layout 41,14,8, node = slot): per slot increasing across owners.
        let mut uids = HashSet::new();
        for (s, us) in &self.uids {
            assert_increasing(format!("slot {s}: UID"), us);
            for u in us {
                assert_eq!((u >> 8) & 0x3FFF, i64::from(*s), "UID {u} carries slot {s}");
                assert!(uids.insert(*u), "UID {u} received twice");
            }
        }
        let mut n_seqs = 0;
        for (k, vs) in &self.seqs {
            assert_increasing(k, vs);
            n_seqs += vs.len();
        }
        (all.len(), uids.len(), n_seqs)
    }
}

/// MSGID.GEN (channel type 1) and UID.GEN for `target`, each sent to the primary of its slot.
fn issue(c: &mut ClusterConnection, target: &str) -> (RedisResult<String>, RedisResult<i64>) {
    let route = || primary(slot(target));
    let mut g = redis::cmd("MSGID.GEN");
    g.arg(1).arg(target);
    let mut u = redis::cmd("UID.GEN");
    u.arg(target);
    (
        c.route_command(&g, route())
            .and_then(|v| Ok(redis::from_redis_value(v)?)),
        c.route_command(&u, route())
            .and_then(|v| Ok(redis::from_redis_value(v)?)),
    )
}

/// Until `stop`: MSGID.GEN and UID.GEN for every tag of `id_tags` (routed to its slot's
/// primary), SEQ.NEXT for every tag of `seq_tags`. Errors (a paused or moving slot the client
/// gave up on) are counted, not fatal.
pub fn load(
    c: &mut ClusterConnection,
    id_tags: &[String],
    seq_tags: &[String],
    stop: &AtomicBool,
) -> Received {
    let mut got = Received::default();
    while !stop.load(Ordering::Relaxed) {
        for t in id_tags {
            let s = slot(t);
            let (id, uid) = issue(c, &format!("{{{t}}}:conv"));
            match id {
                Ok(id) => got.ids.entry(s).or_default().push(id),
                Err(_) => got.errors += 1,
            }
            match uid {
                Ok(uid) => got.uids.entry(s).or_default().push(uid),
                Err(_) => got.errors += 1,
            }
        }
        for t in seq_tags {
            let key = format!("{{{t}}}:seq");
            match redis::cmd("SEQ.NEXT").arg(&key).query::<i64>(c) {
                Ok(v) => got.seqs.entry(key).or_default().push(v),
                Err(_) => got.errors += 1,
            }
        }
    }
    got
}

/// A [`load`] running in a thread of its own until [`Loader::finish`].
pub struct Loader {
    stop: std::sync::Arc<AtomicBool>,
    worker: std::thread::JoinHandle<Received>,
}

impl Loader {
    /// Stops the load and checks what it received ([`Received::check`]): more than 100 message
    /// IDs, UIDs and sequence values each, none twice, each in order. Prints the counts after
    /// `what` (the moves made) with the cluster's slot adoptions; returns what was received.
    pub fn finish(self, cluster: &Cluster, what: &str) -> Received {
        self.stop.store(true, Ordering::Relaxed);
        let got = self.worker.join().unwrap();
        let (n_ids, n_uids, n_seqs) = got.check();
        let adoptions: i64 = cluster
            .nodes
            .iter()
            .map(|n| n.imid_stat("cluster_slot_adoptions"))
            .sum();
        println!(
            "{what}: {n_ids} IDs, {n_uids} UIDs and {n_seqs} sequence values checked, {} errors \
             retried, {adoptions} slot adoptions",
            got.errors
        );
        assert!(
            n_ids > 100 && n_uids > 100 && n_seqs > 100,
            "the load ran through the moves"
        );
        got
    }
}

// ---- What a client sees of ID time (the lead tests) ----

/// What a client sees of ID time: the largest lead of an ID's time over the wall clock read
/// right after the reply (so the lead over the issuing node's clock is at least this; all nodes
/// share this host's clock), for message IDs and UIDs, and every ID received.
#[derive(Default)]
pub struct Leads {
    pub msgid_ms: i64,
    pub uid_ms: i64,
    pub ids: Vec<String>,
    pub uids: Vec<i64>,
    pub errors: usize,
}

impl Leads {
    /// Prints what `phase` measured and fails when the load did not run or an ID's time led
    /// the clock by more than `bound` ms.
    pub fn check(&self, phase: &str, bound: i64) {
        println!(
            "{phase}: {} IDs, {} UIDs; largest lead over the wall clock: message IDs {} ms, UIDs {} ms ({} errors retried)",
            self.ids.len(),
            self.uids.len(),
            self.msgid_ms,
            self.uid_ms,
            self.errors
        );
        assert!(
            self.ids.len() > 100 && self.uids.len() > 100,
            "{phase}: the load ran"
        );
        assert!(
            self.msgid_ms <= bound && self.uid_ms <= bound,
            "{phase}: an ID's time led the clock by more than {bound} ms: message IDs {} ms, UIDs {} ms",
            self.msgid_ms,
            self.uid_ms
        );
    }

    pub fn add(&mut self, other: Leads) {
        self.msgid_ms = self.msgid_ms.max(other.msgid_ms);
        self.uid_ms = self.uid_ms.max(other.uid_ms);
        self.ids.extend(other.ids);
        self.uids.extend(other.uids);
        self.errors += other.errors;
    }
}

/// `rounds` of MSGID.GEN and UID.GEN, each for a new random conversation (so a new slot almost
/// every call, sent to its owner), plus one for each of `tags` per round; `pause` between rounds.
pub fn issue_measuring(
    c: &mut ClusterConnection,
    rounds: usize,
    tags: &[String],
    pause: Duration,
    stop: Option<&AtomicBool>,
) -> Leads {
    let mut got = Leads {
        msgid_ms: i64::MIN,
        uid_ms: i64::MIN,
        ..Leads::default()
    };
    for _ in 0..rounds {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            break;
        }
        let mut targets = vec![format!("conv:{}", rand::random::<u64>())];
        targets.extend(tags.iter().map(|t| format!("{{{t}}}:conv")));
        for target in targets {
            let (id, uid) = issue(c, &target);
            match id {
                Ok(id) => {
                    let lead = msgid_time(&id) as i64 - wall_ms() as i64;
                    got.msgid_ms = got.msgid_ms.max(lead);
                    got.ids.push(id);
                }
                Err(_) => got.errors += 1,
            }
            match uid {
                Ok(uid) => {
                    let lead = uid_time(uid) as i64 - wall_ms() as i64;
                    got.uid_ms = got.uid_ms.max(lead);
                    got.uids.push(uid);
                }
                Err(_) => got.errors += 1,
            }
        }
        std::thread::sleep(pause);
    }
    got
}

/// The lead tests of the atomic migrations (real clocks, one host: no skew): gives each of
/// `seq_tags` a sequence key (`{tag}:seq`), measures 1,000 rounds on the fresh cluster, then
/// issues for `tags` (and a new conversation each round) while `moves` runs (its moves made
/// half a second apart by the caller's `settle`), and checks what a client saw: the fresh
/// cluster's IDs within the promise of the clock, the moves' within the lease, none twice.
/// `what` names the moves in the printed figures.
pub fn check_lead_through_moves(
    cluster: &Cluster,
    seq_tags: &[String],
    tags: &[String],
    what: &str,
    moves: impl FnOnce(&dyn Fn()),
) {
    let mut con = cluster.client();
    for t in seq_tags {
        let _: i64 = redis::cmd("SEQ.NEXT")
            .arg(format!("{{{t}}}:seq"))
            .query(&mut con)
            .unwrap();
    }
    let pause = Duration::from_millis(3);
    let fresh = issue_measuring(&mut con, 1_000, &[], pause, None);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let worker = {
        let (stop, tags) = (stop.clone(), tags.to_vec());
        let mut c = cluster.client();
        std::thread::spawn(move || issue_measuring(&mut c, usize::MAX, &tags, pause, Some(&stop)))
    };
    let settle = || std::thread::sleep(Duration::from_millis(500));
    settle();
    moves(&settle);
    stop.store(true, Ordering::Relaxed);
    let moved = worker.join().unwrap();
    fresh.check("fresh cluster", PROMISE_MS);
    moved.check(what, LEASE_MS);
    let ids: HashSet<&String> = fresh.ids.iter().chain(&moved.ids).collect();
    assert_eq!(
        ids.len(),
        fresh.ids.len() + moved.ids.len(),
        "an ID issued twice"
    );
}
