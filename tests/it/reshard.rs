//! Never reissue through resharding: hash slots move between primaries, by
//! `redis-cli --cluster reshard` and by hand (CLUSTER SETSLOT + MIGRATE), while a client keeps
//! issuing message IDs and sequence values for targets in those slots.
//!
//! The clocks are the test build's (IMID.TEST-CLOCK): frozen at the same instant on two primaries
//! and a minute behind on the importing one, so without slot adoption (src/node/cluster.rs) the
//! new owner would issue IDs for a slot below, and equal to, IDs the old owner issued for it.
use crate::common;
use common::cluster::*;
use common::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slots that move: the lowest of the first primary's range, so that `redis-cli --cluster
/// reshard --cluster-slots N` moves exactly these (it takes a source's slots in order).
const MOVING: u16 = 4;

/// Three primaries, no replicas, with the test-hooks module and `extra` server arguments
/// (whose clock is the system clock until a test steers it); node 0 owns slot 0.
fn start_with(extra: &[&str]) -> Cluster {
    Cluster::start(None, extra, 0..MOVING)
}

fn start() -> Cluster {
    start_with(&[])
}

/// Conversation tags whose slot is one of the moving slots, two per slot.
fn tags() -> Vec<String> {
    tags_in(0..MOVING, 2)
}

#[test]
fn moving_slots_under_load_reissue_no_id_and_no_sequence_value() {
    let cluster = start();
    assert_eq!(cluster.owner(0), cluster.owner(MOVING - 1));
    let (a, b) = cluster.owner_and_next(0);
    let t = 1_800_000_000_000u64;
    // the importing primary's clock is a minute behind the others, all frozen
    cluster.freeze(|i| if i == b { t - 60_000 } else { t });
    let tags = tags();
    let loader = cluster.start_load(&tags, &tags);
    let pause = || std::thread::sleep(Duration::from_millis(700));
    cluster.reshard_and_back(a, b, MOVING, pause);
    for s in 0..MOVING {
        cluster.migrate_by_hand(s, a, b);
    }
    pause();
    // b's lowest slots are now the moving ones: reshard moves them back
    cluster.reshard(b, a, MOVING);
    assert_eq!(cluster.owner(MOVING - 1), a);
    pause();
    let got = loader.finish(&cluster, &format!("4 moves of {MOVING} slots"));
    assert!(
        got.ids.values().all(|v| v.len() > 10),
        "every moving slot got IDs"
    );
}

#[test]
fn a_migrated_sequence_arrives_marked_and_skips_the_gap() {
    let cluster = start();
    let (a, b) = cluster.owner_and_next(0);
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
    let cluster = start();
    let (a, b) = cluster.owner_and_next(0);
    let t = 1_800_000_000_000u64;
    cluster.freeze(|i| if i == b { t - 60_000 } else { t });
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

#[test]
fn id_time_stays_within_the_lease_of_the_clock_through_restarts_moves_and_failovers() {
    // Real clocks (one host: no skew between the nodes), AOF on, one replica for a failover.
    let aof = AOF_EVERYSEC;
    let mut cluster = start_with(&aof);
    let replica = cluster.add_replica(0, &aof);
    let mut c = cluster.client();
    let pause = Duration::from_millis(3);
    let mut all = Leads::default();
    let check = |phase: &str, got: Leads, bound: i64, all: &mut Leads| {
        got.check(phase, bound);
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
    let (a, b) = cluster.owner_and_next(0);
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
    let node = &cluster.nodes[replica];
    wait_until("the failover did not happen", 60, || {
        node.info_field("replication", "role").as_deref() == Some("master")
    });
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
    let mut cluster = start();
    let (a, b) = cluster.owner_and_next(0);
    let t = 1_800_000_000_000u64;
    cluster.freeze(|i| if i == b { t - 60_000 } else { t });
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
    cluster.freeze_node(b, t - 60_000);
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

#[test]
fn a_peer_promise_a_day_ahead_is_refused_counted_and_logged() {
    // A node whose clock runs a day ahead issues IDs a day ahead and promises them to its
    // peers; they refuse it (more than 300 s ahead of their clocks), so their own IDs stay at
    // their clocks, and say so.
    let cluster = start();
    let (a, b) = cluster.owner_and_next(0);
    let day = 86_400_000u64;
    let _: String = cmd(
        &mut cluster.nodes[a].client(),
        &["IMID.TEST-CLOCK", "OFFSET", &day.to_string()],
    )
    .unwrap();
    let target = format!("{{{}}}:conv", tags()[0]);
    let id: String = cmd(&mut cluster.nodes[a].client(), &["MSGID.GEN", "1", &target]).unwrap();
    assert!(
        msgid_time(&id) > wall_ms() + day - 60_000,
        "a's clock is a day ahead"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.nodes[b].imid_stat("cluster_leases_refused") == 0 {
        assert!(Instant::now() < deadline, "b did not refuse a's promise");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        cluster.nodes[b]
            .log_text()
            .contains("refused a message-ID time lease"),
        "the refusal is logged"
    );
    assert!(
        (cluster.nodes[b].imid_stat("cluster_peer_lease_ms") as u64) < wall_ms() + 300_000,
        "nothing of it was recorded"
    );
    // b's own IDs stay at its clock.
    let mut c = cluster.client();
    let got = issue_measuring(&mut c, 200, &[], Duration::from_millis(1), None);
    let b_lead = got
        .ids
        .iter()
        .filter(|i| cluster.owner((hash_of(i) >> 8) as u16) == b)
        .map(|i| msgid_time(i) as i64 - wall_ms() as i64)
        .max()
        .unwrap();
    assert!(
        b_lead <= PROMISE_MS,
        "b's IDs lead its clock by {b_lead} ms"
    );
}
