//! Never reissue through Redis 8.4+'s atomic slot migration (`CLUSTER MIGRATION IMPORT <start>
//! <end> ...`, sent to the target): the source sends the slots' keys (module values as
//! `RESTORE` payloads) and streams their writes, pauses its writers, and the target claims the
//! slots. No `CLUSTER SETSLOT` runs, so the importing primary learns of the move from Redis's
//! slot migration event, and the source's promise also travels inside the migration
//! (`MSGID.PROMISE`, before the snapshot and in the stream).
//!
//! Always on Redis 8.6.3 (`newer_server!("redis8.6")`), whatever `$REDIS_SERVER` is. Clocks are
//! the test build's (IMID.TEST-CLOCK), frozen at the same instant on two primaries and a minute
//! behind on the importing one, as in tests/it/atomic_migration.rs (Valkey's migration).
use crate::common;
use common::cluster::*;
use common::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Slots that hold sequence keys (and message ID / UID targets): their snapshot carries the
/// keys as `RESTORE` payloads.
const SEQ_SLOTS: (u16, u16) = (0, 1);
/// Frozen clock of the primaries that are not a minute behind.
const T: u64 = 1_800_000_000_000;

/// `None`: Redis 8.6.3 is missing and the run does not require it (the test skips).
fn start() -> Option<Cluster> {
    Some(Cluster::start(
        Some(&newer_server!("redis8.6")),
        // DEBUG ASM-FAILPOINT holds a migration in its streaming phase
        &["--enable-debug-command", "yes"],
        0..4,
    ))
}

