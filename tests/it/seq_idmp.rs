//! Idempotent allocation, `SEQ.NEXT key [COUNT n] IDMP token`: replies, errors, concurrent
//! retries, expiry by count and by time, and a retry that still gets `duplicate 1` after every
//! way the key can move or be rebuilt: DEBUG RELOAD, RDB and AOF restarts (with and without the
//! RDB preamble), kill -9 with AOF everysec, DUMP/RESTORE and COPY, a failover, a slot moved in
//! a cluster. Replicas and AOF replay reach the primary's exact state (DEBUG DIGEST, tokens
//! included).
use crate::common;
use common::rdb::*;
use common::*;
use std::time::Duration;

/// `SEQ.NEXT key COUNT count IDMP token` -> (last, duplicate).
fn idmp(con: &mut Connection, key: &str, token: &str, count: u64) -> (i64, i64) {
    let r: Vec<i64> = cmd(
        con,
        &["SEQ.NEXT", key, "COUNT", &count.to_string(), "IDMP", token],
    )
    .unwrap_or_else(|e| panic!("SEQ.NEXT {key} IDMP {token}: {e}"));
    assert_eq!(r.len(), 2, "{r:?}");
    (r[0], r[1])
}

#[test]
fn the_first_call_reserves_and_a_retry_gets_its_answer() {
    let s = Server::start();
    let mut con = s.client();
    assert_eq!(idmp(&mut con, "k", "m1", 1), (1, 0));
    assert_eq!(idmp(&mut con, "k", "m1", 1), (1, 1));
    assert_eq!(idmp(&mut con, "k", "m2", 5), (6, 0));
    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "k"]),
        7,
        "plain NEXT unchanged"
    );
    assert_eq!(idmp(&mut con, "k", "m2", 5), (6, 1));
    assert_eq!(idmp(&mut con, "k", "m1", 1), (1, 1));
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", "k"]),
        7,
        "retries reserve nothing"
    );
    // tokens are per key and binary-safe; the longest is 64 bytes
    assert_eq!(idmp(&mut con, "other", "m1", 1), (1, 0));
    let long = "x".repeat(64);
    assert_eq!(idmp(&mut con, "k", &long, 1), (8, 0));
    let bin: Vec<i64> = redis::cmd("SEQ.NEXT")
        .arg("k")
        .arg("IDMP")
        .arg(&[0u8, 255, 10][..])
        .query(&mut con)
        .unwrap();
    assert_eq!(bin, [9, 0]);
    // option order and case do not matter; the last COUNT wins as for plain NEXT
    let r: Vec<i64> = cmd(&mut con, &["seq.next", "k", "idmp", "m3", "count", "2"]).unwrap();
    assert_eq!(r, [11, 0]);
    let r: Vec<i64> = cmd(
        &mut con,
        &["SEQ.NEXT", "k", "COUNT", "9", "IDMP", "m3", "COUNT", "2"],
    )
    .unwrap();
    assert_eq!(r, [11, 1]);
    // RESP3: the same two integers
    let mut r3 = s.client_resp3();
    let r: Vec<i64> = cmd(&mut r3, &["SEQ.NEXT", "k", "IDMP", "m1"]).unwrap();
    assert_eq!(r, [1, 1]);
    // a plain SET keeps the tokens (and the answers they gave)
    ok(&mut con, &["SEQ.SET", "k", "100"]);
    assert_eq!(idmp(&mut con, "k", "m2", 5), (6, 1));
    assert_eq!(idmp(&mut con, "k", "m4", 1), (101, 0));
}

#[test]
fn map_fields_take_tokens_too() {
    let s = Server::start();
    let mut con = s.client();
    assert_eq!(hidmp(&mut con, "m", "friendship", "t1", 1), (1, 0));
    assert_eq!(hidmp(&mut con, "m", "friendship", "t1", 1), (1, 1));
    assert_eq!(hidmp(&mut con, "m", "group", "t2", 3), (3, 0));
    assert_eq!(
        int_reply(&mut con, &["SEQ.HNEXT", "m", "group"]),
        4,
        "plain HNEXT unchanged"
    );
    assert_eq!(hidmp(&mut con, "m", "group", "t2", 3), (3, 1));
    assert_eq!(int_reply(&mut con, &["SEQ.HGET", "m", "group"]), 4);
    // the token names one request: another field or count is refused
    const OTHER: &str = "ERR IDMP token already used on this key with another field or COUNT";
    let rows: &[Refused] = &[
        ("SEQ.HNEXT m group IDMP t1", &[], OTHER),
        ("SEQ.HNEXT m friendship COUNT 2 IDMP t1", &[], OTHER),
        ("SEQ.HNEXT m f IDMP", &[], "ERR IDMP needs a token"),
        ("SEQ.HNEXT m f IDMP a IDMP b", &[], "ERR IDMP given twice"),
        (
            "SEQ.HNEXT m f IDMP _",
            &[""],
            "ERR IDMP token must be 1..64 bytes",
        ),
        ("SEQ.HIDMPSET nokey t 1 1 1 0", &[], "ERR no such key"),
    ];
    assert_refusals(&mut con, rows, |_, _| {});
    assert_eq!(
        int_reply(&mut con, &["SEQ.HLEN", "m"]),
        2,
        "nothing created"
    );
    // tokens of a map and of a sequence key are separate
    assert_eq!(idmp(&mut con, "s", "t1", 1), (1, 0));
    // deleting the last field deletes the key, tokens with it
    assert_eq!(
        int_reply(&mut con, &["SEQ.HDEL", "m", "friendship", "group"]),
        2
    );
    assert_eq!(hidmp(&mut con, "m", "friendship", "t1", 1), (1, 0));
}

