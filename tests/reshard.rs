//! Never reissue through resharding: hash slots move between primaries, by
//! `redis-cli --cluster reshard` and by hand (CLUSTER SETSLOT + MIGRATE), while a client keeps
//! issuing message IDs and sequence values for targets in those slots.
//!
//! The clocks are the test build's (IMID.TEST-CLOCK): frozen at the same instant on two primaries
//! and a minute behind on the importing one, so without slot adoption (src/node/cluster.rs) the
//! new owner would issue IDs for a slot below, and equal to, IDs the old owner issued for it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod common;
use common::*;
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slots that move: the lowest of the first primary's range, so that `redis-cli --cluster
/// reshard --cluster-slots N` moves exactly these (it takes a source's slots in order).
const MOVING: u16 = 4;

struct Cluster {
    nodes: Vec<Server>,
    ids: Vec<String>,
}

fn cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .output()
        .expect("redis-cli (Debian redis-tools) is needed");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "redis-cli {args:?}: {text}");
    text
}

impl Cluster {
    /// Three primaries, no replicas, with the test-hooks module; node 0 owns slot 0.
    fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// Three primaries with `extra` server arguments (the test-hooks build, whose clock is the
    /// system clock until a test steers it).
    fn start_with(extra: &[&str]) -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                let mut args = vec![
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ];
                args.extend_from_slice(extra);
                Server::build().hooked().args(&args).start()
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let mut args = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        cli(&args);
        let ids = nodes
            .iter()
            .map(|n| cmd::<String>(&mut n.client(), &["CLUSTER", "MYID"]).unwrap())
            .collect();
        let c = Cluster { nodes, ids };
        c.wait_settled();
        c
    }

    /// Adds a replica of primary `of` (same arguments) and waits until it has synced.
    fn add_replica(&mut self, of: usize, extra: &[&str]) -> usize {
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "2000",
        ];
        args.extend_from_slice(extra);
        let r = Server::build().hooked().args(&args).start();
        cli(&[
            "--cluster",
            "add-node",
            &format!("127.0.0.1:{}", r.port),
            &format!("127.0.0.1:{}", self.nodes[of].port),
            "--cluster-slave",
            "--cluster-master-id",
            &self.ids[of],
        ]);
        let id: String = cmd(&mut r.client(), &["CLUSTER", "MYID"]).unwrap();
        self.nodes.push(r);
        self.ids.push(id);
        let deadline = Instant::now() + Duration::from_secs(60);
        let last = self.nodes.len() - 1;
        while self.nodes[last]
            .info_field("replication", "master_link_status")
            .as_deref()
            != Some("up")
        {
            assert!(Instant::now() < deadline, "replica did not sync");
            std::thread::sleep(Duration::from_millis(100));
        }
        self.wait_settled();
        last
    }

    fn owner(&self, slot: u16) -> usize {
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

    /// Every node says cluster_state:ok and agrees on the owner of every moving slot.
    fn wait_settled(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = self.nodes.iter().all(|n| {
                let info: String = cmd(&mut n.client(), &["CLUSTER", "INFO"]).unwrap();
                info.contains("cluster_state:ok")
            });
            if ok && (0..MOVING).all(|s| self.agree_on(s)) {
                return;
            }
            assert!(Instant::now() < deadline, "cluster did not settle");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every node's CLUSTER NODES names the same owner for `slot`.
    fn agree_on(&self, slot: u16) -> bool {
        let views: HashSet<String> = self
            .nodes
            .iter()
            .map(|n| {
                let nodes: String = cmd(&mut n.client(), &["CLUSTER", "NODES"]).unwrap();
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
                    .to_owned()
            })
            .collect();
        views.len() == 1 && !views.contains("")
    }

    fn client(&self) -> ClusterConnection {
        let urls: Vec<String> = self.nodes.iter().map(|n| n.url()).collect();
        ClusterClient::builder(urls)
            .retries(50)
            .build()
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// `redis-cli --cluster reshard`: `n` slots from node `from` to node `to`.
    fn reshard(&self, from: usize, to: usize, n: u16) {
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

    /// The manual way: SETSLOT IMPORTING / MIGRATING, MIGRATE every key, SETSLOT NODE.
    fn migrate_by_hand(&self, slot: u16, from: usize, to: usize) {
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
}

/// Conversation tags whose slot is one of the moving slots, two per slot.
fn tags() -> Vec<String> {
    let mut per_slot: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    let mut i = 0u32;
    while per_slot.values().map(Vec::len).sum::<usize>() < usize::from(MOVING) * 2 {
        let t = format!("c{i}");
        let s = slot(&t);
        if s < MOVING && per_slot.entry(s).or_default().len() < 2 {
            per_slot.get_mut(&s).unwrap().push(t);
        }
        i += 1;
    }
    per_slot.into_values().flatten().collect()
}

#[derive(Default)]
struct Received {
    /// Per slot, the IDs in the order the client received them.
    ids: HashMap<u16, Vec<String>>,
    /// Per slot, the UIDs in the order the client received them.
    uids: HashMap<u16, Vec<i64>>,
    /// Per sequence key, the values in the order received.
    seqs: HashMap<String, Vec<i64>>,
    errors: usize,
}

fn load(c: &mut ClusterConnection, tags: &[String], stop: &AtomicBool) -> Received {
    let mut got = Received::default();
    while !stop.load(Ordering::Relaxed) {
        for t in tags {
            let target = format!("{{{t}}}:conv");
            let s = slot(t);
            let mut g = redis::cmd("MSGID.GEN");
            g.arg(1).arg(&target);
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                s,
                SlotAddr::Master,
            )));
            match c
                .route_command(&g, route)
                .and_then(|v| Ok(redis::from_redis_value::<String>(v)?))
            {
                Ok(id) => got.ids.entry(s).or_default().push(id),
                Err(_) => got.errors += 1,
            }
            let mut u = redis::cmd("UID.GEN");
            u.arg(&target);
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                s,
                SlotAddr::Master,
            )));
            match c
                .route_command(&u, route)
                .and_then(|v| Ok(redis::from_redis_value::<i64>(v)?))
            {
                Ok(uid) => got.uids.entry(s).or_default().push(uid),
                Err(_) => got.errors += 1,
            }
            let key = format!("{{{t}}}:seq");
            match redis::cmd("SEQ.NEXT").arg(&key).query::<i64>(c) {
                Ok(v) => got.seqs.entry(key).or_default().push(v),
                Err(_) => got.errors += 1,
            }
        }
    }
    got
}

