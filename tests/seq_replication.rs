//! Sequences on a primary and its replica: effects replicate as explicit values, scripts and
//! transactions give the same final state, writes are refused on the replica, and a promoted
//! replica skips the gap before issuing.
mod common;
use common::*;

fn int(con: &mut Connection, args: &[&str]) -> i64 {
    cmd(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn mget(con: &mut Connection, keys: &[String]) -> Vec<i64> {
    let mut c = redis::cmd("SEQ.MGET");
    for k in keys {
        c.arg(k);
    }
    c.query(con).unwrap()
}

fn digest(s: &Server) -> String {
    cmd(&mut s.client(), &["DEBUG", "DIGEST"]).unwrap()
}

#[test]
fn replica_ends_with_the_primarys_values() {
    let primary = Server::start();
    let mut p = primary.client();
    // written before the replica attaches: travels in the full-sync RDB
    for i in 0..10 {
        int(&mut p, &["SEQ.NEXT", &format!("k{i}"), "COUNT", "3"]);
    }
    let replica = primary.replica(&[]);
    // and after: travels as SEQ.SET in the stream
    for i in 0..200 {
        let k = format!("k{}", i % 13);
        match i % 5 {
            0 => {
                int(&mut p, &["SEQ.NEXT", &k, "COUNT", "7"]);
            }
            1 => {
                int(&mut p, &["SEQ.ADVANCE", &k, &(i * 3).to_string()]);
            }
            2 => {
                let _: String = cmd(&mut p, &["SEQ.SET", &k, &(i * 2).to_string()]).unwrap();
            }
            _ => {
                int(&mut p, &["SEQ.NEXT", &k]);
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
    s.info_field("commandstats", &format!("cmdstat_{name}"))
        .and_then(|v| {
            v.split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn effects_replicate_as_seq_set_and_no_ops_not_at_all() {
    let primary = Server::start();
    let replica = primary.replica(&[]);
    let mut p = primary.client();
    int(&mut p, &["SEQ.ADVANCE", "k", "10"]);
    int(&mut p, &["SEQ.NEXT", "k", "COUNT", "5"]);
    primary.wait_replica(&replica);
    // the replica ran what the primary did as explicit values, never NEXT or ADVANCE
    assert_eq!(calls(&replica, "seq.set"), 2);
    assert_eq!(calls(&replica, "seq.next"), 0);
    assert_eq!(calls(&replica, "seq.advance"), 0);

    int(&mut p, &["SEQ.ADVANCE", "k", "3"]);
    int(&mut p, &["SEQ.ADVANCE", "k", "15"]);
    int(&mut p, &["SEQ.ADVANCE", "missing", "0"]);
    let _: String = cmd(&mut p, &["SEQ.SET", "k", "15"]).unwrap();
    let _ = cmd::<i64>(&mut p, &["SEQ.NEXT", "k", "COUNT", "0"]);
    let _ = cmd::<i64>(&mut p, &["SEQ.NEXT", "k", "BOGUS"]);
    // one real write after the no-ops, so the sync below covers them all
    let _: String = cmd(&mut p, &["SEQ.SET", "other", "1"]).unwrap();
    primary.wait_replica(&replica);
    assert_eq!(calls(&replica, "seq.set"), 3);
    assert_eq!(int(&mut replica.client(), &["SEQ.GET", "k"]), 15);
    assert_eq!(int(&mut replica.client(), &["EXISTS", "missing"]), 0);
}

#[test]
fn writes_are_refused_on_a_replica() {
    let primary = Server::start();
    let replica = primary.replica(&[]);
    let mut p = primary.client();
    int(&mut p, &["SEQ.NEXT", "k"]);
    primary.wait_replica(&replica);
    let mut r = replica.client();
    for args in [
        &["SEQ.NEXT", "k"][..],
        &["SEQ.SET", "k", "5"],
        &["SEQ.ADVANCE", "k", "5"],
    ] {
        let e = cmd::<Value>(&mut r, args).unwrap_err();
        assert!(err_text(&e).starts_with("READONLY"), "{args:?}: {e}");
    }
    assert_eq!(int(&mut r, &["SEQ.GET", "k"]), 1);
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
            int(&mut r, &["SEQ.GET", &seq]),
            int(&mut p, &["SEQ.GET", &seq])
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
    assert_eq!(int(&mut p, &["SEQ.NEXT", "a", "COUNT", "10"]), 10);
    assert_eq!(int(&mut p, &["SEQ.NEXT", "b"]), 1);
    primary.wait_replica(&replica);
    drop(primary); // the primary dies

    let mut r = replica.client();
    let ok: String = cmd(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(ok, "OK");
    // reading does not use the gap up
    assert_eq!(int(&mut r, &["SEQ.GET", "a"]), 10);
    assert_eq!(int(&mut r, &["SEQ.NEXT", "a"]), 1011);
    assert_eq!(int(&mut r, &["SEQ.NEXT", "a"]), 1012);
    assert_eq!(int(&mut r, &["SEQ.NEXT", "b", "COUNT", "5"]), 1006);
    assert_eq!(replica.imid_stat("seq_gap_skips"), 2);
}

#[test]
fn a_promoted_replica_with_gap_zero_continues() {
    let primary = Server::start_with(&["--imid.seq-gap", "0"]);
    let replica = primary.replica(&["--imid.seq-gap", "0"]);
    let mut p = primary.client();
    assert_eq!(int(&mut p, &["SEQ.NEXT", "a", "COUNT", "10"]), 10);
    primary.wait_replica(&replica);
    drop(primary);
    let mut r = replica.client();
    let _: String = cmd(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    assert_eq!(int(&mut r, &["SEQ.NEXT", "a"]), 11);
    assert_eq!(replica.imid_stat("seq_gap_skips"), 0);
}