#[test]
fn bad_calls_are_refused_and_change_nothing() {
    let s = Server::start();
    let mut con = s.client();
    assert_eq!(idmp(&mut con, "k", "m1", 2), (2, 0));
    let long = "x".repeat(65);
    const TOKEN: &str = "ERR IDMP token must be 1..64 bytes";
    const TWICE: &str = "ERR IDMP given twice";
    const OTHER: &str = "ERR IDMP token already used on this key with another COUNT";
    let rows: &[Refused] = &[
        ("SEQ.NEXT k IDMP _", &["", &long], TOKEN),
        (
            "SEQ.NEXT k IDMP",
            &[],
            "ERR IDMP needs a token (1..64 bytes)",
        ),
        ("SEQ.NEXT k COUNT 2 IDMP", &[], "ERR IDMP needs a token"),
        ("SEQ.NEXT k IDMP a IDMP _", &["b", "a"], TWICE),
        ("SEQ.NEXT k IDMP a COUNT 0", &[], COUNT),
        ("SEQ.NEXT k IDMP a NOPE", &[], SYNTAX),
        ("SEQ.NEXT k COUNT 3 IDMP m1", &[], OTHER),
        ("SEQ.NEXT k IDMP m1", &[], OTHER),
    ];
    assert_refusals(&mut con, rows, |_, _| {});
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", "k"]),
        2,
        "nothing reserved"
    );
    assert_eq!(
        idmp(&mut con, "k", "a", 1),
        (3, 0),
        "no refused call left its token"
    );
    let _: String = cmd(&mut con, &["SET", "str", "x"]).unwrap();
    let e = expect_err(&mut con, &[b"SEQ.NEXT", b"str", b"IDMP", b"a"]);
    assert!(e.starts_with("WRONGTYPE"), "{e}");
    // the internal command checks what it restores
    const LAST: &str = "ERR last must be an integer in 0..9223372036854775807";
    const TTL_RANGE: &str = "ERR ttl-ms must be in 1000..604800000";
    const MAX_RANGE: &str = "ERR max must be in 1..1000000";
    const CLIENT: &str =
        "ERR SEQ.IDMPCLOCK is written by imid to replicas and the AOF, not called by clients";
    let rows: &[Refused] = &[
        ("SEQ.IDMPSET k _ 1 1 1 0", &[""], TOKEN),
        ("SEQ.IDMPSET k t -1 1 1 0", &[], LAST),
        (
            "SEQ.IDMPSET k t 1 -1 1 0",
            &[],
            "ERR expires must be an integer",
        ),
        (
            "SEQ.IDMPSET k t 1 1 x 0",
            &[],
            "ERR fingerprint must be an integer",
        ),
        (
            "SEQ.IDMPSET k t 1 1 1 -1",
            &[],
            "ERR dropped must be an integer",
        ),
        // the IDMP clock (src/node/idmp_clock.rs): checked, then refused to a client
        (
            "SEQ.IDMPCLOCK -1 10000 5",
            &[],
            "ERR ms must be an integer in 0..9223372036854775807",
        ),
        ("SEQ.IDMPCLOCK 1 _ 5", &["999", "604800001"], TTL_RANGE),
        ("SEQ.IDMPCLOCK 1 10000 _", &["0", "1000001"], MAX_RANGE),
        ("SEQ.IDMPCLOCK 1 10000 5", &[], CLIENT),
        ("SEQ.IDMPCLOCK 1 10000", &[], ARITY),
    ];
    assert_refusals(&mut con, rows, |_, _| {});
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "k"]), 3);
}

#[test]
fn a_duplicate_touches_nothing() {
    let s = Server::start();
    let mut con = s.client();
    assert_eq!(idmp(&mut con, "k", "m1", 1), (1, 0));
    // WATCH sees no change from a retry: the transaction runs
    let mut other = s.client();
    let _: String = cmd(&mut con, &["WATCH", "k"]).unwrap();
    assert_eq!(idmp(&mut other, "k", "m1", 1), (1, 1));
    let _: String = cmd(&mut con, &["MULTI"]).unwrap();
    let _: String = cmd(&mut con, &["SEQ.GET", "k"]).unwrap();
    let r: Value = cmd(&mut con, &["EXEC"]).unwrap();
    assert_eq!(r, Value::Array(vec![Value::Int(1)]), "EXEC ran");
    // ... and a new token is a change
    let _: String = cmd(&mut con, &["WATCH", "k"]).unwrap();
    assert_eq!(idmp(&mut other, "k", "m2", 1), (2, 0));
    let _: String = cmd(&mut con, &["MULTI"]).unwrap();
    let _: String = cmd(&mut con, &["SEQ.GET", "k"]).unwrap();
    let r: Value = cmd(&mut con, &["EXEC"]).unwrap();
    assert_eq!(r, Value::Nil, "EXEC aborted");
    // the same for a map field's token (one write handle: the key is signalled only when a
    // call changed it, src/host/mod.rs Ctx::changed)
    assert_eq!(hidmp(&mut other, "m", "f", "m1", 1), (1, 0));
    let _: String = cmd(&mut con, &["WATCH", "m"]).unwrap();
    assert_eq!(hidmp(&mut other, "m", "f", "m1", 1), (1, 1));
    let _: String = cmd(&mut con, &["MULTI"]).unwrap();
    let _: String = cmd(&mut con, &["SEQ.HGET", "m", "f"]).unwrap();
    let r: Value = cmd(&mut con, &["EXEC"]).unwrap();
    assert_eq!(
        r,
        Value::Array(vec![Value::Int(1)]),
        "EXEC ran after a map retry"
    );
    let _: String = cmd(&mut con, &["WATCH", "m"]).unwrap();
    assert_eq!(hidmp(&mut other, "m", "f", "m2", 1), (2, 0));
    let _: String = cmd(&mut con, &["MULTI"]).unwrap();
    let _: String = cmd(&mut con, &["SEQ.HGET", "m", "f"]).unwrap();
    let r: Value = cmd(&mut con, &["EXEC"]).unwrap();
    assert_eq!(r, Value::Nil, "EXEC aborted by a map's new token");
}

