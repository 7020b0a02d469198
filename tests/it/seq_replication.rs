//! Sequences on a primary and its replica: writes replicate as called where replay is exact and
//! as explicit values where it is not (a gap skip), scripts, functions and transactions give the
//! same final state on replicas and after AOF replay, writes are refused on the replica, and a
//! promoted replica skips the gap before issuing.
use crate::common;
use common::*;

#[test]
fn replica_ends_with_the_primarys_values() {
    let primary = Server::start();
    let mut p = primary.client();
    // written before the replica attaches: travels in the full-sync RDB
    for i in 0..10 {
        int_reply(&mut p, &["SEQ.NEXT", &format!("k{i}"), "COUNT", "3"]);
    }
    let replica = primary.replica(&[]);
    // and after: travels as SEQ.SET in the stream
    for i in 0..200 {
        let k = format!("k{}", i % 13);
        match i % 5 {
            0 => {
                int_reply(&mut p, &["SEQ.NEXT", &k, "COUNT", "7"]);
            }
            1 => {
                int_reply(&mut p, &["SEQ.ADVANCE", &k, &(i * 3).to_string()]);
            }
            2 => {
                let _: String = cmd(&mut p, &["SEQ.SET", &k, &(i * 2).to_string()]).unwrap();
            }
            _ => {
                int_reply(&mut p, &["SEQ.NEXT", &k]);
            }
        }
    }
    let e = cmd::<i64>(&mut p, &["SEQ.NEXT", "k0", "COUNT", "0"]).unwrap_err();
    assert!(err_text(&e).starts_with("ERR"));
    primary.wait_replica(&replica);
    let keys: Vec<String> = (0..13).map(|i| format!("k{i}")).collect();
    let mut r = replica.client();
    assert_eq!(mget(&mut r, &keys), mget(&mut p, &keys));
    assert_eq!(digest(&primary), digest(&replica));
    // the replica never ran NEXT itself: nothing issued, nothing skipped there
    assert_eq!(replica.imid_stat("seq_issued"), 0);
}

/// How many times `name` ran on `s` (from INFO commandstats).
fn calls(s: &Server, name: &str) -> i64 {
    s.calls(name)
}

#[test]
fn writes_replicate_as_called_a_gap_skip_as_its_value_and_no_ops_not_at_all() {
    let primary = Server::start();
    let replica = primary.replica(&[]);
    let mut p = primary.client();
    int_reply(&mut p, &["SEQ.ADVANCE", "k", "10"]);
    int_reply(&mut p, &["SEQ.NEXT", "k", "COUNT", "5"]);
    int_reply(&mut p, &["SEQ.NEXT", "k"]);
    let _: String = cmd(&mut p, &["SEQ.SET", "j", "7"]).unwrap();
    primary.wait_replica(&replica);
    // replay is exact for all of these: the replica ran them as called
    assert_eq!(calls(&replica, "seq.advance"), 1);
    assert_eq!(calls(&replica, "seq.next"), 2);
    assert_eq!(calls(&replica, "seq.set"), 1);
    // a replica only replays: it hands out nothing and skips no gap of its own, although
    // every key it holds is marked
    assert_eq!(replica.imid_stat("seq_issued"), 0);
    assert_eq!(replica.imid_stat("seq_gap_skips"), 0);
    assert_eq!(int_reply(&mut replica.client(), &["SEQ.GET", "k"]), 16);

    // After a reload the primary's keys are marked: its next SEQ.NEXT skips the gap, which a
    // replay could not reproduce, so the replica receives the value instead.
    let _: String = cmd(&mut p, &["DEBUG", "RELOAD"]).unwrap();
    assert_eq!(int_reply(&mut p, &["SEQ.NEXT", "k", "COUNT", "2"]), 1018);
    // a missing key on a node that inherited its data skips the gap too
    assert_eq!(int_reply(&mut p, &["SEQ.NEXT", "fresh"]), 1001);
    primary.wait_replica(&replica);
    assert_eq!(calls(&replica, "seq.next"), 2);
    assert_eq!(calls(&replica, "seq.set"), 3);
    assert_eq!(int_reply(&mut replica.client(), &["SEQ.GET", "k"]), 1018);
    assert_eq!(
        int_reply(&mut replica.client(), &["SEQ.GET", "fresh"]),
        1001
    );

    int_reply(&mut p, &["SEQ.ADVANCE", "k", "3"]);
    int_reply(&mut p, &["SEQ.ADVANCE", "k", "1018"]);
    int_reply(&mut p, &["SEQ.ADVANCE", "missing", "0"]);
    // j is marked since the reload: a client's SET clears the mark (a write), the same SET
    // again changes nothing
    let _: String = cmd(&mut p, &["SEQ.SET", "j", "7"]).unwrap();
    let _: String = cmd(&mut p, &["SEQ.SET", "j", "7"]).unwrap();
    let _ = cmd::<i64>(&mut p, &["SEQ.NEXT", "k", "COUNT", "0"]);
    let _ = cmd::<i64>(&mut p, &["SEQ.NEXT", "k", "BOGUS"]);
    // one real write after the no-ops, so the sync below covers them all
    let _: String = cmd(&mut p, &["SEQ.SET", "other", "1"]).unwrap();
    primary.wait_replica(&replica);
    assert_eq!(calls(&replica, "seq.set"), 5);
    assert_eq!(calls(&replica, "seq.advance"), 1);
    assert_eq!(calls(&replica, "seq.next"), 2);
    assert_eq!(int_reply(&mut replica.client(), &["EXISTS", "missing"]), 0);
    assert_eq!(digest(&primary), digest(&replica));
}

