//! Never reissue through Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`): the source
//! sends the slots' keys as an AOF-format snapshot and streams their writes, then pauses and
//! the target claims the slots. No `CLUSTER SETSLOT` runs, so the importing primary learns of
//! the move from Valkey's atomic slot migration event (src/cluster.rs).
//!
//! Always on Valkey 9.1.2 (`newer_server!("valkey9")`), whatever `$REDIS_SERVER` is: the
//! migration exists only there. Clocks are the test build's (IMID.TEST-CLOCK), frozen at the
//! same instant on two primaries and a minute behind on the importing one, as in
//! tests/it/reshard.rs.
use crate::common;
use common::cluster::*;
use common::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Slots that hold sequence keys (and message ID / UID targets): their snapshot carries
/// `SEQ.SET` and the time mark.
const SEQ_SLOTS: (u16, u16) = (0, 1);
/// Slots with message ID / UID targets only: no keys, an empty snapshot, so nothing but slot
/// adoption keeps the new owner's IDs above the old owner's.
const ID_SLOTS: (u16, u16) = (2, 3);
/// Frozen clock of the primaries that are not a minute behind.
const T: u64 = 1_800_000_000_000;

/// `None`: Valkey 9.1.2 is missing and the run does not require it (the test skips).
fn start() -> Option<Cluster> {
    Some(Cluster::start(
        Some(&newer_server!("valkey9")),
        // DEBUG SLOTMIGRATION PREVENT-PAUSE holds a migration in its streaming phase
        &["--enable-debug-command", "yes"],
        0..4,
    ))
}

/// `CLUSTER GETSLOTMIGRATIONS` on `n`, newest first, each job as its fields.
fn jobs(n: &Server) -> Vec<HashMap<String, String>> {
    let v: Vec<Vec<Value>> = cmd(&mut n.client(), &["CLUSTER", "GETSLOTMIGRATIONS"]).unwrap();
    v.into_iter()
        .map(|job| {
            job.chunks(2)
                .map(|kv| {
                    let k: String = redis::from_redis_value(kv[0].clone()).unwrap();
                    let v: String = redis::from_redis_value(kv[1].clone()).unwrap_or_default();
                    (k, v)
                })
                .collect()
        })
        .collect()
}

/// Waits until `n` has more than `before` slot migration jobs and the newest is in `state`;
/// panics if it ends in another.
fn wait_job(n: &Server, before: usize, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let js = jobs(n);
        if js.len() > before {
            let s = js[0]["state"].as_str();
            if s == state {
                return;
            }
            assert!(
                !matches!(s, "success" | "failed" | "cancelled"),
                "slot migration ended {s} ({}), not {state}",
                js[0]["message"]
            );
        }
        assert!(
            Instant::now() < deadline,
            "no slot migration reached {state}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `CLUSTER MIGRATESLOTS SLOTSRANGE a b NODE <to>` on `from`, to its end.
fn migrate(c: &Cluster, from: usize, to: usize, (a, b): (u16, u16)) {
    let before = jobs(&c.nodes[from]).len();
    migrateslots(c, from, to, (a, b));
    wait_job(&c.nodes[from], before, "success");
    c.wait_settled();
    assert_eq!((c.owner(a), c.owner(b)), (to, to));
}

/// `CLUSTER MIGRATESLOTS SLOTSRANGE a b NODE <to>` sent to `from` (it replies at once; the
/// migration runs on as a job).
fn migrateslots(c: &Cluster, from: usize, to: usize, (a, b): (u16, u16)) {
    let (a, b) = (a.to_string(), b.to_string());
    let args = [
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        &a,
        &b,
        "NODE",
        &c.ids[to],
    ];
    c.nodes[from].ok(&args);
}

/// Starts `CLUSTER MIGRATESLOTS SLOTSRANGE a b NODE <to>` on `from`, held in its streaming
/// phase (the source may not pause: DEBUG SLOTMIGRATION PREVENT-PAUSE), and waits until the
/// snapshot is in and the slots' writes stream to the target. Returns how many migration jobs
/// the source and the target had before it.
fn start_held(c: &Cluster, from: usize, to: usize, (a, b): (u16, u16)) -> (usize, usize) {
    let (src, dst) = (&c.nodes[from], &c.nodes[to]);
    let before = (jobs(src).len(), jobs(dst).len());
    src.ok(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "1"]);
    migrateslots(c, from, to, (a, b));
    wait_job(dst, before.1, "waiting-for-paused");
    before
}

/// A migration held in its streaming phase for a while, then cancelled on the source: the target drops what it imported, the source keeps the slots.
fn migrate_and_cancel(c: &Cluster, from: usize, to: usize, (a, b): (u16, u16)) {
    let (src, dst) = (&c.nodes[from], &c.nodes[to]);
    let before = start_held(c, from, to, (a, b));
    std::thread::sleep(Duration::from_millis(700));
    // Valkey 9.1.2 takes no argument here (its CLUSTER HELP says "ALL")
    src.ok(&["CLUSTER", "CANCELSLOTMIGRATIONS"]);
    wait_job(src, before.0, "cancelled");
    wait_job(dst, before.1, "failed");
    src.ok(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "0"]);
    c.wait_settled();
    assert_eq!((c.owner(a), c.owner(b)), (from, from));
}