#[test]
fn concurrent_retries_of_one_token_reserve_once() {
    let s = Server::start();
    let url = s.url();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                (0..50)
                    .map(|i| {
                        let a = idmp(&mut con, "conv", "the-message", 3);
                        // interleaved with other messages of the same conversation
                        let b = idmp(&mut con, "conv", &format!("m{}", i % 5), 1);
                        (a, b)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let replies: Vec<((i64, i64), (i64, i64))> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let firsts: Vec<_> = replies.iter().filter(|(a, _)| a.1 == 0).collect();
    assert_eq!(firsts.len(), 1, "one reservation for the token");
    let last = firsts[0].0 .0;
    assert!(
        replies.iter().all(|(a, _)| a.0 == last),
        "every retry got {last}"
    );
    let mut fresh: Vec<i64> = replies
        .iter()
        .map(|(_, b)| b)
        .filter(|b| b.1 == 0)
        .map(|b| b.0)
        .collect();
    fresh.sort_unstable();
    assert_eq!(fresh.len(), 5, "one reservation per other token: {fresh:?}");
    let mut con = s.client();
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", "conv"]),
        3 + 5,
        "exactly 8 values reserved"
    );
}

#[test]
fn tokens_expire_by_count_oldest_first() {
    let s = Server::with(&["--imid.seq-idmp-max", "3"]);
    let mut con = s.client();
    for (i, t) in ["a", "b", "c"].iter().enumerate() {
        assert_eq!(idmp(&mut con, "k", t, 1), (i as i64 + 1, 0));
    }
    assert_eq!(idmp(&mut con, "k", "a", 1), (1, 1));
    assert_eq!(idmp(&mut con, "k", "d", 1), (4, 0), "a goes");
    assert_eq!(idmp(&mut con, "k", "b", 1), (2, 1));
    assert_eq!(
        idmp(&mut con, "k", "a", 1),
        (5, 0),
        "forgotten: a new reservation"
    );
    // now c, d, a: b went when a came back
    assert_eq!(idmp(&mut con, "k", "c", 1), (3, 1));
    assert_eq!(idmp(&mut con, "k", "b", 1), (6, 0));
    // a smaller maximum applies at the next new token
    config_set(&mut con, "imid.seq-idmp-max", "1");
    assert_eq!(
        idmp(&mut con, "k", "d", 1),
        (4, 1),
        "still there until a write"
    );
    assert_eq!(idmp(&mut con, "k", "e", 1), (7, 0));
    for t in ["c", "d", "a", "b"] {
        assert_eq!(idmp(&mut con, "k", t, 1).1, 0, "{t} dropped");
    }
}

/// The hooked build's clock, frozen at `ms`.
#[test]
fn tokens_expire_by_time_and_the_next_write_drops_them_everywhere() {
    let primary = Server::build()
        .hooked()
        .args(&["--imid.seq-idmp-ttl", "10"])
        .start();
    let replica = primary.hooked_replica(&[]);
    let mut p = primary.client();
    let t0 = 1_800_000_000_000u64;
    freeze(&mut p, t0);
    assert_eq!(idmp(&mut p, "k", "a", 1), (1, 0));
    freeze(&mut p, t0 + 5_000);
    assert_eq!(idmp(&mut p, "k", "b", 1), (2, 0));
    freeze(&mut p, t0 + 9_999);
    assert_eq!(idmp(&mut p, "k", "a", 1), (1, 1));
    // a call that reserves moves the IDMP clock to t0 + 9,999 (a retry moves nothing)
    assert_eq!(idmp(&mut p, "k", "x", 1), (3, 0));
    freeze(&mut p, t0 + 10_000);
    assert_eq!(idmp(&mut p, "k", "b", 1), (2, 1));
    primary.wait_replica(&replica);
    let with_a = digest(&primary);
    assert_eq!(digest(&replica), with_a);
    // The IDMP clock moves only once the wall clock is a second past it (node/idmp_clock.rs):
    // it still reads t0 + 9,999, where a counts.
    assert_eq!(
        idmp(&mut p, "k", "a", 1),
        (1, 1),
        "the clock moves by the second"
    );
    freeze(&mut p, t0 + 10_999);
    // a expired: a lookup ignores it, and the write that follows drops it (on the replica
    // too, by the primary's decision)
    assert_eq!(idmp(&mut p, "k", "a", 1), (4, 0));
    primary.wait_replica(&replica);
    assert_ne!(digest(&primary), with_a);
    assert_eq!(digest(&replica), digest(&primary));
    // the replica's own clock plays no part: far in the future, its window is the primary's
    let mut r = replica.client();
    freeze(&mut r, t0 + 1_000_000_000);
    freeze(&mut p, t0 + 30_000);
    assert_eq!(
        idmp(&mut p, "k", "c", 1),
        (5, 0),
        "a, b and x expired: dropped"
    );
    primary.wait_replica(&replica);
    assert_eq!(digest(&replica), digest(&primary));
    // a longer TTL applies to new tokens only
    config_set(&mut p, "imid.seq-idmp-ttl", "100");
    assert_eq!(idmp(&mut p, "k", "d", 1), (6, 0));
    freeze(&mut p, t0 + 30_000 + 99_999);
    assert_eq!(idmp(&mut p, "k", "d", 1), (6, 1));
    assert_eq!(idmp(&mut p, "k", "c", 1), (7, 0), "c kept its 10 s");
}

/// One IDMP call made: key, field (for a map), token, count, the reply's last.
type Made = (String, Option<String>, String, u64, i64);

/// `SEQ.HNEXT key field COUNT count IDMP token` -> (last, duplicate).
fn hidmp(con: &mut Connection, key: &str, field: &str, token: &str, count: u64) -> (i64, i64) {
    let r: Vec<i64> = cmd(
        con,
        &[
            "SEQ.HNEXT",
            key,
            field,
            "COUNT",
            &count.to_string(),
            "IDMP",
            token,
        ],
    )
    .unwrap_or_else(|e| panic!("SEQ.HNEXT {key} {field} IDMP {token}: {e}"));
    assert_eq!(r.len(), 2, "{r:?}");
    (r[0], r[1])
}

/// The call `m` describes, again.
fn again(con: &mut Connection, m: &Made) -> (i64, i64) {
    match &m.1 {
        None => idmp(con, &m.0, &m.2, m.3),
        Some(f) => hidmp(con, &m.0, f, &m.2, m.3),
    }
}

/// The keys `mixed` writes: sequences k0..k3, maps m0 and m1.
const MIXED_KEYS: [&str; 6] = ["k0", "k1", "k2", "k3", "m0", "m1"];

/// A workload of IDMP calls with retries, plain NEXTs and SETs over a few sequence keys, and
/// IDMP calls over the fields of two maps, with a small window so that tokens are dropped;
/// returns the IDMP calls made.
fn mixed(con: &mut Connection, round: usize) -> Vec<Made> {
    let mut made: Vec<Made> = Vec::new();
    for i in 0..60 {
        let k = format!("k{}", i % 4);
        let count = (i % 3 + 1) as u64;
        match i % 6 {
            4 => {
                int_reply(con, &["SEQ.NEXT", &k, "COUNT", "2"]);
            }
            5 if i % 12 == 5 => ok(con, &["SEQ.SET", &k, &(1000 * round + i).to_string()]),
            _ => {
                let t = format!("r{round}-t{i}");
                let (last, dup) = idmp(con, &k, &t, count);
                assert_eq!(dup, 0);
                assert_eq!(idmp(con, &k, &t, count), (last, 1));
                made.push((k, None, t, count, last));
            }
        }
        // a map: fields f0..f2, plain HNEXTs between the IDMP calls
        let m = format!("m{}", i % 2);
        let f = format!("f{}", i % 3);
        if i % 5 == 0 {
            int_reply(con, &["SEQ.HNEXT", &m, &f]);
        }
        let t = format!("r{round}-h{i}");
        let (last, dup) = hidmp(con, &m, &f, &t, count);
        assert_eq!(dup, 0);
        assert_eq!(hidmp(con, &m, &f, &t, count), (last, 1));
        made.push((m, Some(f), t, count, last));
    }
    made
}

/// Of `made`, those the window still holds (the last `max` per key) get duplicate 1.
fn retries_are_duplicates(con: &mut Connection, made: &[Made], max: usize) {
    for key in MIXED_KEYS {
        let of_key: Vec<_> = made.iter().filter(|m| m.0 == key).collect();
        assert!(!of_key.is_empty(), "{key}");
        for m in of_key.iter().rev().take(max) {
            assert_eq!(again(con, m), (m.4, 1), "{m:?}");
        }
    }
}

fn replica_and_aof_replay_reach_the_primarys_state(preamble: &str) {
    let args = [&aof_always(preamble)[..], &["--imid.seq-idmp-max", "5"]].concat();
    let mut primary = Server::with(&args);
    let mut p = primary.client();
    let first = mixed(&mut p, 0);
    // attached now: the first round travels in the full sync's RDB, the second as called,
    // after the IDMP clock (SEQ.IDMPCLOCK) that the fork of the full sync made due again
    let replica = primary.replica(&[]);
    let second = mixed(&mut p, 1);
    primary.wait_replica(&replica);
    let want = digest(&primary);
    assert_eq!(digest(&replica), want);
    let r_info: String = cmd(&mut replica.client(), &["INFO", "commandstats"]).unwrap();
    for c in [
        "cmdstat_seq.idmpclock",
        "cmdstat_seq.next",
        "cmdstat_seq.hnext",
    ] {
        assert!(r_info.contains(c), "replicated as called: {c}");
    }
    for c in ["cmdstat_seq.idmpset", "cmdstat_seq.hidmpset"] {
        assert!(!r_info.contains(c), "not the explicit effect: {c}");
    }
    assert!(!first.is_empty());
    drop(replica);

    // replayed from the AOF
    primary.kill();
    primary.restart();
    assert_eq!(digest(&primary), want, "AOF replay");
    // rewritten (without the preamble, the rewrite callback writes SEQ.IDMPSET), then replayed
    primary.rewrite_aof();
    let (_, base) = aof_base(&primary);
    for c in [&b"SEQ.IDMPSET"[..], b"SEQ.HIDMPSET"] {
        assert_eq!(preamble == "no", contains(&base, c), "{preamble}");
    }
    primary.kill();
    primary.restart();
    assert_eq!(digest(&primary), want, "rewritten AOF replay");
    let mut p = primary.client();
    retries_are_duplicates(&mut p, &second, 5);
    assert_eq!(digest(&primary), want, "retries change nothing");
}

#[test]
fn replica_and_aof_replay_reach_the_primarys_state_with_preamble() {
    replica_and_aof_replay_reach_the_primarys_state("yes");
}

#[test]
fn replica_and_aof_replay_reach_the_primarys_state_without_preamble() {
    replica_and_aof_replay_reach_the_primarys_state("no");
}

#[test]
fn tokens_survive_reload_restart_restore_and_copy() {
    let mut s = Server::with(&["--save", "3600 1"]);
    let mut con = s.client();
    let made = mixed(&mut con, 0);
    let want = digest(&s);
    ok(&mut con, &["DEBUG", "RELOAD"]);
    assert_eq!(digest(&s), want, "DEBUG RELOAD");
    retries_are_duplicates(&mut con, &made, 1000);
    s.shutdown(true);
    s.restart();
    let mut con = s.client();
    assert_eq!(digest(&s), want, "RDB restart");
    retries_are_duplicates(&mut con, &made, 1000);
    // loaded, so marked: a new token skips the gap, and its retry is a duplicate
    let before = int_reply(&mut con, &["SEQ.GET", "k0"]);
    assert_eq!(idmp(&mut con, "k0", "new", 1), (before + 1001, 0));
    assert_eq!(idmp(&mut con, "k0", "new", 1), (before + 1001, 1));

    // DUMP/RESTORE (what MIGRATE sends) and COPY carry the tokens, a sequence's and a map's
    for key in ["k1", "m1"] {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut con).unwrap();
        assert_eq!(restore(&mut con, &format!("{key}r"), &dump).unwrap(), "OK");
        assert_eq!(int_reply(&mut con, &["COPY", key, &format!("{key}c")]), 1);
    }
    let (_, _, t, count, last) = made.iter().rev().find(|m| m.0 == "k1").unwrap();
    for k in ["k1r", "k1c"] {
        assert_eq!(idmp(&mut con, k, t, *count), (*last, 1), "{k}");
    }
    let m = made.iter().rev().find(|m| m.0 == "m1").unwrap();
    for k in ["m1r", "m1c"] {
        let f = m.1.as_deref().unwrap();
        assert_eq!(hidmp(&mut con, k, f, &m.2, m.3), (m.4, 1), "{k}");
    }
    let d: Vec<Vec<String>> = ["k1", "k1r", "k1c"]
        .iter()
        .map(|k| cmd(&mut con, &["DEBUG", "DIGEST-VALUE", k]).unwrap())
        .collect();
    assert!(d[0] == d[1] && d[1] == d[2], "{d:?}");
    // the copy is independent
    assert_eq!(idmp(&mut con, "k1c", "only-in-copy", 1).1, 0);
    assert_eq!(idmp(&mut con, "k1", "only-in-copy", 1).1, 0);
    ok(&mut con, &["FLUSHALL"]);
    assert_eq!(int_reply(&mut con, &["DBSIZE"]), 0);
}