#[test]
fn moving_slots_under_load_reissue_no_id_and_no_sequence_value() {
    let cluster = Cluster::start();
    assert_eq!(cluster.owner(0), cluster.owner(MOVING - 1));
    let a = cluster.owner(0);
    let b = (a + 1) % 3;
    let t = 1_800_000_000_000u64;
    for (i, n) in cluster.nodes.iter().enumerate() {
        // the importing primary's clock is a minute behind the others, all frozen
        let at = if i == b { t - 60_000 } else { t };
        let _: String = cmd(
            &mut n.client(),
            &["IMID.TEST-CLOCK", "FREEZE", &at.to_string()],
        )
        .unwrap();
    }
    let tags = tags();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (stop, tags) = (stop.clone(), tags.clone());
        let mut c = cluster.client();
        std::thread::spawn(move || load(&mut c, &tags, &stop))
    };
    let pause = || std::thread::sleep(Duration::from_millis(700));
    pause();
    cluster.reshard(a, b, MOVING);
    assert_eq!(cluster.owner(0), b);
    pause();
    for s in 0..MOVING {
        cluster.migrate_by_hand(s, b, a);
    }
    assert_eq!(cluster.owner(0), a);
    pause();
    for s in 0..MOVING {
        cluster.migrate_by_hand(s, a, b);
    }
    pause();
    // b's lowest slots are now the moving ones: reshard moves them back
    cluster.reshard(b, a, MOVING);
    assert_eq!(cluster.owner(MOVING - 1), a);
    pause();
    stop.store(true, Ordering::Relaxed);
    let got = worker.join().unwrap();

    let mut all = HashSet::new();
    let mut n_ids = 0;
    for (s, ids) in &got.ids {
        for w in ids.windows(2) {
            assert!(
                w[0] < w[1],
                "slot {s}: {} then {}: an owner issued at or below an earlier owner's ID",
                w[0],
                w[1]
            );
        }
        for id in ids {
            assert_eq!(hash_of(id) >> 8, u32::from(*s), "{id} carries slot {s}");
            assert!(all.insert(id.clone()), "{id} received twice");
        }
        n_ids += ids.len();
    }
    // UIDs (cluster layout 41,14,8, node = slot): per slot increasing across owners.
    let mut uids = HashSet::new();
    for (s, us) in &got.uids {
        for w in us.windows(2) {
            assert!(w[0] < w[1], "slot {s}: UID {} then {}", w[0], w[1]);
        }
        for u in us {
            assert_eq!((u >> 8) & 0x3FFF, i64::from(*s), "UID {u} carries slot {s}");
            assert!(uids.insert(*u), "UID {u} received twice");
        }
    }
    let n_uids = uids.len();
    let mut n_seqs = 0;
    for (k, vs) in &got.seqs {
        for w in vs.windows(2) {
            assert!(w[0] < w[1], "{k}: {} then {}", w[0], w[1]);
        }
        n_seqs += vs.len();
    }
    let adoptions: i64 = cluster
        .nodes
        .iter()
        .map(|n| n.imid_stat("cluster_slot_adoptions"))
        .sum();
    println!(
        "4 moves of {MOVING} slots: {n_ids} IDs, {n_uids} UIDs and {n_seqs} sequence values \
         checked, {} errors retried, {adoptions} slot adoptions",
        got.errors
    );
    assert!(
        n_ids > 100 && n_uids > 100 && n_seqs > 100,
        "the load ran through the moves"
    );
    assert!(
        got.ids.values().all(|v| v.len() > 10),
        "every moving slot got IDs"
    );
}