/// Every way a sequence write reaches a primary (plain, COUNT, SET, ADVANCE, MULTI, EVAL, FCALL),
/// before and after gap skips, run on a primary with AOF and a replica.
fn mixed_writes(p: &mut Connection, round: usize) {
    let script = "return redis.call('SEQ.NEXT', KEYS[1], 'COUNT', ARGV[1])";
    for i in 0..40usize {
        let k = format!("{{c{}}}:seq", (i + round) % 9);
        match i % 7 {
            0 => {
                int_reply(p, &["SEQ.NEXT", &k]);
            }
            1 => {
                int_reply(p, &["SEQ.NEXT", &k, "COUNT", &(1 + i % 5).to_string()]);
            }
            2 => {
                int_reply(p, &["SEQ.ADVANCE", &k, &(i * 40).to_string()]);
            }
            3 => {
                let (a, b): (i64, i64) = redis::pipe()
                    .atomic()
                    .cmd("SEQ.NEXT")
                    .arg(&k)
                    .cmd("SEQ.NEXT")
                    .arg(&k)
                    .arg("COUNT")
                    .arg(3)
                    .query(p)
                    .unwrap();
                assert!(b > a);
            }
            4 => {
                int_reply(p, &["EVAL", script, "1", &k, &(1 + i % 4).to_string()]);
            }
            5 => {
                int_reply(p, &["FCALL", "seqnext", "1", &k, "2"]);
            }
            _ => {
                let _: String = cmd(p, &["SEQ.SET", &k, &(i * 10 + round).to_string()]).unwrap();
            }
        }
    }
}

fn verbatim_replication_reaches_the_same_state(preamble: &str) {
    // `always`: with `everysec` a call inside MULTI or a script beyond what the AOF has fsynced
    // (an ADVANCE raises far past the gap of 100 here) is refused while Redis's own fsync runs
    // (docs/durability.md, "Durable before use"); this test is about what replicates.
    let mut primary = Server::with(&[
        "--imid.seq-gap",
        "100",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        preamble,
    ]);
    let replica = primary.replica(&["--imid.seq-gap", "100"]);
    let mut p = primary.client();
    let lib = "#!lua name=seqtest\n\
               redis.register_function('seqnext', function(keys, args) \
               return redis.call('SEQ.NEXT', keys[1], 'COUNT', args[1]) end)";
    let _: String = cmd(&mut p, &["FUNCTION", "LOAD", lib]).unwrap();
    mixed_writes(&mut p, 0);
    // a base file from here on: the rest lands in the incremental AOF as replicated
    primary.rewrite_aof();
    mixed_writes(&mut p, 1);
    // marks every key, and the node as inherited: the next writes skip the gap, in every path
    let _: String = cmd(&mut p, &["DEBUG", "RELOAD"]).unwrap();
    mixed_writes(&mut p, 2);
    mixed_writes(&mut p, 3);
    // every key skips once, but the one whose first write after the reload is a SEQ.SET (c8)
    assert_eq!(primary.imid_stat("seq_gap_skips"), 8);
    primary.wait_replica(&replica);
    assert!(calls(&replica, "seq.next") > 0, "NEXT went as called");
    let want = digest(&primary);
    assert_eq!(digest(&replica), want, "replica");
    let keys: Vec<String> = (0..9).map(|i| format!("{{c{i}}}:seq")).collect();
    let values = mget(&mut p, &keys);
    drop(p);

    // AOF replay: a replayed NEXT must not skip the gap again, although every key it touches
    // is marked at load
    primary.shutdown(true);
    primary.restart();
    assert_eq!(
        digest(&primary),
        want,
        "after AOF replay (preamble {preamble})"
    );
    assert_eq!(mget(&mut primary.client(), &keys), values);
}