#[test]
fn a_retry_after_kill_9_with_aof_everysec_is_a_duplicate() {
    let mut s = Server::with(&AOF_EVERYSEC);
    let mut con = s.client();
    let mut made = Vec::new();
    for i in 0..200 {
        let t = format!("msg-{i}");
        made.push((t.clone(), idmp(&mut con, "conv", &t, 1)));
    }
    let field = hidmp(&mut con, "sync", "group", "msg-0", 1);
    // the last reply, then one second for the fsync
    std::thread::sleep(Duration::from_millis(1100));
    let mut con = s.crash_restart();
    for (t, (last, dup)) in made.iter().rev().take(100) {
        assert_eq!(*dup, 0);
        assert_eq!(idmp(&mut con, "conv", t, 1), (*last, 1), "{t}");
    }
    assert_eq!(hidmp(&mut con, "sync", "group", "msg-0", 1), (field.0, 1));
    let (last, dup) = idmp(&mut con, "conv", "after", 1);
    assert_eq!(dup, 0);
    assert_eq!(last, 200 + 1001, "skipped the gap");
}

#[test]
fn a_retry_after_failover_is_a_duplicate() {
    let primary = Server::start();
    let replica = primary.replica(&[]);
    let mut p = primary.client();
    let first = idmp(&mut p, "conv", "m1", 2);
    let second = idmp(&mut p, "conv", "m2", 1);
    let field = hidmp(&mut p, "sync", "friendship", "m1", 1);
    let n: i64 = cmd(&mut p, &["WAIT", "1", "5000"]).unwrap();
    assert_eq!(n, 1);
    drop(primary);
    let mut r = replica.client();
    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(idmp(&mut r, "conv", "m1", 2), (first.0, 1));
    assert_eq!(idmp(&mut r, "conv", "m2", 1), (second.0, 1));
    assert_eq!(hidmp(&mut r, "sync", "friendship", "m1", 1), (field.0, 1));
    let (last, dup) = idmp(&mut r, "conv", "m3", 1);
    assert_eq!(
        (last, dup),
        (second.0 + 1001, 0),
        "the promoted replica skips the gap"
    );
}

#[test]
fn a_retry_after_a_slot_move_is_a_duplicate() {
    let slot_of = slot("{conv}");
    let c = common::cluster::Cluster::start(None, &[], slot_of..slot_of + 1);
    let from = c.owner(slot_of);
    let to = (from + 1) % 3;
    let mut con = c.client();
    let call = |con: &mut redis::cluster::ClusterConnection, t: &str| -> Vec<i64> {
        redis::cmd("SEQ.NEXT")
            .arg("{conv}")
            .arg("IDMP")
            .arg(t)
            .query(con)
            .unwrap()
    };
    let first = call(&mut con, "m1");
    assert_eq!(first[1], 0);
    c.migrate_by_hand(slot_of, from, to);
    assert_eq!(c.owner(slot_of), to);
    let mut con = c.client();
    assert_eq!(call(&mut con, "m1"), [first[0], 1]);
    let next = call(&mut con, "m2");
    assert_eq!(next[1], 0);
    assert!(next[0] > first[0]);
}

