//! Real data loss, made on purpose: the server restarts from an older RDB snapshot than the
//! values and IDs its clients already received (as after a host crash, or a restore from
//! backup). With the gap and the ID floor nothing is handed out twice; without the gap the same
//! scenario reissues, which shows the test can tell the difference.
use crate::common;
use common::*;

/// Issues `n` NEXT on each key and `n` IDs; returns the last value per key and the last ID.
fn issue(con: &mut Connection, keys: &[&str], n: usize) -> (Vec<i64>, String) {
    let mut last = vec![0; keys.len()];
    let mut id = String::new();
    for _ in 0..n {
        for (i, k) in keys.iter().enumerate() {
            last[i] = int_reply(con, &["SEQ.NEXT", k]);
            id = cmd(con, &["MSGID.GEN", "1", k]).unwrap();
        }
    }
    (last, id)
}

/// Snapshot after `before` rounds, `after` more rounds received by clients, then kill -9 and a
/// restart from the snapshot with the node's clock a minute behind. Returns what was received
/// and what the restarted node hands out first.
fn restart_from_old_snapshot(
    gap: &str,
    before: usize,
    after: usize,
) -> (Vec<i64>, String, Vec<i64>, String) {
    let keys = ["{a}:seq", "{b}:seq", "{c}:seq"];
    let mut s = Server::build()
        .hooked()
        .args(&["--imid.seq-gap", gap])
        .start();
    let mut con = s.client();
    issue(&mut con, &keys, before);
    let _: String = cmd(&mut con, &["SAVE"]).unwrap();
    let snapshot = std::fs::read(s.dir.join("dump.rdb")).unwrap();
    let (received, last_id) = issue(&mut con, &keys, after);
    s.kill();
    std::fs::write(s.dir.join("dump.rdb"), snapshot).unwrap();
    s.restart();
    let mut con = s.client();
    let _: String = cmd(&mut con, &["IMID.TEST-CLOCK", "OFFSET", "-60000"]).unwrap();
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", keys[0]]),
        before as i64,
        "the snapshot's value came back"
    );
    let (first, first_id) = issue(&mut con, &keys, 1);
    (received, last_id, first, first_id)
}

#[test]
fn a_restart_from_an_older_snapshot_reissues_nothing() {
    let (received, last_id, first, first_id) = restart_from_old_snapshot("1000", 100, 500);
    for (r, f) in received.iter().zip(&first) {
        assert_eq!(*r, 600);
        assert_eq!(*f, 100 + 1000 + 1, "resumed from the snapshot plus the gap");
        assert!(f > r, "value {f} handed out again after {r} was received");
    }
    assert!(
        first_id > last_id,
        "ID {first_id} not above {last_id}, issued before the restart"
    );
}

#[test]
fn without_the_gap_the_same_loss_reissues_values() {
    let (received, _, first, _) = restart_from_old_snapshot("0", 100, 500);
    for (r, f) in received.iter().zip(&first) {
        assert_eq!(
            *f, 101,
            "with imid.seq-gap 0 the sequence resumes at the snapshot"
        );
        assert!(f <= r, "the control scenario must reissue: {f} vs {r}");
    }
}

#[test]
fn a_loss_larger_than_the_gap_is_not_covered() {
    // The documented limit: fewer than imid.seq-gap values per key may be lost.
    let (received, _, first, _) = restart_from_old_snapshot("100", 10, 200);
    assert_eq!(first[0], 10 + 100 + 1);
    assert!(
        first[0] <= received[0],
        "a loss of 200 values is beyond a gap of 100"
    );
}

/// A conversation created after the snapshot is lost whole: the restarted node has no key for
/// it. Its first SEQ.NEXT must still start above the gap, or it hands out 1, 2, ... again.
#[test]
fn a_sequence_lost_whole_restarts_above_the_gap() {
    let mut s = Server::with(&["--imid.seq-gap", "1000"]);
    let mut con = s.client();
    // A node that started empty starts new sequences at 1.
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{old}:seq"]), 1);
    assert_eq!(s.imid_stat("seq_missing_keys_skip_gap"), 0);
    let _: String = cmd(&mut con, &["SAVE"]).unwrap();
    let snapshot = std::fs::read(s.dir.join("dump.rdb")).unwrap();
    let received: Vec<i64> = (0..5)
        .map(|_| int_reply(&mut con, &["SEQ.NEXT", "{new}:seq"]))
        .collect();
    assert_eq!(received, [1, 2, 3, 4, 5]);
    s.kill();
    std::fs::write(s.dir.join("dump.rdb"), snapshot).unwrap();
    s.restart();
    let mut con = s.client();
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", "{new}:seq"]),
        0,
        "the key was lost"
    );
    assert_eq!(s.imid_stat("seq_missing_keys_skip_gap"), 1);
    // Lost or new, a missing key on a node that loaded its data starts above the gap, once.
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{new}:seq"]), 1001);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{new}:seq"]), 1002);
    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "{brand-new}:seq", "COUNT", "10"]),
        1010
    );
    // SEQ.ADVANCE on a missing key keeps the mark, as on a loaded key (a read cursor says
    // nothing about lost values); SEQ.SET by a client is an explicit value and clears it.
    assert_eq!(
        int_reply(&mut con, &["SEQ.ADVANCE", "{cursor}:seq", "3"]),
        3
    );
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{cursor}:seq"]), 1004);
    let _: () = cmd(&mut con, &["SEQ.SET", "{set}:seq", "7"]).unwrap();
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{set}:seq"]), 8);
    // The loaded key skips as before.
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{old}:seq"]), 1002);
    assert_eq!(s.imid_stat("seq_gap_skips"), 4);
}

/// The same on a promoted replica: a key created on the primary that had not reached the
/// replica when the primary died starts above the gap on the new primary.
#[test]
fn a_sequence_that_never_reached_the_replica_restarts_above_the_gap() {
    let mut primary = Server::start();
    let replica = primary.replica(&[]);
    replica.wait_link_up();
    let mut con = primary.client();
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{synced}:seq"]), 1);
    primary.wait_replica(&replica);
    // Cut the replica off (as a dead link would), then create a key on the primary only.
    let mut rcon = replica.client();
    let _: String = cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{unsynced}:seq"]), 1);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{unsynced}:seq"]), 2);
    primary.kill();
    assert_eq!(int_reply(&mut rcon, &["SEQ.GET", "{unsynced}:seq"]), 0);
    assert_eq!(int_reply(&mut rcon, &["SEQ.NEXT", "{unsynced}:seq"]), 1001);
    assert_eq!(int_reply(&mut rcon, &["SEQ.NEXT", "{synced}:seq"]), 1002);
}

/// A replica promoted before it ever completed a sync has loaded nothing, yet every key of its
/// old primary is missing on it: the role change alone marks it.
#[test]
fn a_replica_promoted_before_its_first_sync_starts_sequences_above_the_gap() {
    let s = Server::start();
    let mut con = s.client();
    assert_eq!(s.imid_stat("seq_missing_keys_skip_gap"), 0);
    // A primary that is not there: the link never comes up, nothing is loaded.
    let dead = free_port().to_string();
    let _: String = cmd(&mut con, &["REPLICAOF", "127.0.0.1", &dead]).unwrap();
    let _: String = cmd(&mut con, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(s.imid_stat("seq_missing_keys_skip_gap"), 1);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{c}:seq"]), 1001);
}