#[test]
fn replica_and_aof_replay_reach_the_primarys_state_with_preamble() {
    verbatim_replication_reaches_the_same_state("yes");
}

#[test]
fn replica_and_aof_replay_reach_the_primarys_state_without_preamble() {
    verbatim_replication_reaches_the_same_state("no");
}

#[test]
fn writes_are_refused_on_a_replica() {
    let primary = Server::start();
    let replica = primary.replica(&[]);
    let mut p = primary.client();
    int_reply(&mut p, &["SEQ.NEXT", "k"]);
    primary.wait_replica(&replica);
    let mut r = replica.client();
    assert_seq_writes_refused(&mut r, "k", "READONLY");
    assert_eq!(int_reply(&mut r, &["SEQ.GET", "k"]), 1);
    let v: Vec<i64> = cmd(&mut r, &["SEQ.MGET", "k", "x"]).unwrap();
    assert_eq!(v, [1, 0]);
}

#[test]
fn scripts_and_transactions_give_the_same_state_on_the_replica() {
    let primary = Server::start();
    let replica = primary.replica(&[]);
    let mut p = primary.client();
    let script = "local s = redis.call('SEQ.NEXT', KEYS[1], 'COUNT', ARGV[2]) \
                  redis.call('ZADD', KEYS[2], s, ARGV[1]) return s";
    for i in 0..50 {
        let conv = format!("{{conv:{}}}", i % 4);
        let _: i64 = cmd(
            &mut p,
            &[
                "EVAL",
                script,
                "2",
                &format!("{conv}:seq"),
                &format!("{conv}:inbox"),
                &format!("m{i}"),
                &(1 + i % 3).to_string(),
            ],
        )
        .unwrap();
    }
    for i in 0..20 {
        let conv = format!("{{conv:{}}}", i % 4);
        let (s, _): (i64, i64) = redis::pipe()
            .atomic()
            .cmd("SEQ.NEXT")
            .arg(format!("{conv}:seq"))
            .cmd("ZADD")
            .arg(format!("{conv}:inbox"))
            .arg(i)
            .arg(format!("t{i}"))
            .query(&mut p)
            .unwrap();
        assert!(s > 0);
    }
    primary.wait_replica(&replica);
    let mut r = replica.client();
    for c in 0..4 {
        let seq = format!("{{conv:{c}}}:seq");
        let inbox = format!("{{conv:{c}}}:inbox");
        assert_eq!(
            int_reply(&mut r, &["SEQ.GET", &seq]),
            int_reply(&mut p, &["SEQ.GET", &seq])
        );
        let zr = |con: &mut Connection| -> Vec<(String, i64)> {
            cmd(con, &["ZRANGE", &inbox, "0", "-1", "WITHSCORES"]).unwrap()
        };
        assert_eq!(zr(&mut r), zr(&mut p));
    }
    assert_eq!(digest(&primary), digest(&replica));
}

#[test]
fn a_promoted_replica_skips_the_gap_once() {
    let primary = Server::start();
    let replica = primary.replica(&[]);
    let mut p = primary.client();
    assert_eq!(int_reply(&mut p, &["SEQ.NEXT", "a", "COUNT", "10"]), 10);
    assert_eq!(int_reply(&mut p, &["SEQ.NEXT", "b"]), 1);
    primary.wait_replica(&replica);
    drop(primary); // the primary dies

    let mut r = replica.client();
    let ok: String = cmd(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(ok, "OK");
    // reading does not use the gap up
    assert_eq!(int_reply(&mut r, &["SEQ.GET", "a"]), 10);
    assert_eq!(int_reply(&mut r, &["SEQ.NEXT", "a"]), 1011);
    assert_eq!(int_reply(&mut r, &["SEQ.NEXT", "a"]), 1012);
    assert_eq!(int_reply(&mut r, &["SEQ.NEXT", "b", "COUNT", "5"]), 1006);
    assert_eq!(replica.imid_stat("seq_gap_skips"), 2);
}

#[test]
fn a_promoted_replica_with_gap_zero_continues() {
    let primary = Server::with(&["--imid.seq-gap", "0"]);
    let replica = primary.replica(&["--imid.seq-gap", "0"]);
    let mut p = primary.client();
    assert_eq!(int_reply(&mut p, &["SEQ.NEXT", "a", "COUNT", "10"]), 10);
    primary.wait_replica(&replica);
    drop(primary);
    let mut r = replica.client();
    let _: String = cmd(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(int_reply(&mut r, &["SEQ.NEXT", "a"]), 11);
    assert_eq!(replica.imid_stat("seq_gap_skips"), 0);
}