#[test]
fn a_key_without_tokens_costs_no_more_than_before() {
    let s = Server::start();
    let mut con = s.client();
    int_reply(&mut con, &["SEQ.NEXT", "plain"]);
    int_reply(&mut con, &["INCR", "count"]);
    idmp(&mut con, "token", "m1", 1);
    let plain = int_reply(&mut con, &["MEMORY", "USAGE", "plain"]);
    let string = int_reply(&mut con, &["MEMORY", "USAGE", "count"]);
    let with_token = int_reply(&mut con, &["MEMORY", "USAGE", "token"]);
    println!("MEMORY USAGE: plain {plain}, INCR {string}, with one token {with_token}");
    // the one-word value: at most the 16-byte module wrapper above an INCR counter (as
    // before IDMP existed), and no box behind it
    assert!(plain <= string + 16, "{plain} vs {string}");
    assert!(with_token > plain + 64, "{with_token} vs {plain}");
    // a value too large for the word is boxed, and behaves the same
    ok(&mut con, &["SEQ.SET", "big", "4611686018427387904"]);
    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "big"]),
        4611686018427387905
    );
    ok(&mut con, &["DEBUG", "RELOAD"]);
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", "big"]),
        4611686018427387905
    );
    assert_eq!(int_reply(&mut con, &["COPY", "big", "big2"]), 1);
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", "big2"]),
        4611686018427387905
    );
    ok(&mut con, &["SEQ.SET", "big", "5"]);
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", "big2"]),
        4611686018427387905
    );
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "big"]), 5);
}

/// How many `SEQ.IDMPCLOCK` the AOF's incremental files hold.
fn clocks_in_aof(s: &Server) -> usize {
    let incr = aof_incr(s);
    incr.windows(13).filter(|w| w == b"SEQ.IDMPCLOCK").count()
}

#[test]
fn the_idmp_clock_is_written_once_per_second_and_again_after_a_fork() {
    // src/node/idmp_clock.rs: an IDMP call replicates as called, after the clock it decided by.
    let mut s = Server::build().hooked().args(&AOF_ALWAYS).start();
    let mut con = s.client();
    let t0 = 1_800_000_000_000u64;
    freeze(&mut con, t0);
    for i in 0..20 {
        assert_eq!(idmp(&mut con, "k", &format!("a{i}"), 1), (i + 1, 0));
    }
    assert_eq!(idmp(&mut con, "k", "a0", 1), (1, 1));
    assert_eq!(clocks_in_aof(&s), 1, "one clock for a frozen second");
    let incr = aof_incr(&s);
    assert!(contains(&incr, b"SEQ.NEXT"), "the calls go as called");
    assert!(!contains(&incr, b"SEQ.IDMPSET"), "not as their effect");
    freeze(&mut con, t0 + 999);
    assert_eq!(idmp(&mut con, "k", "b", 1), (21, 0));
    assert_eq!(
        clocks_in_aof(&s),
        1,
        "less than a second later: the same clock"
    );
    freeze(&mut con, t0 + 1_000);
    assert_eq!(idmp(&mut con, "k", "c", 1), (22, 0));
    assert_eq!(clocks_in_aof(&s), 2, "a second later: the clock moved");
    freeze(&mut con, t0 - 60_000);
    assert_eq!(idmp(&mut con, "k", "d", 1), (23, 0));
    assert_eq!(
        clocks_in_aof(&s),
        2,
        "a wall clock stepped back: the IDMP clock waits"
    );
    config_set(&mut con, "imid.seq-idmp-max", "50");
    assert_eq!(idmp(&mut con, "k", "e", 1), (24, 0));
    assert_eq!(clocks_in_aof(&s), 3, "a changed config moves the clock");
    // the rewrite's new incremental file starts at a fork: the clock is written again first
    s.rewrite_aof();
    assert_eq!(clocks_in_aof(&s), 0, "a new incremental file");
    assert_eq!(idmp(&mut con, "k", "f", 1), (25, 0));
    assert_eq!(clocks_in_aof(&s), 1, "written again after the fork");
    // replayed, the file gives exactly these tokens (their expiries included)
    let want = digest(&s);
    s.kill();
    s.restart();
    assert_eq!(digest(&s), want);
}

/// A replica's own IDMP configs, unlike its primary's (whose tokens live 10 s).
const REPLICA_IDMP: [&str; 4] = ["--imid.seq-idmp-ttl", "20", "--imid.seq-idmp-max", "7"];

/// A primary whose tokens live 10 s and a hooked replica of it with `extra` arguments and
/// configs of its own ([`REPLICA_IDMP`]); the primary's clock frozen and its first IDMP call
/// (key `k`, token `a`) replicated. Returns both and a client of the primary.
fn primary_and_replica_of_other_configs(extra: &[&str]) -> (Server, Server, Connection) {
    let primary = Server::build()
        .hooked()
        .args(&["--imid.seq-idmp-ttl", "10"])
        .start();
    let replica = primary.hooked_replica(&[extra, &REPLICA_IDMP].concat());
    let mut p = primary.client();
    freeze(&mut p, 1_800_000_000_000u64);
    assert_eq!(idmp(&mut p, "k", "a", 1), (1, 0));
    primary.wait_replica(&replica);
    (primary, replica, p)
}

#[test]
fn a_replica_restarted_from_its_own_rdb_keeps_the_primarys_clock() {
    // The primary writes its clock once for a frozen second. A replica that restarts from its
    // own RDB file and continues the stream (a partial resync) must take the clock from that
    // file's aux data: its own clock and configs (unfrozen, another TTL and maximum) would
    // give other expiries.
    let (primary, mut replica, mut p) = primary_and_replica_of_other_configs(&[]);
    ok(&mut replica.client(), &["SAVE"]);
    replica.kill();
    replica.restart();
    replica.wait_link_up();
    assert_eq!(
        primary.info_field("stats", "sync_partial_ok").as_deref(),
        Some("1"),
        "the replica continued the stream"
    );
    assert_eq!(idmp(&mut p, "k", "b", 1), (2, 0));
    assert_eq!(idmp(&mut p, "k", "a", 1), (1, 1));
    primary.wait_replica(&replica);
    assert_eq!(digest(&replica), digest(&primary));
}

