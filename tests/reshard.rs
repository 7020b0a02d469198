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
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                Server::build()
                    .hooked()
                    .args(&[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "2000",
                    ])
                    .start()
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
            if i != from && i != to {
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
    assert_eq!(cluster.nodes[b].imid_stat("cluster_slot_adoptions"), 1);
}
