//! imid on a real Redis Cluster: 3 primaries with a replica each, created with
//! `redis-cli --cluster create`, driven through the `redis` crate's cluster client.
use crate::common;
use common::cluster::{cluster_client, create, NODE_ARGS};
use common::*;
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::time::{Duration, Instant};

struct Cluster {
    nodes: Vec<Server>,
}

impl Cluster {
    fn start() -> Cluster {
        let nodes: Vec<Server> = (0..6)
            .map(|_| {
                // The bus port stays Redis's default, port + 10000: the harness picks ports
                // whose bus twin is free too, and picks both again if a start fails.
                Server::with(&NODE_ARGS)
            })
            .collect();
        create(&nodes, 1);
        let c = Cluster { nodes };
        c.wait_healthy();
        c
    }

    /// Every live node reports cluster_state:ok and every replica has its link up.
    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = self.nodes.iter().all(|n| {
                n.cluster_state().as_deref() == Some("ok")
                    && (n.info_field_opt("replication", "role").as_deref() != Some("slave")
                        || n.info_field_opt("replication", "master_link_status")
                            .as_deref()
                            == Some("up"))
            });
            if ok {
                return;
            }
            if Instant::now() >= deadline {
                let states: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| {
                        format!(
                            "{}: state {:?} role {:?} link {:?}\n{}",
                            n.port,
                            n.cluster_state(),
                            n.info_field_opt("replication", "role"),
                            n.info_field_opt("replication", "master_link_status"),
                            n.log_tail()
                        )
                    })
                    .collect();
                panic!("cluster did not become healthy:\n{}", states.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn client(&self) -> ClusterConnection {
        cluster_client(self.nodes.iter().map(Server::url).collect(), 30)
    }

    fn role(&self, i: usize) -> String {
        self.nodes[i]
            .info_field_opt("replication", "role")
            .unwrap_or_default()
    }
}

trait InfoOpt {
    fn info_field_opt(&self, section: &str, field: &str) -> Option<String>;
    fn cluster_state(&self) -> Option<String>;
}

impl InfoOpt for Server {
    /// Like `info_field`, but None instead of a panic when the node is down.
    fn info_field_opt(&self, section: &str, field: &str) -> Option<String> {
        let mut con = redis::Client::open(self.url())
            .ok()?
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        let info: String = redis::cmd("INFO").arg(section).query(&mut con).ok()?;
        info.lines().find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_owned())
        })
    }

    /// `cluster_state` from CLUSTER INFO (INFO's cluster section has only cluster_enabled).
    fn cluster_state(&self) -> Option<String> {
        let mut con = redis::Client::open(self.url())
            .ok()?
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).ok()?;
        info.lines().find_map(|l| {
            l.strip_prefix("cluster_state:")
                .map(|v| v.trim().to_owned())
        })
    }
}

/// `c` sent straight to the primary of `key`'s slot (no MOVED).
fn routed<T: redis::FromRedisValue>(con: &mut ClusterConnection, c: &redis::Cmd, key: &str) -> T {
    let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
        slot(key),
        SlotAddr::Master,
    )));
    redis::from_redis_value(con.route_command(c, route).unwrap()).unwrap()
}

/// MSGID.GEN routed the way a key-spec-aware client routes it: to the primary of the
/// target's slot (the target is the command's declared key, argument 2).
fn gen(con: &mut ClusterConnection, ty: u8, target: &str) -> String {
    routed(con, redis::cmd("MSGID.GEN").arg(ty).arg(target), target)
}