#[test]
fn a_replicas_own_aof_gets_the_clock_again_after_its_rewrite() {
    // The replica writes what it replays to its own AOF. Its rewrite forks, and the primary
    // writes no clock for this frozen second: the replica must write the clock it holds before
    // the next IDMP call it replays (src/node/idmp_clock.rs). Without the RDB preamble the
    // rewritten base has no aux data to carry it.
    let aof = aof_always("no");
    let (primary, mut replica, mut p) = primary_and_replica_of_other_configs(&aof);
    // (a replica rewrites its AOF after a full sync on its own: let that finish first)
    replica.wait_for_aof_rewrite();
    replica.rewrite_aof();
    assert_eq!(clocks_in_aof(&replica), 0, "a new incremental file");
    assert_eq!(idmp(&mut p, "k", "b", 1), (2, 0));
    primary.wait_replica(&replica);
    assert_eq!(clocks_in_aof(&replica), 1, "the replica wrote its clock");
    let want = digest(&primary);
    assert_eq!(digest(&replica), want);
    // replayed alone from its own AOF (no primary), it reaches the same tokens
    replica.restart_with(&[&aof[..], &REPLICA_IDMP].concat());
    assert_eq!(digest(&replica), want);
}

#[test]
fn a_write_on_a_writable_replica_leaves_the_primarys_clock_alone() {
    // A client's IDMP call on a writable replica (`replica-read-only no`) decides by that
    // node's own clock and configs, and must not change the clock the primary's calls replay
    // by (src/node/idmp_clock.rs).
    let (primary, replica, mut p) =
        primary_and_replica_of_other_configs(&["--replica-read-only", "no"]);
    let mut r = replica.client();
    // (a replica's data is inherited: the new key skips the gap)
    assert_eq!(idmp(&mut r, "local", "x", 1), (1001, 0));
    assert_eq!(idmp(&mut p, "k", "b", 1), (2, 0));
    primary.wait_replica(&replica);
    let value = |con: &mut Connection| -> Vec<String> {
        cmd(con, &["DEBUG", "DIGEST-VALUE", "k"]).unwrap()
    };
    assert_eq!(value(&mut r), value(&mut p));
}

/// MEMORY USAGE of keys with 100,000 tokens of 36 bytes (a sequence key's window and a map's)
/// is within 5% of what the server allocated for them: the window's estimate
/// (`src/core/idmp.rs`, `Window::heap_bytes`) counts what it holds. At this size the
/// connection's buffers are noise.
#[test]
fn memory_usage_counts_what_the_tokens_allocate() {
    const N: usize = 100_000;
    let s = Server::with(&["--imid.seq-idmp-max", &N.to_string()]);
    let mut con = s.client();
    let used = || -> i64 {
        let v = s.info_field("memory", "used_memory").expect("used_memory");
        v.trim().parse().expect("used_memory is a number")
    };
    for (key, field) in [("k", None), ("m", Some("f"))] {
        let before = used();
        for chunk in 0..N / 1000 {
            let mut pipe = redis::pipe();
            for i in chunk * 1000..(chunk + 1) * 1000 {
                let token = format!("{i:036}");
                let c = pipe.cmd(if field.is_some() {
                    "SEQ.HNEXT"
                } else {
                    "SEQ.NEXT"
                });
                c.arg(key);
                if let Some(f) = field {
                    c.arg(f);
                }
                c.arg("IDMP").arg(token).ignore();
            }
            let _: () = pipe.query(&mut con).unwrap();
        }
        let allocated = used() - before;
        let usage = int_reply(&mut con, &["MEMORY", "USAGE", key]);
        println!(
            "{key}: MEMORY USAGE {usage}, used_memory +{allocated} for {N} tokens ({} bytes per token)",
            usage / N as i64
        );
        assert!(
            usage * 100 >= allocated * 95 && usage * 100 <= allocated * 105,
            "{key}: MEMORY USAGE {usage} against {allocated} allocated"
        );
        // the newest token answers as a retry
        let last: Made = (
            key.into(),
            field.map(Into::into),
            format!("{:036}", N - 1),
            1,
            0,
        );
        assert_eq!(again(&mut con, &last).1, 1, "{key}");
    }
}

/// The module id (encoding version bits cleared) and RDB version trailer of a real DUMP of
/// `key`, which `make` creates.
fn dump_id(con: &mut Connection, key: &str, make: &[&str]) -> (u64, [u8; 2]) {
    let _: Value = cmd(con, make).unwrap();
    let p: Vec<u8> = redis::cmd("DUMP").arg(key).query(con).unwrap();
    assert_eq!(
        (p[0], p[1]),
        (7, 0x81),
        "a module value, its id as a 64-bit length"
    );
    let id = u64::from_be_bytes(p[2..10].try_into().unwrap());
    let n = p.len();
    (id & !1023, [p[n - 10], p[n - 9]])
}