/// Every primary issues an ID for a slot that never moves, and every node hears every other
/// node's promise, so that each import adopts its source's promise (not, as before a source is
/// heard, every peer's largest).
fn hear_each_other(c: &Cluster) {
    let mut con = c.client();
    for s in [100, 6000, 12000] {
        let tag = &tags_in(s..s + 1, 1)[0];
        let _: String = redis::cmd("MSGID.GEN")
            .arg(1)
            .arg(format!("{{{tag}}}:conv"))
            .query(&mut con)
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while c
        .nodes
        .iter()
        .any(|n| n.imid_stat("cluster_peer_lease_ms") == 0)
    {
        assert!(Instant::now() < deadline, "no lease heard over the bus");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A sequence key in slot 0, the slot these tests move.
fn seq_key_in_slot_0() -> String {
    format!("{{{}}}:seq", tags_in(0..1, 1)[0])
}

/// [`start`], and a sequence key in slot 0, the slot the sequence tests move.
fn start_with_a_key() -> Option<(Cluster, String)> {
    Some((start()?, seq_key_in_slot_0()))
}

#[test]
fn atomic_migrations_back_and_forth_under_load_reissue_nothing() {
    let Some(cluster) = start() else { return };
    let a = cluster.owner(0);
    assert_eq!(a, cluster.owner(3));
    let b = (a + 1) % 3;
    // the importing primary's clock is a minute behind the others, all frozen
    cluster.freeze(|i| if i == b { T - 60_000 } else { T });
    hear_each_other(&cluster);
    let id_tags = tags_in(0..4, 2);
    let seq_tags = tags_in(SEQ_SLOTS.0..SEQ_SLOTS.1 + 1, 2);
    let loader = cluster.start_load(&id_tags, &seq_tags);
    let pause = || std::thread::sleep(Duration::from_millis(700));
    pause();
    // The key-less slots move first, each time: nothing but slot adoption raises the
    // importer's IDs for them (the floors at the head of a snapshot with sequence keys are
    // taken as read, so here too only adoption does).
    for (from, to) in [(a, b), (b, a), (a, b)] {
        migrate(&cluster, from, to, ID_SLOTS);
        pause();
        migrate(&cluster, from, to, SEQ_SLOTS);
        pause();
    }
    migrate_and_cancel(&cluster, b, a, (0, 3));
    pause();
    migrate(&cluster, b, a, (0, 3));
    pause();
    let got = loader.finish(&cluster, "7 atomic migrations and 1 cancelled");
    assert!(
        (0..4).all(|s| got.ids.get(&s).is_some_and(|v| v.len() > 10)),
        "every moving slot got IDs"
    );
    assert!(
        got.seqs.len() == seq_tags.len() && got.seqs.values().all(|v| v.len() > 10),
        "every sequence got values"
    );
    let (la, lb) = (cluster.nodes[a].log_text(), cluster.nodes[b].log_text());
    for (log, what) in [
        (&lb, "import started"),
        (&lb, "import completed"),
        (&la, "import completed"),
        (&la, "import aborted"),
    ] {
        assert!(
            log.contains(&format!("{what} for ")),
            "the importer logged no {what}"
        );
    }
    assert!(!la.contains("internal error") && !lb.contains("internal error"));
}

#[test]
fn id_time_stays_within_the_lease_of_the_clock_through_atomic_migrations() {
    // Real clocks (one host: no skew). Slots with sequence keys and key-less ones move back and
    // forth under load, each move within a second of the last: what a client sees of ID time.
    let Some(cluster) = start() else { return };
    let (a, b) = cluster.owner_and_next(0);
    let seq_tags = tags_in(SEQ_SLOTS.0..SEQ_SLOTS.1 + 1, 2);
    let tags = tags_in(0..4, 2);
    check_lead_through_moves(
        &cluster,
        &seq_tags,
        &tags,
        "atomic migrations under load",
        |settle| {
            for (from, to) in [(a, b), (b, a), (a, b), (b, a)] {
                migrate(&cluster, from, to, (0, 3));
                settle();
            }
        },
    );
}

#[test]
fn sequences_arrive_marked_and_the_stream_replays_them_exactly() {
    let Some((cluster, key)) = start_with_a_key() else {
        return;
    };
    let (a, b) = cluster.owner_and_next(0);
    let mut c = cluster.client();
    let next = |c: &mut redis::cluster::ClusterConnection, count: i64| {
        int_reply(c, &["SEQ.NEXT", &key, "COUNT", &count.to_string()])
    };
    assert_eq!(next(&mut c, 5), 5);
    let src = &cluster.nodes[a];
    // the snapshot (SEQ.SET key 5) is in; these go through the migration's stream
    let before = start_held(&cluster, a, b, (0, 0));
    let mut last = 0;
    for _ in 0..10 {
        last = next(&mut c, 1);
    }
    assert_eq!(last, 15);
    assert_eq!(next(&mut c, 100), 115);
    src.ok(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "0"]);
    wait_job(src, before.0, "success");
    cluster.wait_settled();
    assert_eq!(cluster.owner(0), b);
    // the stream's SEQ.NEXT calls were replayed, not issued again with the gap
    assert_eq!(
        int_reply(&mut cluster.nodes[b].client(), &["SEQ.GET", &key]),
        115,
        "the target holds exactly the source's value"
    );
    assert_eq!(cluster.nodes[b].imid_stat("seq_issued"), 0);
    // the key arrived marked: the new owner's first NEXT skips the gap, once
    assert_eq!(next(&mut c, 1), 1116);
    assert_eq!(next(&mut c, 1), 1117);
    assert_eq!(cluster.nodes[b].imid_stat("seq_gap_skips"), 1);
}

#[test]
fn idmp_tokens_move_with_the_slot_in_the_snapshot_and_the_stream() {
    let Some((cluster, key)) = start_with_a_key() else {
        return;
    };
    let (a, b) = cluster.owner_and_next(0);
    let mut c = cluster.client();
    let idmp = |c: &mut redis::cluster::ClusterConnection, token: &str| -> Vec<i64> {
        cmd(c, &["SEQ.NEXT", &key, "IDMP", token]).unwrap()
    };
    assert_eq!(idmp(&mut c, "in-snapshot"), [1, 0]);
    let src = &cluster.nodes[a];
    // the snapshot carries the first token; the second goes through the migration's stream
    let before = start_held(&cluster, a, b, (0, 0));
    assert_eq!(idmp(&mut c, "in-stream"), [2, 0]);
    assert_eq!(idmp(&mut c, "in-stream"), [2, 1]);
    src.ok(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "0"]);
    wait_job(src, before.0, "success");
    cluster.wait_settled();
    assert_eq!(cluster.owner(0), b);
    // retries reaching the new owner get the first answers
    assert_eq!(idmp(&mut c, "in-snapshot"), [1, 1]);
    assert_eq!(idmp(&mut c, "in-stream"), [2, 1]);
    // and a new token there skips the gap, as any first NEXT on a moved key does
    assert_eq!(idmp(&mut c, "after"), [1003, 0]);
}

#[test]
fn the_new_owner_issues_above_the_old_owners_ids_each_way() {
    // One key-less slot moved a -> b -> a -> b, no load: each new owner's first message ID and
    // UID for the slot lie above the old owner's last, although b's clock is a minute behind
    // and the snapshot carries nothing that would raise its time.
    let Some(cluster) = start() else { return };
    let (a, b) = cluster.owner_and_next(2);
    cluster.freeze(|i| if i == b { T - 60_000 } else { T });
    let tag = &tags_in(2..3, 1)[0];
    let target = format!("{{{tag}}}:conv");
    let mut ids: Vec<String> = Vec::new();
    let mut uids: Vec<i64> = Vec::new();
    let issue = |n: &Server, ids: &mut Vec<String>, uids: &mut Vec<i64>| {
        let mut con = n.client();
        let first_id: String = cmd(&mut con, &["MSGID.GEN", "1", &target]).unwrap();
        if let Some(prev) = ids.last() {
            assert!(first_id > *prev, "{first_id} after {prev}");
        }
        ids.push(first_id);
        ids.extend(
            (0..3000).map(|_| cmd::<String>(&mut con, &["MSGID.GEN", "1", &target]).unwrap()),
        );
        let first_uid = int_reply(&mut con, &["UID.GEN", &target]);
        if let Some(prev) = uids.last() {
            assert!(first_uid > *prev, "UID {first_uid} after {prev}");
        }
        uids.push(first_uid);
        uids.extend((0..1000).map(|_| int_reply(&mut con, &["UID.GEN", &target])));
    };
    // the next owner has heard a promise above the last ID issued (the current owner sends one
    // as its IDs approach the last, and once a second)
    let heard = |to: usize, last: &str| {
        let f: Vec<Value> = cmd(&mut cluster.nodes[to].client(), &["MSGID.DECODE", last]).unwrap();
        let time: i64 = redis::from_redis_value(f[1].clone()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while cluster.nodes[to].imid_stat("cluster_peer_lease_ms") <= time {
            assert!(Instant::now() < deadline, "no lease heard over the bus");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let s = (2, 2);
    issue(&cluster.nodes[a], &mut ids, &mut uids);
    heard(b, ids.last().unwrap());
    migrate(&cluster, a, b, s);
    issue(&cluster.nodes[b], &mut ids, &mut uids);
    heard(a, ids.last().unwrap());
    migrate(&cluster, b, a, s);
    issue(&cluster.nodes[a], &mut ids, &mut uids);
    heard(b, ids.last().unwrap());
    migrate(&cluster, a, b, s);
    issue(&cluster.nodes[b], &mut ids, &mut uids);
    // In order across owners, strictly: none issued twice.
    assert_increasing("message IDs", &ids);
    assert_increasing("UIDs", &uids);
}

#[test]
fn a_cluster_node_of_the_runs_server_loads_and_says_whether_it_follows_migrations() {
    // On `$REDIS_SERVER` (the matrix runs this on each server): Valkey 9 takes the declaration
    // and the event; a Valkey without them (8.0) refuses the subscription, which is logged at
    // notice level and does not fail the load. Redis is asked for its own event (its numbers
    // differ): Redis 8.4+ takes it, older ones refuse it, logged the same way.
    let n = Server::with(&NODE_ARGS);
    let mut con = n.client();
    let _: String = cmd(&mut con, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cmd::<String>(&mut con, &["CLUSTER", "INFO"])
        .unwrap()
        .contains("cluster_state:ok")
    {
        assert!(Instant::now() < deadline, "cluster did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let id: String = cmd(&mut con, &["MSGID.GEN", "1", "{c}:conv"]).unwrap();
    assert_eq!(hash_of(&id) >> 8, u32::from(slot("c")));
    let valkey = n.info_field("server", "valkey_version");
    let log = n.log_text();
    let refused = log.contains("imid: this Valkey has no atomic slot migration event");
    let undeclared = log.contains("imid: this Valkey has no atomic slot migration (Valkey 9.0+)");
    let redis_refused =
        log.contains("imid: this Redis has no atomic slot migration event (Redis 8.4+)");
    let version = |v: &str| -> (u32, u32) {
        let mut p = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
        (p.next().unwrap_or(0), p.next().unwrap_or(0))
    };
    match valkey.as_deref() {
        Some(v) if version(v) >= (9, 0) => {
            assert!(
                !refused && !undeclared && !redis_refused,
                "Valkey {v}: {log}"
            );
        }
        Some(v) => assert!(
            refused && undeclared && !redis_refused,
            "Valkey {v} logged: {log}"
        ),
        None => {
            let v = n.info_field("server", "redis_version").unwrap();
            assert!(!refused && !undeclared, "Redis {v}: {log}");
            assert_eq!(redis_refused, version(&v) < (8, 4), "Redis {v}: {log}");
        }
    }
}

#[test]
fn the_targets_replica_and_its_aof_reach_the_targets_state() {
    // b, the target, has a replica and an AOF: both get the import (Valkey propagates the
    // snapshot and the stream as b applied them), and the replica follows the import's events.
    let cluster = Cluster::start(
        Some(&newer_server!("valkey9")),
        &["--enable-debug-command", "yes", "--appendonly", "yes"],
        0..4,
    );
    let (a, b) = cluster.owner_and_next(0);
    let replica = start_node(Some(&newer_server!("valkey9")), &[]);
    let mut rc = replica.client();
    let port = cluster.nodes[b].port.to_string();
    let _: String = cmd(&mut rc, &["CLUSTER", "MEET", "127.0.0.1", &port]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while cmd::<String>(&mut rc, &["CLUSTER", "REPLICATE", &cluster.ids[b]]).is_err() {
        assert!(Instant::now() < deadline, "the replica never met b");
        std::thread::sleep(Duration::from_millis(100));
    }
    replica.wait_link_up();
    cluster.wait_settled();

    let key = seq_key_in_slot_0();
    let mut c = cluster.client();
    let next = |c: &mut redis::cluster::ClusterConnection| -> i64 {
        redis::cmd("SEQ.NEXT").arg(&key).query(c).unwrap()
    };
    let _: i64 = redis::cmd("SEQ.NEXT")
        .arg(&key)
        .arg("COUNT")
        .arg(5)
        .query(&mut c)
        .unwrap();
    let (src, dst) = (&cluster.nodes[a], &cluster.nodes[b]);
    let before = start_held(&cluster, a, b, (0, 0));
    let streamed: Vec<i64> = (0..20).map(|_| next(&mut c)).collect();
    assert_eq!(streamed.last(), Some(&25));
    src.ok(&["DEBUG", "SLOTMIGRATION", "PREVENT-PAUSE", "0"]);
    wait_job(src, before.0, "success");
    cluster.wait_settled();
    assert_eq!(next(&mut c), 1026, "the new owner skips the gap once");
    assert_eq!(next(&mut c), 1027);

    let mut bc = dst.client();
    let acked: i64 = cmd(&mut bc, &["WAIT", "1", "10000"]).unwrap();
    assert_eq!(acked, 1);
    let _: String = cmd(&mut rc, &["READONLY"]).unwrap();
    assert_eq!(
        int_reply(&mut rc, &["SEQ.GET", &key]),
        1027,
        "the replica has b's value"
    );
    let rlog = replica.log_text();
    assert!(
        rlog.contains("import started for") && rlog.contains("import completed for"),
        "the replica followed the import: {rlog}"
    );
    // b's AOF replays the import (CLUSTER SYNCSLOTS ESTABLISH ... FINISH, the snapshot, the
    // stream, the new owner's writes) to the same value
    dst.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(int_reply(&mut bc, &["SEQ.GET", &key]), 1027);
    assert!(!dst.log_text().contains("internal error"));
    assert!(!rlog.contains("internal error"));
}