/// Five rounds over 10,000 targets `<prefix>:<i>` (checked to spread over the slots of all
/// three primaries): `issue` gives an ID for a target in a round (and checks it), and all
/// 50,000 IDs are distinct.
fn unique_over_five_rounds<T: std::hash::Hash + Eq + std::fmt::Display>(
    prefix: &str,
    mut issue: impl FnMut(usize, &str) -> T,
) {
    let targets: Vec<String> = (0..10_000).map(|i| format!("{prefix}:{i}")).collect();
    let slots: HashSet<u16> = targets.iter().map(|t| slot(t)).collect();
    assert!(
        slots.len() > 7_000,
        "targets spread over all three primaries"
    );
    let mut seen = HashSet::new();
    for round in 0..5 {
        for t in &targets {
            let id = issue(round, t);
            let text = id.to_string();
            assert!(seen.insert(id), "duplicate {text}");
        }
    }
    assert_eq!(seen.len(), 50_000);
}

#[test]
fn ids_are_unique_cluster_wide_and_carry_the_slot_of_their_target() {
    let cluster = Cluster::start();
    let mut con = cluster.client();
    unique_over_five_rounds("conv", |round, t| {
        let id = gen(&mut con, (round % 16) as u8, t);
        assert_eq!(hash_of(&id) >> 8, u32::from(slot(t)), "{t} -> {id}");
        id
    });
    // The default client routing (by the first argument) still ends on the right primary
    // through MOVED redirects.
    let id: String = redis::cmd("MSGID.GEN")
        .arg(1)
        .arg("{conv:42}")
        .query(&mut con)
        .unwrap();
    assert_eq!(hash_of(&id) >> 8, u32::from(slot("{conv:42}")));
    // MSGID.HASH agrees with the IDs (any node: it is keyless).
    let h: u32 = redis::cmd("MSGID.HASH")
        .arg("conv:7")
        .query(&mut con)
        .unwrap();
    assert_eq!(h >> 8, u32::from(slot("conv:7")));
}

/// UID.GEN routed to the primary of the target's slot, like `gen`.
fn gen_uid(con: &mut ClusterConnection, target: &str) -> i64 {
    routed(con, redis::cmd("UID.GEN").arg(target), target)
}

#[test]
fn uids_are_unique_cluster_wide_and_carry_the_slot_of_their_target() {
    let cluster = Cluster::start();
    let mut con = cluster.client();
    // The cluster layout (auto): 41 bits of ms, the 14-bit slot as node, 8 bits of seq.
    let mut last_per_slot: HashMap<u16, i64> = HashMap::new();
    unique_over_five_rounds("user", |_round, t| {
        let uid = gen_uid(&mut con, t);
        assert!(uid > 0);
        let s = slot(t);
        assert_eq!((uid >> 8) & 0x3FFF, i64::from(s), "{t} -> {uid}");
        if let Some(prev) = last_per_slot.insert(s, uid) {
            assert!(uid > prev, "slot {s}: {uid} after {prev}");
        }
        uid
    });
    // COUNT batches and the default client routing (MOVED) land on the slot's primary too.
    let v: Vec<i64> = redis::cmd("UID.GEN")
        .arg("{conv:42}")
        .arg("COUNT")
        .arg(1000)
        .query(&mut con)
        .unwrap();
    assert!(v.windows(2).all(|w| w[0] < w[1]));
    assert!(v
        .iter()
        .all(|u| (u >> 8) & 0x3FFF == i64::from(slot("{conv:42}"))));
    // UID.DECODE works on any node (keyless) and agrees.
    let f: Vec<Value> = redis::cmd("UID.DECODE").arg(v[0]).query(&mut con).unwrap();
    assert_eq!(
        redis::from_redis_value::<i64>(f[3].clone()).unwrap(),
        i64::from(slot("{conv:42}"))
    );
    assert_eq!(
        config(&mut cluster.nodes[0].client(), "imid.uid-layout"),
        "auto"
    );
    assert_eq!(
        cluster.nodes[0].imid_stat("uid_time_ends_ms"),
        1_767_225_600_000 + (1 << 41)
    );
}