#[test]
fn a_migrated_sequence_arrives_marked_and_skips_the_gap() {
    let cluster = Cluster::start();
    let a = cluster.owner(0);
    let b = (a + 1) % 3;
    let t = &tags()[0];
    let key = format!("{{{t}}}:seq");
    let s = slot(t);
    let mut c = cluster.client();
    let v: i64 = redis::cmd("SEQ.NEXT")
        .arg(&key)
        .arg("COUNT")
        .arg(5)
        .query(&mut c)
        .unwrap();
    assert_eq!(v, 5);
    // MIGRATE carries the key as a DUMP payload; RESTORE on the new owner marks it
    cluster.migrate_by_hand(s, a, b);
    assert_eq!(cluster.owner(s), b);
    let v: i64 = redis::cmd("SEQ.NEXT").arg(&key).query(&mut c).unwrap();
    assert_eq!(v, 1006, "the first NEXT after the move skips the gap");
    let v: i64 = redis::cmd("SEQ.NEXT").arg(&key).query(&mut c).unwrap();
    assert_eq!(v, 1007, "once");
    assert_eq!(cluster.nodes[b].imid_stat("seq_gap_skips"), 1);
}

#[test]
fn the_importing_primary_starts_above_the_old_owners_ids() {
    // One move, no load: the old owner's lease reaches the importing primary over the bus, and
    // its first ID for the slot lies above the old owner's last, although its clock is a
    // minute behind.
    let cluster = Cluster::start();
    let a = cluster.owner(0);
    let b = (a + 1) % 3;
    let t = 1_800_000_000_000u64;
    for (i, n) in cluster.nodes.iter().enumerate() {
        let at = if i == b { t - 60_000 } else { t };
        let _: String = cmd(
            &mut n.client(),
            &["IMID.TEST-CLOCK", "FREEZE", &at.to_string()],
        )
        .unwrap();
    }
    let tag = &tags()[0];
    let target = format!("{{{tag}}}:conv");
    let gen =
        |n: &Server| -> String { cmd(&mut n.client(), &["MSGID.GEN", "1", &target]).unwrap() };
    let before: Vec<String> = (0..5000).map(|_| gen(&cluster.nodes[a])).collect();
    let last = before.last().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.nodes[b].imid_stat("cluster_peer_lease_ms") < t as i64 {
        assert!(Instant::now() < deadline, "no lease heard over the bus");
        std::thread::sleep(Duration::from_millis(50));
    }
    let uid = |n: &Server| -> i64 { cmd(&mut n.client(), &["UID.GEN", &target]).unwrap() };
    let uids_before: Vec<i64> = (0..2000).map(|_| uid(&cluster.nodes[a])).collect();
    let adoptions = cluster.nodes[b].imid_stat("cluster_slot_adoptions");
    cluster.migrate_by_hand(slot(tag), a, b);
    // The first UID on the new owner adopts the slot (before any MSGID there) ...
    let uids_after: Vec<i64> = (0..2000).map(|_| uid(&cluster.nodes[b])).collect();
    assert!(
        uids_after[0] > *uids_before.last().unwrap(),
        "UID {} after {}",
        uids_after[0],
        uids_before.last().unwrap()
    );
    let set: HashSet<&i64> = uids_before.iter().chain(&uids_after).collect();
    assert_eq!(set.len(), 4_000);
    // ... and message IDs there lie above the old owner's too.
    let after: Vec<String> = (0..5000).map(|_| gen(&cluster.nodes[b])).collect();
    assert!(after[0] > last, "{} after {last}", after[0]);
    let set: HashSet<&String> = before.iter().chain(&after).collect();
    assert_eq!(set.len(), 10_000);
    assert_eq!(
        cluster.nodes[b].imid_stat("cluster_slot_adoptions"),
        adoptions + 1,
        "one adoption: the import"
    );
}