/// A reply map as field -> text (RESP2 sends it as a flat array).
fn fields(v: Value) -> HashMap<String, String> {
    let pairs: Vec<(Value, Value)> = match v {
        Value::Map(m) => m,
        Value::Array(a) => a
            .chunks(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect(),
        other => panic!("not a map: {other:?}"),
    };
    pairs
        .into_iter()
        .map(|(k, v)| {
            let k: String = redis::from_redis_value(k).unwrap();
            let v = match v {
                Value::Int(i) => i.to_string(),
                v => redis::from_redis_value(v).unwrap_or_default(),
            };
            (k, v)
        })
        .collect()
}

/// `CLUSTER MIGRATION STATUS ID <id>` on `n`: the task's fields (empty if `n` has no such task).
fn status(n: &Server, id: &str) -> HashMap<String, String> {
    let v: Vec<Value> = cmd(
        &mut n.client(),
        &["CLUSTER", "MIGRATION", "STATUS", "ID", id],
    )
    .unwrap();
    v.into_iter().next().map(fields).unwrap_or_default()
}

/// `CLUSTER MIGRATION IMPORT a b [c d ...]` on node `to`: the task's ID.
fn import(c: &Cluster, to: usize, ranges: &[(u16, u16)]) -> String {
    let bounds: Vec<String> = ranges
        .iter()
        .flat_map(|(a, b)| [a.to_string(), b.to_string()])
        .collect();
    let mut args = vec!["CLUSTER", "MIGRATION", "IMPORT"];
    args.extend(bounds.iter().map(String::as_str));
    cmd(&mut c.nodes[to].client(), &args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Waits until task `id` on node `n` is in `state`; panics if it is cancelled first (a failed
/// import is retried by Redis every second, so `failed` is waited through).
fn wait_state(n: &Server, id: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = status(n, id);
        let now = s.get("state").map(String::as_str).unwrap_or("");
        if now == state {
            return;
        }
        assert!(
            now != "canceled" || state == "canceled",
            "task {id} was cancelled: {s:?}"
        );
        assert!(
            Instant::now() < deadline,
            "task {id} did not reach {state}: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The slots of `ranges` move from their owner to node `to` by one `CLUSTER MIGRATION IMPORT`,
/// to its end.
fn migrate(c: &Cluster, to: usize, ranges: &[(u16, u16)]) {
    let id = import(c, to, ranges);
    wait_state(&c.nodes[to], &id, "completed");
    c.wait_settled();
    for &(a, b) in ranges {
        assert_eq!((c.owner(a), c.owner(b)), (to, to));
    }
}

/// Starts the import of `ranges` by node `to` from node `from` held in its streaming phase (the
/// source does not enter the handoff: `DEBUG ASM-FAILPOINT migrate-main-channel handoff-prep`),
/// and waits until the snapshot is in and the slots' writes stream to the target. Returns the
/// task's ID; [`release`] lets it end.
fn start_held(c: &Cluster, from: usize, to: usize, ranges: &[(u16, u16)]) -> String {
    c.nodes[from].ok(&[
        "DEBUG",
        "ASM-FAILPOINT",
        "migrate-main-channel",
        "handoff-prep",
    ]);
    let id = import(c, to, ranges);
    wait_state(&c.nodes[to], &id, "wait-stream-eof");
    id
}

/// Clears the fail point of [`start_held`] on node `from`.
fn release(c: &Cluster, from: usize) {
    c.nodes[from].ok(&["DEBUG", "ASM-FAILPOINT", "", ""]);
}

/// A migration held in its streaming phase for a while, then cancelled on the target: the
/// target drops what it imported, the source keeps the slots.
fn migrate_and_cancel(c: &Cluster, from: usize, to: usize, ranges: &[(u16, u16)]) {
    let id = start_held(c, from, to, ranges);
    std::thread::sleep(Duration::from_millis(700));
    let n = int_reply(
        &mut c.nodes[to].client(),
        &["CLUSTER", "MIGRATION", "CANCEL", "ID", &id],
    );
    assert_eq!(n, 1, "one task cancelled");
    wait_state(&c.nodes[to], &id, "canceled");
    release(c, from);
    c.wait_settled();
    for &(a, b) in ranges {
        assert_eq!((c.owner(a), c.owner(b)), (from, from));
    }
}

/// Every primary issues an ID for a slot that never moves, and every node hears every other
/// node's promise (what an import would adopt, as `SETSLOT IMPORTING` does).
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
    wait_until("no lease heard over the bus", 10, || {
        c.nodes
            .iter()
            .all(|n| n.imid_stat("cluster_peer_lease_ms") > 0)
    });
}

/// A sequence key in slot 0, the slot these tests move.
fn seq_key_in_slot_0() -> String {
    format!("{{{}}}:seq", tags_in(0..1, 1)[0])
}

#[test]
fn the_new_owner_issues_above_the_old_owners_ids_each_way() {
    // One key-less slot moved a -> b -> a -> b, no load: each new owner's first message ID and
    // UID for the slot must lie above the old owner's last, although b's clock is a minute
    // behind and the snapshot carries nothing that would raise its time.
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
        let first_uid = int_reply(&mut con, &["UID.GEN", &target]);
        if let (Some(prev), Some(prev_uid)) = (ids.last(), uids.last()) {
            println!(
                "new owner's first message ID {first_id} (time {}) after the old owner's last {prev} \
                 (time {}); first UID {first_uid} (time {}) after {prev_uid} (time {})",
                msgid_time(&first_id),
                msgid_time(prev),
                uid_time(first_uid),
                uid_time(*prev_uid)
            );
            assert!(first_id > *prev, "{first_id} after {prev}");
            assert!(first_uid > *prev_uid, "UID {first_uid} after {prev_uid}");
        }
        ids.push(first_id);
        ids.extend(
            (0..3000).map(|_| cmd::<String>(&mut con, &["MSGID.GEN", "1", &target]).unwrap()),
        );
        uids.push(first_uid);
        uids.extend((0..1000).map(|_| int_reply(&mut con, &["UID.GEN", &target])));
    };
    // the next owner has heard a promise above the last ID issued (the current owner sends one
    // as its IDs approach the last, and once a second)
    let heard = |to: usize, last: &str| {
        let f: Vec<Value> = cmd(&mut cluster.nodes[to].client(), &["MSGID.DECODE", last]).unwrap();
        let time: i64 = redis::from_redis_value(f[1].clone()).unwrap();
        wait_until("no lease heard over the bus", 10, || {
            cluster.nodes[to].imid_stat("cluster_peer_lease_ms") > time
        });
    };
    let s = [(2, 2)];
    issue(&cluster.nodes[a], &mut ids, &mut uids);
    heard(b, ids.last().unwrap());
    migrate(&cluster, b, &s);
    issue(&cluster.nodes[b], &mut ids, &mut uids);
    heard(a, ids.last().unwrap());
    migrate(&cluster, a, &s);
    issue(&cluster.nodes[a], &mut ids, &mut uids);
    heard(b, ids.last().unwrap());
    migrate(&cluster, b, &s);
    issue(&cluster.nodes[b], &mut ids, &mut uids);
    // In order across owners, strictly: none issued twice.
    assert_increasing("message IDs", &ids);
    assert_increasing("UIDs", &uids);
}

#[test]
fn migrations_back_and_forth_under_load_reissue_nothing() {
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
    // Each import takes two ranges at once: a slot with sequence keys and a key-less one (for
    // which nothing but slot adoption raises the importer's IDs).
    for to in [b, a, b] {
        migrate(&cluster, to, &[(0, 0), (2, 2)]);
        pause();
        migrate(&cluster, to, &[(1, 1), (3, 3)]);
        pause();
    }
    migrate_and_cancel(&cluster, b, a, &[(0, 3)]);
    pause();
    migrate(&cluster, a, &[(0, 3)]);
    pause();
    let got = loader.finish(&cluster, "7 atomic migrations (Redis) and 1 cancelled");
    assert!(
        (0..4).all(|s| got.ids.get(&s).is_some_and(|v| v.len() > 10)),
        "every moving slot got IDs"
    );
    assert!(
        got.seqs.len() == seq_tags.len() && got.seqs.values().all(|v| v.len() > 10),
        "every sequence got values"
    );
    // the importers logged each import's phases, the sources their migrations
    let (la, lb) = (cluster.nodes[a].log_text(), cluster.nodes[b].log_text());
    let (ida, idb) = (&cluster.ids[a], &cluster.ids[b]);
    for (log, what) in [
        (
            &lb,
            format!("import started for 2 slot(s) (0-2), source {ida}"),
        ),
        (&lb, "import completed for 2 slot(s) (1-3)".to_owned()),
        (
            &la,
            format!("import started for 4 slot(s) (0-3), source {idb}"),
        ),
        (&la, "import aborted for 4 slot(s) (0-3)".to_owned()),
        (&la, "import completed for 4 slot(s) (0-3)".to_owned()),
        (
            &la,
            format!(
                "migration of 2 slot(s) (0-2) to {idb} started (this node's promise goes with it)"
            ),
        ),
        (
            &la,
            format!("migration of 2 slot(s) (1-3) to {idb} completed"),
        ),
        (&lb, format!("migration of 4 slot(s) (0-3) to {ida} failed")),
    ] {
        assert!(log.contains(&what), "no log line {what:?}");
    }
    for n in &cluster.nodes {
        assert!(!n.log_text().contains("internal error"));
        assert_eq!(n.imid_stat("cluster_slots_importing"), 0);
    }
}

#[test]
fn the_promise_travels_inside_the_migration_when_the_bus_loses_it() {
    // b, the importer, is deaf to the bus (IMID.TEST-DEAF): it hears no promise of a's but what
    // the migration carries. One key-less slot moved a -> b (a's promise at the fork, sent
    // before the snapshot), b -> a, then a -> b with a's promise renewed while the slot's
    // writes stream (a's clock moved 10 s on then, past its promise at the fork): each new
    // owner's first ID and UID for the slot above the old owner's last.
    let Some(cluster) = start() else { return };
    let (a, b) = cluster.owner_and_next(2);
    cluster.freeze(|i| if i == b { T - 60_000 } else { T });
    cluster.nodes[b].ok(&["IMID.TEST-DEAF", "1"]);
    let target = format!("{{{}}}:conv", tags_in(2..3, 1)[0]);
    let mut ids: Vec<String> = Vec::new();
    let mut uids: Vec<i64> = Vec::new();
    let issue = |n: &Server, ids: &mut Vec<String>, uids: &mut Vec<i64>, count: usize| {
        let mut con = n.client();
        for _ in 0..count {
            ids.push(cmd(&mut con, &["MSGID.GEN", "1", &target]).unwrap());
            uids.push(int_reply(&mut con, &["UID.GEN", &target]));
        }
    };
    let first_after = |ids: &[String], uids: &[i64], at: usize, what: &str| {
        println!(
            "{what}: new owner's first message ID {} (time {}) after the old owner's last {} \
             (time {}); first UID {} (time {}) after {} (time {})",
            ids[at],
            msgid_time(&ids[at]),
            ids[at - 1],
            msgid_time(&ids[at - 1]),
            uids[at],
            uid_time(uids[at]),
            uids[at - 1],
            uid_time(uids[at - 1])
        );
    };
    let s = [(2, 2)];
    issue(&cluster.nodes[a], &mut ids, &mut uids, 100);
    migrate(&cluster, b, &s);
    let at = ids.len();
    issue(&cluster.nodes[b], &mut ids, &mut uids, 100);
    first_after(&ids, &uids, at, "carried before the snapshot");
    assert!(
        cluster.nodes[b].imid_stat("cluster_peer_lease_ms") > 0,
        "b recorded a's carried promise"
    );
    migrate(&cluster, a, &s);
    issue(&cluster.nodes[a], &mut ids, &mut uids, 100);
    let id = start_held(&cluster, a, b, &s);
    // a still owns the slot while its writes stream: its IDs 10 s on renew its promise
    cluster.freeze_node(a, T + 10_000);
    issue(&cluster.nodes[a], &mut ids, &mut uids, 100);
    release(&cluster, a);
    wait_state(&cluster.nodes[b], &id, "completed");
    cluster.wait_settled();
    assert_eq!(cluster.owner(2), b);
    let at = ids.len();
    issue(&cluster.nodes[b], &mut ids, &mut uids, 100);
    first_after(&ids, &uids, at, "carried in the stream");
    assert_increasing("message IDs", &ids);
    assert_increasing("UIDs", &uids);
    assert_eq!(cluster.nodes[b].imid_stat("cluster_slots_importing"), 0);
}

#[test]
fn id_time_stays_within_the_lease_of_the_clock_through_migrations() {
    // Real clocks (one host: no skew). Slots with sequence keys and key-less ones move back and
    // forth under load, each move within a second of the last: what a client sees of ID time.
    let Some(cluster) = start() else { return };
    let (a, b) = cluster.owner_and_next(0);
    let seq_tags = tags_in(SEQ_SLOTS.0..SEQ_SLOTS.1 + 1, 2);
    let tags = tags_in(0..4, 2);
    let what = "atomic migrations (Redis) under load";
    check_lead_through_moves(&cluster, &seq_tags, &tags, what, |settle| {
        for to in [b, a, b, a] {
            migrate(&cluster, to, &[(0, 3)]);
            settle();
        }
    });
}

#[test]
fn sequences_arrive_marked_and_the_stream_replays_them_exactly() {
    let Some(cluster) = start() else { return };
    let key = seq_key_in_slot_0();
    let (a, b) = cluster.owner_and_next(0);
    let mut c = cluster.client();
    let next = |c: &mut redis::cluster::ClusterConnection, count: i64| {
        int_reply(c, &["SEQ.NEXT", &key, "COUNT", &count.to_string()])
    };
    assert_eq!(next(&mut c, 5), 5);
    // the snapshot (RESTORE of the key at 5) is in; these go through the migration's stream
    let id = start_held(&cluster, a, b, &[(0, 0)]);
    let mut last = 0;
    for _ in 0..10 {
        last = next(&mut c, 1);
    }
    assert_eq!(last, 15);
    assert_eq!(next(&mut c, 100), 115);
    release(&cluster, a);
    wait_state(&cluster.nodes[b], &id, "completed");
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
fn maps_and_idmp_tokens_move_with_the_slot_in_the_snapshot_and_the_stream() {
    let Some(cluster) = start() else { return };
    let key = seq_key_in_slot_0();
    let map = format!("{{{}}}:map", tags_in(0..1, 1)[0]);
    let (a, b) = cluster.owner_and_next(0);
    let mut c = cluster.client();
    // b decided IDMP calls of its own an hour ago, by an IDMP clock that old; then the clocks
    // meet: a token streamed from a must still count on b for its TTL (300 s) from a's clock
    cluster.freeze(|i| if i == b { T - 3_600_000 } else { T });
    let own = format!("{{{}}}:seq", tags_in(6000..6001, 1)[0]);
    assert_eq!(cluster.owner(6000), b);
    let r: Vec<i64> = cmd(&mut c, &["SEQ.NEXT", &own, "IDMP", "old"]).unwrap();
    assert_eq!(r, [1, 0]);
    cluster.freeze_node(b, T);
    let idmp = |c: &mut redis::cluster::ClusterConnection, token: &str| -> Vec<i64> {
        cmd(c, &["SEQ.NEXT", &key, "IDMP", token]).unwrap()
    };
    let hidmp = |c: &mut redis::cluster::ClusterConnection, token: &str| -> Vec<i64> {
        cmd(c, &["SEQ.HNEXT", &map, "g", "IDMP", token]).unwrap()
    };
    assert_eq!(idmp(&mut c, "in-snapshot"), [1, 0]);
    assert_eq!(
        int_reply(&mut c, &["SEQ.HNEXT", &map, "f", "COUNT", "50"]),
        50
    );
    // the snapshot carries the first token and the map; the rest goes through the stream
    let id = start_held(&cluster, a, b, &[(0, 0)]);
    assert_eq!(idmp(&mut c, "in-stream"), [2, 0]);
    assert_eq!(idmp(&mut c, "in-stream"), [2, 1]);
    assert_eq!(int_reply(&mut c, &["SEQ.HNEXT", &map, "f"]), 51);
    assert_eq!(hidmp(&mut c, "map-in-stream"), [1, 0]);
    release(&cluster, a);
    wait_state(&cluster.nodes[b], &id, "completed");
    cluster.wait_settled();
    assert_eq!(cluster.owner(0), b);
    // retries reaching the new owner get the first answers
    assert_eq!(idmp(&mut c, "in-snapshot"), [1, 1]);
    assert_eq!(idmp(&mut c, "in-stream"), [2, 1]);
    assert_eq!(hidmp(&mut c, "map-in-stream"), [1, 1]);
    assert!(
        !cluster.nodes[b]
            .log_text()
            .contains("replayed before any SEQ.IDMPCLOCK"),
        "b replayed an IDMP call without the source's clock"
    );
    // and a new token there skips the gap, as any first NEXT on a moved key does
    assert_eq!(idmp(&mut c, "after"), [1003, 0]);
    // the map's field too, once
    assert_eq!(
        int_reply(&mut cluster.nodes[b].client(), &["SEQ.HGET", &map, "f"]),
        51
    );
    assert_eq!(int_reply(&mut c, &["SEQ.HNEXT", &map, "f"]), 1052);
    assert_eq!(int_reply(&mut c, &["SEQ.HNEXT", &map, "f"]), 1053);
}

#[test]
fn the_targets_replica_and_its_aof_reach_the_targets_state() {
    // b, the target, has a replica and an AOF: both get the import (Redis proxies the snapshot
    // and the stream to b's replica as b applies them; b's AOF gets what b applied).
    let Some(mut cluster) = start() else { return };
    let (a, b) = cluster.owner_and_next(0);
    cluster.nodes[b].ok(&["CONFIG", "SET", "appendonly", "yes"]);
    let r = cluster.add_replica(b, &["--enable-debug-command", "yes"]);
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
    // a has a promise to carry: it issued an ID
    let _: String = redis::cmd("MSGID.GEN")
        .arg(1)
        .arg(format!("{{{}}}:conv", tags_in(0..1, 1)[0]))
        .query(&mut c)
        .unwrap();
    let id = start_held(&cluster, a, b, &[(0, 0)]);
    let streamed: Vec<i64> = (0..20).map(|_| next(&mut c)).collect();
    assert_eq!(streamed.last(), Some(&25));
    // an IDMP call streams too, and a map's
    let map = format!("{{{}}}:map", tags_in(0..1, 1)[0]);
    let got: Vec<i64> = cmd(&mut c, &["SEQ.NEXT", &key, "IDMP", "t"]).unwrap();
    assert_eq!(got, [26, 0]);
    let got: Vec<i64> = cmd(&mut c, &["SEQ.HNEXT", &map, "f", "IDMP", "t"]).unwrap();
    assert_eq!(got, [1, 0]);
    release(&cluster, a);
    wait_state(&cluster.nodes[b], &id, "completed");
    cluster.wait_settled();
    assert_eq!(
        int_reply(&mut cluster.nodes[b].client(), &["SEQ.GET", &key]),
        26,
        "the stream was replayed exactly"
    );
    assert_eq!(next(&mut c), 1027, "the new owner skips the gap once");
    assert_eq!(next(&mut c), 1028);

    let (dst, replica) = (&cluster.nodes[b], &cluster.nodes[r]);
    let mut bc = dst.client();
    let acked: i64 = cmd(&mut bc, &["WAIT", "1", "10000"]).unwrap();
    assert_eq!(acked, 1);
    let mut rc = replica.client();
    let _: String = cmd(&mut rc, &["READONLY"]).unwrap();
    assert_eq!(
        int_reply(&mut rc, &["SEQ.GET", &key]),
        1028,
        "the replica has b's value"
    );
    // tokens and all (DEBUG DIGEST-VALUE covers them)
    let digests = |con: &mut Connection| -> Vec<String> {
        [&key, &map]
            .iter()
            .map(|k| cmd::<Vec<String>>(con, &["DEBUG", "DIGEST-VALUE", k]).unwrap()[0].clone())
            .collect()
    };
    let on_b = digests(&mut bc);
    assert_eq!(digests(&mut rc), on_b, "the replica's keys are b's");
    // b's AOF replays the import (the snapshot's RESTORE, the stream, the new owner's writes)
    // to the same value
    wait_until("AOF rewrite still running", 30, || {
        dst.info_field("persistence", "aof_rewrite_in_progress")
            .as_deref()
            == Some("0")
    });
    dst.ok(&["DEBUG", "LOADAOF"]);
    assert_eq!(int_reply(&mut bc, &["SEQ.GET", &key]), 1028);
    assert_eq!(digests(&mut bc), on_b, "b's AOF replays to b's keys");
    // the replica followed the import (Redis fires the import's events on the target's
    // replicas too) and adopted the source's promise with it: carried inside the migration
    // (MSGID.PROMISE reached it in b's stream as b applied it)
    let rlog = replica.log_text();
    for what in [
        "import started for 1 slot(s) (0-0)",
        "import completed for 1 slot(s) (0-0)",
    ] {
        assert!(
            rlog.contains(what),
            "the replica logged no {what:?}: {rlog}"
        );
    }
    assert!(replica.imid_stat("cluster_slot_adoptions") >= 1);
    assert_eq!(replica.imid_stat("cluster_slots_importing"), 0);
    assert!(
        replica.calls("msgid.promise") >= 1,
        "the replica got the carried promise"
    );
    assert!(!dst.log_text().contains("internal error"));
    assert!(!rlog.contains("internal error"));
}

/// Every `INFO imid` field of `n` but the largest promise heard from peers (which the peers
/// move), by name.
fn imid_info(n: &Server) -> Vec<(String, String)> {
    let info: String = cmd(&mut n.client(), &["INFO", "imid"]).unwrap();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.starts_with("imid_") && *k != "imid_cluster_peer_lease_ms")
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

#[test]
fn trimming_the_moved_keys_leaves_the_sources_marks_info_and_keyspace_events_alone() {
    // After a migration Redis deletes the moved keys on the source: by default in a background
    // thread (the whole slots' dictionaries at once: the type's free callback runs there), or
    // key by key on the main thread ("active", here by DEBUG ASM-TRIM-METHOD). Sequences with
    // IDMP tokens and maps (values the free callback releases) in slot 0 go the first way, in
    // slot 1 the second. The source's marks and INFO imid stay as they were, imid publishes
    // no keyspace event for the trimmed keys, and the keys live on at the target.
    let Some(cluster) = start() else { return };
    let (a, b) = cluster.owner_and_next(0);
    assert_eq!(cluster.owner(1), a);
    let src = &cluster.nodes[a];
    let mut c = cluster.client();
    const KEYS: usize = 200;
    for s in 0..2 {
        let tag = &tags_in(s..s + 1, 1)[0];
        for i in 0..KEYS {
            let seq = format!("{{{tag}}}:seq:{i}");
            let map = format!("{{{tag}}}:map:{i}");
            let r: Vec<i64> = cmd(&mut c, &["SEQ.NEXT", &seq, "IDMP", &format!("t{i}")]).unwrap();
            assert_eq!(r, [1, 0]);
            for f in ["f1", "f2", "f3"] {
                assert_eq!(int_reply(&mut c, &["SEQ.HNEXT", &map, f]), 1);
            }
        }
    }
    // the source's marks: IDs for a slot that stays
    let stays = format!("{{{}}}:conv", tags_in(100..101, 1)[0]);
    assert_eq!(cluster.owner(100), a);
    let last: String = cmd(&mut src.client(), &["MSGID.GEN", "1", &stays]).unwrap();
    let last_uid = int_reply(&mut src.client(), &["UID.GEN", &stays]);
    let before = imid_info(src);
    src.ok(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut sub = src.client();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__key*__:*").unwrap();
    let lazyfreed = |n: &Server| -> i64 {
        n.info_field("memory", "lazyfreed_objects")
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    let gone = |slot: u16| {
        src.wait_until("the moved keys trimmed", 30, || {
            int_reply(
                &mut src.client(),
                &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
            ) == 0
                && src
                    .info_field("memory", "lazyfree_pending_objects")
                    .as_deref()
                    == Some("0")
        });
    };
    let freed_before = lazyfreed(src);
    migrate(&cluster, b, &[(0, 0)]);
    gone(0);
    assert!(
        src.log_text().contains(&format!(
            "Background trim started for slots: 0-0 to trim {} keys",
            2 * KEYS
        )),
        "trimmed in the background"
    );
    assert!(
        lazyfreed(src) >= freed_before + 2 * KEYS as i64,
        "the values were freed by the background thread"
    );
    src.ok(&["DEBUG", "ASM-TRIM-METHOD", "active"]);
    migrate(&cluster, b, &[(1, 1)]);
    gone(1);
    let done = format!(
        "Active trim completed for slots: 1-1, {} keys trimmed",
        2 * KEYS
    );
    src.wait_until("the active trim completed", 30, || {
        src.log_text().contains(&done)
    });
    // no keyspace event on the source: imid's, or any other
    ps.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    if let Ok(msg) = ps.get_message() {
        panic!(
            "a keyspace event on the source: {} {:?}",
            msg.get_channel_name(),
            msg.get_payload::<String>()
        );
    }
    assert_eq!(imid_info(src), before, "INFO imid of the source");
    // its marks hold: the next IDs for the slot that stayed are above the last
    let next: String = cmd(&mut src.client(), &["MSGID.GEN", "1", &stays]).unwrap();
    assert!(next > last, "{next} after {last}");
    assert!(int_reply(&mut src.client(), &["UID.GEN", &stays]) > last_uid);
    // the keys live at the target, tokens and fields too (and skip the gap there, once)
    for s in 0..2 {
        let tag = &tags_in(s..s + 1, 1)[0];
        let seq = format!("{{{tag}}}:seq:7");
        let r: Vec<i64> = cmd(&mut c, &["SEQ.NEXT", &seq, "IDMP", "t7"]).unwrap();
        assert_eq!(r, [1, 1], "the token's retry at the new owner");
        let map = format!("{{{tag}}}:map:7");
        assert_eq!(int_reply(&mut c, &["SEQ.HGET", &map, "f3"]), 1);
    }
    assert_eq!(cluster.owner(0), b);
    let log = src.log_text();
    assert!(!log.contains("internal error"), "{log}");
}