#[test]
fn sequences_scripts_and_crossslot() {
    let cluster = Cluster::start();
    let mut con = cluster.client();
    let keys: Vec<String> = (0..1000).map(|i| format!("{{user:{i}}}:seq")).collect();
    for round in 1..=3 {
        for k in &keys {
            let v: i64 = redis::cmd("SEQ.NEXT").arg(k).query(&mut con).unwrap();
            assert_eq!(v, round, "{k}");
        }
    }
    let v: i64 = redis::cmd("SEQ.GET")
        .arg(&keys[500])
        .query(&mut con)
        .unwrap();
    assert_eq!(v, 3);
    // A script over two keys that share a hash tag runs on the node owning that tag's slot.
    let script = redis::Script::new(
        "local s = redis.call('SEQ.NEXT', KEYS[1]) \
         redis.call('ZADD', KEYS[2], s, ARGV[1]) \
         return {s, redis.call('MSGID.GEN', 1, KEYS[1])}",
    );
    for i in 0..100 {
        let seqk = format!("{{conv:{i}}}:seq");
        let inbox = format!("{{conv:{i}}}:inbox");
        for n in 1..=3 {
            let (s, id): (i64, String) = script
                .key(&seqk)
                .key(&inbox)
                .arg(format!("m{n}"))
                .invoke(&mut con)
                .unwrap();
            assert_eq!(s, n);
            assert_eq!(hash_of(&id) >> 8, u32::from(slot(&seqk)));
        }
        let z: i64 = redis::cmd("ZCARD").arg(&inbox).query(&mut con).unwrap();
        assert_eq!(z, 3);
    }
    // SEQ.MGET across slots gets Redis's usual CROSSSLOT error from any node.
    let mut node = cluster.nodes[0].client();
    let e = cmd::<Vec<i64>>(&mut node, &["SEQ.MGET", "{a}:seq", "{b}:seq"]).unwrap_err();
    assert!(err_text(&e).starts_with("CROSSSLOT"), "{e}");
    // ... and works within one slot.
    let v: Vec<i64> = redis::cmd("SEQ.MGET")
        .arg("{user:1}:seq")
        .arg("{user:1}:other")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, [3, 0]);
}

/// Issues NEXT on every key and GEN on every target, recording what was received.
fn round(
    con: &mut ClusterConnection,
    keys: &[String],
    got: &mut HashMap<String, Vec<i64>>,
    ids: &mut HashSet<String>,
) {
    for k in keys {
        let v: i64 = redis::cmd("SEQ.NEXT").arg(k).query(con).unwrap();
        got.entry(k.clone()).or_default().push(v);
        let id = gen(con, 1, k);
        assert!(ids.insert(id.clone()), "duplicate id {id}");
        let uid = gen_uid(con, k);
        assert!(ids.insert(uid.to_string()), "duplicate uid {uid}");
    }
}

fn assert_increasing(got: &HashMap<String, Vec<i64>>) {
    for (k, vs) in got {
        for w in vs.windows(2) {
            assert!(w[0] < w[1], "{k}: {} then {}", w[0], w[1]);
        }
    }
}