/// The fingerprint of a map's request in encoding version 1: 64-bit FNV-1a of the field and
/// the count (little-endian).
fn fnv1a(field: &[u8], count: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in field.iter().chain(count.to_le_bytes().iter()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One token as the RDB holds it: token, last, expiry, fingerprint.
fn token_fields(token: &[u8], last: u64, expires: u64, fp: u64) -> Vec<u8> {
    let mut b = string_field(token);
    b.extend(field(OP_UINT, last));
    b.extend(field(OP_UINT, expires));
    b.extend(field(OP_UINT, fp));
    b
}

/// The body of a map in encoding version 1 (a token's request kept as its fingerprint): field
/// `a` at 5 and one token `tok` (last 5, expiring at `expires`) whose fingerprint is FNV-1a of
/// its request.
fn map_of_one_token(expires: u64) -> Vec<u8> {
    let mut b = field(OP_UINT, 1);
    b.extend(string_field(b"\x00a\x05"));
    b.extend(field(OP_UINT, 0));
    b.extend(field(OP_UINT, 1));
    b.extend(token_fields(b"tok", 5, expires, fnv1a(b"a", 1)));
    b.extend(rdb_len(OP_EOF));
    b
}

fn restore(con: &mut Connection, key: &str, payload: &[u8]) -> redis::RedisResult<String> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .query(con)
}

#[test]
fn a_token_expiry_past_2_63_is_refused_where_it_enters() {
    // The AOF and the replication stream write a token's expiry as a signed 64-bit integer:
    // one of 2^63 or more, once accepted, became a negative number in an AOF rewrite without
    // the RDB preamble, SEQ.IDMPSET refused it at load and the retry reserved a second time.
    // So a RESTOREd key (of either type), an IDMP clock (the module clock, SEQ.IDMPCLOCK) and
    // an RDB file's clock (seq_persistence.rs) are refused where such an expiry would enter;
    // 2^63-1 itself goes through the AOF and back.
    const MAX: u64 = i64::MAX as u64;
    let args = [&aof_always("no")[..], &["--loglevel", "verbose"]].concat();
    let mut s = Server::build().hooked().args(&args).start();
    let mut con = s.client();
    let (seq_id, seq_ver) = dump_id(&mut con, "t1", &["SEQ.SET", "t1", "1"]);
    let (map_id, map_ver) = dump_id(&mut con, "t2", &["SEQ.HSET", "t2", "a", "1"]);
    // A sequence at 5 (flags 1: tokens follow), one token; a map of field a at 5 (encoding
    // version 1), one token whose fingerprint is FNV-1a of its request.
    let seq = |expires: u64| {
        let mut b = field(OP_UINT, 5);
        b.extend(field(OP_UINT, 1));
        b.extend(field(OP_UINT, 1));
        b.extend(token_fields(b"tok", 5, expires, 1));
        b.extend(rdb_len(OP_EOF));
        payload(seq_id | 3, &b, seq_ver)
    };
    let map = |expires: u64| payload(map_id | 1, &map_of_one_token(expires), map_ver);
    for expires in [MAX + 1, u64::MAX] {
        for (key, p) in [("s", seq(expires)), ("m", map(expires))] {
            let e = restore(&mut con, key, &p).unwrap_err();
            assert!(
                err_text(&e).starts_with("ERR Bad data format"),
                "{key}: {e}"
            );
            assert_eq!(int_reply(&mut con, &["EXISTS", key]), 0);
        }
    }
    assert_eq!(restore(&mut con, "s", &seq(MAX)).unwrap(), "OK");
    assert_eq!(restore(&mut con, "m", &map(MAX)).unwrap(), "OK");
    // (a refused RESTORE is logged at verbose, an RDB file's at warning)
    let log = std::fs::read_to_string(s.dir.join("redis.log")).unwrap();
    assert!(
        log.contains(&format!("token expiry {} above {MAX}", MAX + 1)),
        "{log}"
    );

    // The module clock: a token recorded 1 ms later than MAX - ttl would expire past 2^63-1.
    // Refused, nothing written (no clock, no call in the AOF); at MAX - ttl it works.
    let ttl = 300_000;
    freeze(&mut con, MAX - ttl + 1);
    for call in [
        &["SEQ.NEXT", "c", "IDMP", "tok"][..],
        &["SEQ.HNEXT", "h", "f", "IDMP", "tok"],
    ] {
        let a: Vec<&[u8]> = call.iter().map(|a| a.as_bytes()).collect();
        let e = expect_err(&mut con, &a);
        assert!(
            e.starts_with(&format!(
                "ERR IDMP clock {} ms plus the token lifetime {ttl} ms passes 2^63-1 ms",
                MAX - ttl + 1
            )),
            "{call:?}: {e}"
        );
    }
    assert_eq!(int_reply(&mut con, &["EXISTS", "c", "h"]), 0);
    assert_eq!(clocks_in_aof(&s), 0, "no clock written");
    // SEQ.IDMPCLOCK checks the same bound (as replayed; a client's is refused after it)
    let e = expect_err(
        &mut con,
        &[
            b"SEQ.IDMPCLOCK",
            (MAX - 999).to_string().as_bytes(),
            b"1000",
            b"5",
        ],
    );
    assert!(
        e.starts_with("ERR ms + ttl-ms must be at most 9223372036854775807"),
        "{e}"
    );
    freeze(&mut con, MAX - ttl);
    assert_eq!(idmp(&mut con, "c", "tok", 1), (1, 0));
    assert_eq!(hidmp(&mut con, "h", "f", "tok", 1), (1, 0));

    // What the user sees: rewritten without the preamble (SEQ.IDMPSET / SEQ.HIDMPSET with
    // the expiry as a number), restarted on the AOF, every retry is still a duplicate.
    s.rewrite_aof();
    let want = digest(&s);
    s.kill();
    s.restart();
    let mut con = s.client();
    assert_eq!(digest(&s), want);
    let log = std::fs::read_to_string(s.dir.join("redis.log")).unwrap();
    assert!(!log.contains("CRITICAL"), "the AOF replays whole: {log}");
    assert_eq!(idmp(&mut con, "s", "tok", 1), (5, 1));
    assert_eq!(hidmp(&mut con, "m", "a", "tok", 1), (5, 1));
    assert_eq!(idmp(&mut con, "c", "tok", 1), (1, 1));
    assert_eq!(hidmp(&mut con, "h", "f", "tok", 1), (1, 1));
}

#[test]
fn a_refused_or_answered_idmp_call_writes_nothing() {
    // docs/durability.md: an error replicates nothing, and a retry answered from its token
    // replicates nothing. Before, such a call still moved the IDMP clock and wrote it
    // (SEQ.IDMPCLOCK) to replicas and the AOF.
    let s = Server::build().hooked().args(&AOF_ALWAYS).start();
    let mut con = s.client();
    let replica = s.hooked_replica(&[]);
    let t0 = 1_800_000_000_000u64;
    freeze(&mut con, t0);
    let _: String = cmd(&mut con, &["SET", "str", "x"]).unwrap();
    ok(&mut con, &["SEQ.SET", "full", "9223372036854775807"]);
    int_reply(&mut con, &["SEQ.HSET", "mfull", "f", "9223372036854775807"]);
    // Every way an IDMP call fails: WRONGTYPE, an overflow, a token used for another request
    // (the last two find the tokens recorded below).
    let refusals: [(&[&str], &str); 6] = [
        (&["SEQ.NEXT", "str", "IDMP", "t"], "WRONGTYPE"),
        (&["SEQ.HNEXT", "str", "f", "IDMP", "t"], "WRONGTYPE"),
        (&["SEQ.NEXT", "full", "IDMP", "t"], "ERR sequence overflow"),
        (
            &["SEQ.HNEXT", "mfull", "f", "IDMP", "t"],
            "ERR sequence overflow",
        ),
        (
            &["SEQ.NEXT", "k", "COUNT", "2", "IDMP", "a"],
            "ERR IDMP token already used",
        ),
        (
            &["SEQ.HNEXT", "m", "g", "IDMP", "a"],
            "ERR IDMP token already used",
        ),
    ];
    let refuse = |con: &mut Connection, calls: &[(&[&str], &str)]| {
        for (call, want) in calls {
            let a: Vec<&[u8]> = call.iter().map(|a| a.as_bytes()).collect();
            let e = expect_err(con, &a);
            assert!(e.starts_with(want), "{call:?}: {e}");
        }
    };
    // No clock yet: the refusals write none.
    refuse(&mut con, &refusals[..4]);
    assert_eq!(clocks_in_aof(&s), 0, "refused calls wrote no clock");
    assert_eq!(idmp(&mut con, "k", "a", 1), (1, 0));
    assert_eq!(hidmp(&mut con, "m", "f", "a", 1), (1, 0));
    assert_eq!(
        clocks_in_aof(&s),
        1,
        "the first call that reserved wrote it"
    );
    // Two seconds later the clock would move: every refusal and every retry leaves it.
    freeze(&mut con, t0 + 2_000);
    refuse(&mut con, &refusals);
    assert_eq!(idmp(&mut con, "k", "a", 1), (1, 1));
    assert_eq!(hidmp(&mut con, "m", "f", "a", 1), (1, 1));
    assert_eq!(clocks_in_aof(&s), 1, "no call since wrote a clock");
    s.wait_replica(&replica);
    assert_eq!(digest(&replica), digest(&s));
    // A call that reserves moves it, and the replica follows.
    assert_eq!(idmp(&mut con, "k", "b", 1), (2, 0));
    assert_eq!(clocks_in_aof(&s), 2);
    s.wait_replica(&replica);
    assert_eq!(digest(&replica), digest(&s));
}

/// Two field names whose 64-bit FNV-1a fingerprints with COUNT 3 collide (issue 28: found by a
/// birthday search in two minutes).
const CRAFTED: [&[u8]; 2] = [
    &[0x46, 0xe9, 0xc7, 0x40, 0x61, 0x37, 0x7e, 0xf1, 0xa7],
    &[0x46, 0xbc, 0x73, 0x36, 0x8d, 0xbe, 0x2e, 0xea, 0xd0],
];

/// `SEQ.HNEXT key field COUNT count IDMP token` with a binary field.
fn hnext_bytes(
    con: &mut Connection,
    key: &str,
    field: &[u8],
    count: u64,
    token: &str,
) -> redis::RedisResult<Vec<i64>> {
    redis::cmd("SEQ.HNEXT")
        .arg(key)
        .arg(field)
        .arg("COUNT")
        .arg(count)
        .arg("IDMP")
        .arg(token)
        .query(con)
}

/// The crafted pair on `m` under token `tok`: the first field's retry is a duplicate of
/// `last`, the second field is refused, wherever the map went.
fn crafted_pair_holds(con: &mut Connection, m: &str, last: i64, what: &str) {
    assert_eq!(
        hnext_bytes(con, m, CRAFTED[0], 3, "tok").unwrap(),
        [last, 1],
        "{what}"
    );
    let e = hnext_bytes(con, m, CRAFTED[1], 3, "tok").unwrap_err();
    assert!(
        err_text(&e)
            .starts_with("ERR IDMP token already used on this key with another field or COUNT"),
        "{what}: {e}"
    );
}

#[test]
fn a_crafted_field_never_gets_another_fields_answer() {
    // The token keeps the field and COUNT themselves: two fields whose old 64-bit fingerprints
    // collide are two requests, on the primary, a replica (as called and by the explicit
    // effect), through RDB, RESTORE and an AOF rewrite without the RDB preamble.
    let args = [&aof_always("no")[..], &["--save", ""]].concat();
    let mut s = Server::with(&args);
    let replica = s.replica(&[]);
    let mut con = s.client();
    assert_eq!(
        hnext_bytes(&mut con, "m", CRAFTED[0], 3, "tok").unwrap(),
        [3, 0]
    );
    crafted_pair_holds(&mut con, "m", 3, "primary");
    // Loaded (DEBUG RELOAD marks the fields): the next IDMP call skips the gap, so it goes as
    // its explicit effect, SEQ.HIDMPSET ... COUNT n FIELD f SET.
    ok(&mut con, &["DEBUG", "RELOAD"]);
    crafted_pair_holds(&mut con, "m", 3, "RDB");
    assert_eq!(
        hnext_bytes(&mut con, "m", CRAFTED[1], 2, "tok2").unwrap(),
        [1002, 0]
    );
    s.wait_replica(&replica);
    let r_info: String = cmd(&mut replica.client(), &["INFO", "commandstats"]).unwrap();
    assert!(r_info.contains("cmdstat_seq.hidmpset"), "{r_info}");
    assert_eq!(digest(&replica), digest(&s));
    let dump: Vec<u8> = redis::cmd("DUMP").arg("m").query(&mut con).unwrap();
    assert_eq!(restore(&mut con, "m2", &dump).unwrap(), "OK");
    crafted_pair_holds(&mut con, "m2", 3, "RESTORE");
    let e = hnext_bytes(&mut con, "m2", CRAFTED[0], 2, "tok2").unwrap_err();
    assert!(err_text(&e).contains("another field or COUNT"), "{e}");
    // The replica's copy holds the requests too: promoted, it refuses the same way.
    let mut r = replica.client();
    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    crafted_pair_holds(&mut r, "m", 3, "replica");
    drop(replica);
    // An AOF rewrite without the preamble writes each token with its request.
    s.rewrite_aof();
    let (_, base) = aof_base(&s);
    assert!(
        contains(&base, b"FIELD"),
        "the rewrite's SEQ.HIDMPSET names the field"
    );
    let want = digest(&s);
    s.kill();
    s.restart();
    let mut con = s.client();
    assert_eq!(digest(&s), want);
    crafted_pair_holds(&mut con, "m", 3, "AOF");
    crafted_pair_holds(&mut con, "m2", 3, "AOF");
    assert_eq!(
        hnext_bytes(&mut con, "m", CRAFTED[1], 2, "tok2").unwrap(),
        [1002, 1]
    );
}

#[test]
fn map_tokens_of_older_builds_still_answer_their_retries() {
    // Builds before the request was kept whole saved a fingerprint of it (RDB: map flags 0;
    // AOF and streams: SEQ.HIDMPSET's first form). Such a token loads and answers its retry
    // until it leaves the window, through a save and a reload in this build's layout.
    let mut s = Server::with(&aof_always("no"));
    let mut con = s.client();
    let (map_id, map_ver) = dump_id(&mut con, "t2", &["SEQ.HSET", "t2", "a", "1"]);
    let far = 4_000_000_000_000u64;
    let b = map_of_one_token(far);
    assert_eq!(
        restore(&mut con, "old", &payload(map_id | 1, &b, map_ver)).unwrap(),
        "OK"
    );
    // SEQ.HIDMPSET's first form, as an older primary or AOF sends it: with a field (set to
    // last) and without.
    ok(
        &mut con,
        &[
            "SEQ.HIDMPSET",
            "old2",
            "tok",
            "7",
            &far.to_string(),
            &(fnv1a(b"b", 2) as i64).to_string(),
            "0",
            "b",
        ],
    );
    let e = expect_err(
        &mut con,
        &[b"SEQ.HIDMPSET", b"nokey", b"t", b"1", b"1", b"1", b"0"],
    );
    assert!(e.starts_with("ERR no such key"), "{e}");
    let check = |con: &mut Connection, what: &str| {
        assert_eq!(hidmp(con, "old", "a", "tok", 1), (5, 1), "{what}");
        assert_eq!(hidmp(con, "old2", "b", "tok", 2), (7, 1), "{what}");
        for (key, field, count) in [("old", "b", 1), ("old", "a", 2), ("old2", "b", 1)] {
            let e = expect_err(
                con,
                &[
                    b"SEQ.HNEXT",
                    key.as_bytes(),
                    field.as_bytes(),
                    b"COUNT",
                    count.to_string().as_bytes(),
                    b"IDMP",
                    b"tok",
                ],
            );
            assert!(e.contains("another field or COUNT"), "{what}: {e}");
        }
    };
    check(&mut con, "loaded");
    ok(&mut con, &["DEBUG", "RELOAD"]);
    check(&mut con, "saved and reloaded");
    s.rewrite_aof();
    s.kill();
    s.restart();
    check(&mut s.client(), "rewritten AOF");
}