/// Unix ms of a message ID's time field (its top 42 bits).
fn msgid_time(id: &str) -> u64 {
    let b = data_encoding::BASE32HEX_NOPAD
        .decode(id.replace('-', "").as_bytes())
        .unwrap();
    let v = b.iter().fold(0u128, |acc, x| (acc << 8) | u128::from(*x));
    (v >> 38) as u64
}

/// Unix ms of a UID's time field under the cluster default (`41,14,8`, ms, epoch 2026-01-01).
fn uid_time(uid: i64) -> u64 {
    1_767_225_600_000 + (uid as u64 >> 22)
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// What a client sees of ID time: the largest lead of an ID's time over the wall clock read
/// right after the reply (so the lead over the issuing node's clock is at least this; all nodes
/// share this host's clock), for message IDs and UIDs, and every ID received.
#[derive(Default)]
struct Leads {
    msgid_ms: i64,
    uid_ms: i64,
    ids: Vec<String>,
    uids: Vec<i64>,
    errors: usize,
}

impl Leads {
    fn add(&mut self, other: Leads) {
        self.msgid_ms = self.msgid_ms.max(other.msgid_ms);
        self.uid_ms = self.uid_ms.max(other.uid_ms);
        self.ids.extend(other.ids);
        self.uids.extend(other.uids);
        self.errors += other.errors;
    }
}

/// `rounds` of MSGID.GEN and UID.GEN, each for a new random conversation (so a new slot almost
/// every call, sent to its owner), plus one for each of `tags` per round; `pause` between rounds.
fn issue_measuring(
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
            let route = || {
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                    slot(&target),
                    SlotAddr::Master,
                )))
            };
            let mut g = redis::cmd("MSGID.GEN");
            g.arg(1).arg(&target);
            match c
                .route_command(&g, route())
                .and_then(|v| Ok(redis::from_redis_value::<String>(v)?))
            {
                Ok(id) => {
                    let lead = msgid_time(&id) as i64 - wall_ms() as i64;
                    got.msgid_ms = got.msgid_ms.max(lead);
                    got.ids.push(id);
                }
                Err(_) => got.errors += 1,
            }
            let mut u = redis::cmd("UID.GEN");
            u.arg(&target);
            match c
                .route_command(&u, route())
                .and_then(|v| Ok(redis::from_redis_value::<i64>(v)?))
            {
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

/// The lease window (src/core/lease.rs): how far a restarted or promoted node's IDs may lead
/// its clock.
const LEASE_MS: i64 = 5_000;
/// How far a primary's promise to its peers reaches past its last ID (src/node/cluster.rs).
const PROMISE_MS: i64 = 1_000;

#[test]
fn id_time_stays_within_the_lease_of_the_clock_through_restarts_moves_and_failovers() {
    // Real clocks (one host: no skew between the nodes), AOF on, one replica for a failover.
    let aof = ["--appendonly", "yes", "--appendfsync", "everysec"];
    let mut cluster = Cluster::start_with(&aof);
    let replica = cluster.add_replica(0, &aof);
    let mut c = cluster.client();
    let pause = Duration::from_millis(3);
    let mut all = Leads::default();
    let check = |phase: &str, got: Leads, bound: i64, all: &mut Leads| {
        println!(
            "{phase}: {} IDs, {} UIDs; largest lead over the wall clock: message IDs {} ms, UIDs {} ms ({} errors retried)",
            got.ids.len(),
            got.uids.len(),
            got.msgid_ms,
            got.uid_ms,
            got.errors
        );
        assert!(
            got.ids.len() > 100 && got.uids.len() > 100,
            "{phase}: the load ran"
        );
        assert!(
            got.msgid_ms <= bound && got.uid_ms <= bound,
            "{phase}: an ID's time led the clock by more than {bound} ms: message IDs {} ms, UIDs {} ms",
            got.msgid_ms,
            got.uid_ms
        );
        all.add(got);
    };

    // 1. A fresh cluster: new conversations all over the slot space (the issue's run).
    // Nothing changed owner: IDs at the clock, at most a promise (1 s) ahead.
    let got = issue_measuring(&mut c, 1_500, &[], pause, None);
    check("fresh cluster", got, PROMISE_MS, &mut all);

    // 2. Every primary restarted in turn (SHUTDOWN, which writes the AOF, then start).
    for i in 0..3 {
        cluster.nodes[i].shutdown(true);
        cluster.nodes[i].restart();
        cluster.wait_settled();
        let mut c = cluster.client();
        let got = issue_measuring(&mut c, 300, &[], pause, None);
        check(
            &format!("after restarting primary {i}"),
            got,
            LEASE_MS,
            &mut all,
        );
    }
    // Each mechanism measured on its own: the restarts' lead runs out first.
    let quiet = || std::thread::sleep(Duration::from_millis(LEASE_MS as u64 + 500));
    quiet();

    // 3. Slots moved back and forth under load (reshard and SETSLOT/MIGRATE), the load also
    // on conversations in the moving slots.
    let tags = tags();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (stop, tags) = (stop.clone(), tags.clone());
        let mut c = cluster.client();
        std::thread::spawn(move || issue_measuring(&mut c, usize::MAX, &tags, pause, Some(&stop)))
    };
    let a = cluster.owner(0);
    let b = (a + 1) % 3;
    let settle = || std::thread::sleep(Duration::from_millis(500));
    settle();
    cluster.reshard(a, b, MOVING);
    settle();
    for s in 0..MOVING {
        cluster.migrate_by_hand(s, b, a);
    }
    settle();
    cluster.reshard(a, b, MOVING);
    settle();
    for s in 0..MOVING {
        cluster.migrate_by_hand(s, b, a);
    }
    settle();
    stop.store(true, Ordering::Relaxed);
    check(
        "slot moves under load",
        worker.join().unwrap(),
        LEASE_MS,
        &mut all,
    );
    quiet();

    // 4. A failover: the replica of primary 0 takes over (CLUSTER FAILOVER).
    let _: String = cmd(
        &mut cluster.nodes[replica].client(),
        &["CLUSTER", "FAILOVER"],
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.nodes[replica]
        .info_field("replication", "role")
        .as_deref()
        != Some("master")
    {
        assert!(Instant::now() < deadline, "the failover did not happen");
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.wait_settled();
    let mut c = cluster.client();
    let got = issue_measuring(&mut c, 500, &tags, pause, None);
    check("after a failover", got, LEASE_MS, &mut all);

    let ids: HashSet<&String> = all.ids.iter().collect();
    assert_eq!(ids.len(), all.ids.len(), "a message ID was issued twice");
    let uids: HashSet<&i64> = all.uids.iter().collect();
    assert_eq!(uids.len(), all.uids.len(), "a UID was issued twice");
}

#[test]
fn a_node_restarted_in_the_middle_of_an_import_still_follows_the_source() {
    // nodes.conf keeps a slot importing across a restart, and clients keep sending it ASKING
    // requests, but no SETSLOT reaches the new process: it reads the import from CLUSTER NODES.
    let mut cluster = Cluster::start();
    let a = cluster.owner(0);
    let b = (a + 1) % 3;
    let t = 1_800_000_000_000u64;
    let freeze = |n: &Server, at: u64| {
        let _: String = cmd(
            &mut n.client(),
            &["IMID.TEST-CLOCK", "FREEZE", &at.to_string()],
        )
        .unwrap();
    };
    for (i, n) in cluster.nodes.iter().enumerate() {
        freeze(n, if i == b { t - 60_000 } else { t });
    }
    let tag = &tags()[0];
    let s = slot(tag).to_string();
    let target = format!("{{{tag}}}:conv");
    let before: Vec<String> = (0..5000)
        .map(|_| cmd(&mut cluster.nodes[a].client(), &["MSGID.GEN", "1", &target]).unwrap())
        .collect();
    let _: String = cmd(
        &mut cluster.nodes[b].client(),
        &["CLUSTER", "SETSLOT", &s, "IMPORTING", &cluster.ids[a]],
    )
    .unwrap();
    let _: String = cmd(
        &mut cluster.nodes[a].client(),
        &["CLUSTER", "SETSLOT", &s, "MIGRATING", &cluster.ids[b]],
    )
    .unwrap();
    cluster.nodes[b].shutdown(true);
    cluster.nodes[b].restart();
    freeze(&cluster.nodes[b], t - 60_000);
    cluster.wait_settled();
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.nodes[b].imid_stat("cluster_slots_importing") != 1
        || cluster.nodes[b].imid_stat("cluster_peer_lease_ms") < t as i64
    {
        assert!(
            Instant::now() < deadline,
            "the restarted node did not restore its import or hear the source"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut con = cluster.nodes[b].client();
    let (_, id): (String, String) = redis::pipe()
        .cmd("ASKING")
        .cmd("MSGID.GEN")
        .arg(1)
        .arg(&target)
        .query(&mut con)
        .unwrap();
    let last = before.last().unwrap();
    assert!(&id > last, "{id} issued on the importing node after {last}");
}