#[test]
fn failovers_neither_reissue_values_nor_ids() {
    let mut cluster = Cluster::start();
    let mut con = cluster.client();
    let keys: Vec<String> = (0..300).map(|i| format!("{{conv:{i}}}:seq")).collect();
    let mut got = HashMap::new();
    let mut ids = HashSet::new();
    round(&mut con, &keys, &mut got, &mut ids);

    // 1. A manual failover: a replica takes over from its primary with the primary's consent.
    let replica = (0..6).find(|&i| cluster.role(i) == "slave").unwrap();
    let mut rcon = cluster.nodes[replica].client();
    let _: String = cmd(&mut rcon, &["CLUSTER", "FAILOVER"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.role(replica) != "master" {
        assert!(
            Instant::now() < deadline,
            "manual failover did not complete"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.wait_healthy();
    round(&mut con, &keys, &mut got, &mut ids);
    assert!(
        cluster.nodes[replica].imid_stat("seq_gap_skips") > 0,
        "the new primary skipped the gap"
    );

    // 2. A primary dies (kill -9) and the cluster promotes its replica by itself.
    let victim = (0..6)
        .find(|&i| cluster.role(i) == "master" && i != replica)
        .unwrap();
    cluster.nodes[victim].kill();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let promoted = (0..6)
            .filter(|&i| i != victim)
            .filter(|&i| cluster.role(i) == "master")
            .count();
        let ok = (0..6)
            .filter(|&i| i != victim)
            .all(|i| cluster.nodes[i].cluster_state().as_deref() == Some("ok"));
        if promoted == 3 && ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "automatic failover did not complete"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut con = cluster.client_without(victim);
    round(&mut con, &keys, &mut got, &mut ids);
    assert_increasing(&got);
    assert_eq!(ids.len(), 3 * 2 * keys.len(), "message IDs and UIDs");
}

impl Cluster {
    fn client_without(&self, dead: usize) -> ClusterConnection {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != dead)
            .map(|(_, n)| n.url())
            .collect();
        cluster_client(urls, 30)
    }
}

#[test]
fn make_cluster_script_starts_a_working_cluster_and_stops_it() {
    // scripts/cluster.sh is what `make cluster` runs; here on ports picked for the test.
    let dir = temp_dir("cluster-script");
    // The script keeps Redis's default bus ports (port + 10000); the harness hands out six
    // consecutive ports with both checked free, below the kernel's ephemeral range.
    let base = free_ports(6);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster.sh");
    let run = |action: &str| {
        Command::new("bash")
            .arg(&script)
            .arg(action)
            .env("IMID_CLUSTER_PORT", base.to_string())
            .env("IMID_CLUSTER_DIR", &dir)
            .env("IMID_MODULE", module_path())
            .output()
            .unwrap()
    };
    let out = run("start");
    let stop_guard = scopeguard(|| {
        run("stop");
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut primaries = 0;
    for i in 0..6 {
        let mut con = redis::Client::open(format!("redis://127.0.0.1:{}/", base + i))
            .unwrap()
            .get_connection()
            .unwrap();
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
        assert!(
            info.contains("cluster_state:ok"),
            "node {}: {info}",
            base + i
        );
        let role: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut con)
            .unwrap();
        primaries += usize::from(role.contains("role:master"));
    }
    assert_eq!(primaries, 3, "3 primaries and 3 replicas");
    let urls: Vec<String> = (0..6)
        .map(|i| format!("redis://127.0.0.1:{}/", base + i))
        .collect();
    let mut con = ClusterClient::new(urls).unwrap().get_connection().unwrap();
    let id = gen(&mut con, 1, "{conv:42}");
    assert_eq!(hash_of(&id) >> 8, u32::from(slot("{conv:42}")));
    drop(stop_guard);
    let client = redis::Client::open(format!("redis://127.0.0.1:{base}/")).unwrap();
    assert!(client.get_connection().is_err(), "stop shut the nodes down");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `f` when dropped, so the nodes stop even when an assertion fails.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// `host:port` of every node, comma-separated, as the example programs take them.
fn addresses(cluster: &Cluster) -> String {
    cluster
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn keyless_commands_and_the_example_programs_on_a_cluster() {
    let cluster = Cluster::start();

    // The redis crate's cluster client routes a command it does not know by its first
    // argument (a random node when there is none); a keyless command is answered by whichever
    // node it reaches, so imid's pure commands work with no routing of the caller's own.
    let mut con = cluster.client();
    let id: String = redis::cmd("MSGID.ENCODE")
        .arg(0)
        .arg(4094)
        .arg(1)
        .arg(2526662)
        .query(&mut con)
        .unwrap();
    assert_eq!(id, "0000-0000-7VS6-D3E6");
    let fields: Vec<Value> = redis::cmd("MSGID.DECODE").arg(&id).query(&mut con).unwrap();
    assert_eq!(fields[3], Value::Int(4094), "{fields:?}");
    let h: u32 = redis::cmd("MSGID.HASH")
        .arg("{conv:42}")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        h >> 8,
        u32::from(slot("{conv:42}")),
        "slot mode on a cluster"
    );
    let openid: String = redis::cmd("OPENID.ENC")
        .arg(&id)
        .arg(1)
        .arg(2)
        .query(&mut con)
        .unwrap();
    let back: Vec<Value> = redis::cmd("OPENID.DEC")
        .arg(&openid)
        .query(&mut con)
        .unwrap();
    assert_eq!(
        back[1],
        Value::BulkString(id.clone().into_bytes()),
        "{back:?}"
    );
    // UID.GEN's key (the target) is its first argument, so the crate routes it by the key;
    // UID.DECODE and UID.ENCODE are keyless, answered wherever they land.
    let uid: i64 = redis::cmd("UID.GEN")
        .arg("{conv:42}")
        .query(&mut con)
        .unwrap();
    let parts: Vec<Value> = redis::cmd("UID.DECODE").arg(uid).query(&mut con).unwrap();
    let (Value::Int(t), Value::Int(n), Value::Int(q)) = (&parts[1], &parts[3], &parts[5]) else {
        panic!("UID.DECODE {uid}: {parts:?}");
    };
    let again: i64 = redis::cmd("UID.ENCODE")
        .arg(t)
        .arg(n)
        .arg(q)
        .query(&mut con)
        .unwrap();
    assert_eq!(again, uid);

    // The Python (redis-py RedisCluster) and Node.js (ioredis Cluster) examples: the IM flow
    // through Functions and scripts, then the keyless commands with each client's routing.
    let mut programs: Vec<(String, Vec<String>)> = Vec::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    match python_with_redis() {
        Some(py) => programs.push((
            py,
            vec![root
                .join("examples/python/im_flow.py")
                .display()
                .to_string()],
        )),
        None => println!("SKIPPED the Python example: no python3 with redis-py"),
    }
    match node_for_example() {
        Some(node) => programs.push((
            node,
            vec![root.join("examples/node/im_flow.js").display().to_string()],
        )),
        None => println!("SKIPPED the Node.js example: no node on PATH"),
    }
    for (bin, args) in programs {
        let stdout = run(Command::new(&bin)
            .args(&args)
            .args(["--cluster", &addresses(&cluster)]));
        // Each conversation's IDs carry its slot, checked by the program against the
        // cluster's own slot of the tag; a retried send came back as the original.
        let slots: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("hash >> 8 = "))
            .collect();
        assert!(!slots.is_empty(), "{stdout}");
        for l in &slots {
            // "hash >> 8 = 59, <how the slot was found> = 59"
            let from_id = l["hash >> 8 = ".len()..].split(',').next();
            let slot = l.rsplit(" = ").next();
            assert!(from_id.is_some() && from_id == slot, "{l}");
        }
        assert!(stdout.to_lowercase().contains("duplicate true"), "{stdout}");
        assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
    }

    // docs/guide.md's program (issue 46): redis-py told where keyless commands go and which
    // module commands are reads; its reads (IM.SYNC, IM.UNREAD pipelined across the nodes) are
    // served by replicas too, its writes by primaries only.
    if let Some(py) = python_with_redis() {
        let dir = temp_dir("guide-cluster");
        let stdout = run(Command::new(&py)
            .arg(guide_program(&dir))
            .args(["--cluster", &addresses(&cluster)]));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
        let served = |n: &Server, command: &str| {
            let info: String = cmd(&mut n.client(), &["INFO", "commandstats"]).unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
                .and_then(|v| v.split(',').next()?.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let role = |n: &Server| n.info_field_opt("replication", "role").unwrap_or_default();
        let replicas: Vec<&Server> = cluster
            .nodes
            .iter()
            .filter(|n| role(n) == "slave")
            .collect();
        assert!(!replicas.is_empty());
        let reads: u64 = replicas
            .iter()
            .map(|n| served(n, "im.sync") + served(n, "im.unread"))
            .sum();
        assert!(reads > 0, "no read reached a replica");
        assert!(replicas.iter().all(|n| served(n, "im.send") == 0));
    }
}
