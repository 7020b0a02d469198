//! SEQ.* command semantics against a real server: replies, every error path, concurrency,
//! scripts, transactions, command metadata and memory.
use crate::common;
use common::*;
use std::collections::HashMap;

const MAX: &str = "9223372036854775807";

#[test]
fn next_get_mget_set_advance_replies() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "a"]), 0);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 1);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 2);
    assert_eq!(int_reply(&mut con, &["seq.next", "a", "count", "10"]), 12);
    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "a", "CoUnT", "1000000"]),
        1_000_012
    );
    // last COUNT wins, as in Redis's own option parsing
    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "a", "COUNT", "5", "COUNT", "2"]),
        1_000_014
    );
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "a"]), 1_000_014);
    let t: String = cmd(&mut con, &["TYPE", "a"]).unwrap();
    assert_eq!(t, "imidseq01");

    let v: Vec<i64> = cmd(&mut con, &["SEQ.MGET", "a", "missing", "a"]).unwrap();
    assert_eq!(v, [1_000_014, 0, 1_000_014]);

    let ok: String = cmd(&mut con, &["SEQ.SET", "b", "41"]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "b"]), 42);
    let ok: String = cmd(&mut con, &["SEQ.SET", "b", "7"]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "b"]), 7);
    let ok: String = cmd(&mut con, &["SEQ.SET", "zero", "0"]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(int_reply(&mut con, &["EXISTS", "zero"]), 1);

    assert_eq!(int_reply(&mut con, &["SEQ.ADVANCE", "c", "0"]), 0);
    assert_eq!(
        int_reply(&mut con, &["EXISTS", "c"]),
        0,
        "advancing to 0 creates nothing"
    );
    assert_eq!(int_reply(&mut con, &["SEQ.ADVANCE", "c", "10"]), 10);
    assert_eq!(int_reply(&mut con, &["SEQ.ADVANCE", "c", "3"]), 10);
    assert_eq!(int_reply(&mut con, &["SEQ.ADVANCE", "c", "11"]), 11);
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "c"]), 11);

    // the full range
    let ok: String = cmd(&mut con, &["SEQ.SET", "m", MAX]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "m"]), i64::MAX);
    assert_eq!(int_reply(&mut con, &["SEQ.ADVANCE", "n", MAX]), i64::MAX);
}

#[test]
fn writes_keep_the_ttl() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "k"]), 1);
    assert_eq!(int_reply(&mut con, &["EXPIRE", "k", "1000"]), 1);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "k"]), 2);
    assert_eq!(int_reply(&mut con, &["SEQ.ADVANCE", "k", "9"]), 9);
    let _: String = cmd(&mut con, &["SEQ.SET", "k", "20"]).unwrap();
    let ttl = int_reply(&mut con, &["TTL", "k"]);
    assert!(ttl > 0 && ttl <= 1000, "ttl {ttl}");
}

#[test]
fn overflow_is_an_error_and_changes_nothing() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let _: String = cmd(&mut con, &["SEQ.SET", "k", "9223372036854775806"]).unwrap();
    let e = expect_err(&mut con, &[b"SEQ.NEXT", b"k", b"COUNT", b"2"]);
    assert_eq!(e, "ERR sequence overflow");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "k"]), i64::MAX - 1);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "k"]), i64::MAX);
    let e = expect_err(&mut con, &[b"SEQ.NEXT", b"k"]);
    assert_eq!(e, "ERR sequence overflow");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "k"]), i64::MAX);
    assert_eq!(s.imid_stat("seq_issued"), 1);
}

#[test]
fn every_error_names_its_rule() {
    let s = Server::start();
    let mut con = s.client();
    let _: String = cmd(&mut con, &["SET", "str", "x"]).unwrap();
    let _: String = cmd(&mut con, &["SEQ.SET", "k", "5"]).unwrap();
    let arity = [
        "SEQ.NEXT",
        "SEQ.GET",
        "SEQ.GET a b",
        "SEQ.MGET",
        "SEQ.SET k",
    ];
    let arity = ["SEQ.SET k 1 2", "SEQ.ADVANCE k"].into_iter().chain(arity);
    let arity: Vec<(&str, String)> = arity
        .map(|call| {
            let name = call.split(' ').next().unwrap_or("").to_lowercase();
            (
                call,
                format!("ERR wrong number of arguments for '{name}' command"),
            )
        })
        .collect();
    let mut rows: Vec<Refused> = arity
        .iter()
        .map(|(c, e)| (*c, &[][..], e.as_str()))
        .collect();
    rows.extend_from_slice(&[
        // a fourth argument can only start `LIMIT seqkey`
        ("SEQ.ADVANCE k 1 _", &["2", "LIMIT"], SYNTAX),
        ("SEQ.NEXT k COUNT", &[], SYNTAX),
        ("SEQ.NEXT k COUNTS 2", &[], SYNTAX),
        ("SEQ.NEXT k 1", &[], SYNTAX),
        ("SEQ.NEXT k COUNT 2 X", &[], SYNTAX),
        (
            "SEQ.NEXT k COUNT _",
            &["0", "1000001", "-1", "1.5", "two"],
            COUNT,
        ),
        (
            "SEQ.SET k _",
            &["-1", "9223372036854775808", "abc", "", " 1"],
            VALUE,
        ),
        ("SEQ.ADVANCE k _", &["-1", "9223372036854775808"], VALUE),
        ("SEQ.NEXT str", &[], WRONGTYPE),
        ("SEQ.NEXT str COUNT 3", &[], WRONGTYPE),
        ("SEQ.GET str", &[], WRONGTYPE),
        ("SEQ.MGET k str", &[], WRONGTYPE),
        ("SEQ.SET str 1", &[], WRONGTYPE),
        ("SEQ.ADVANCE str 1", &[], WRONGTYPE),
        // arguments are checked before the key's type
        ("SEQ.NEXT str COUNT 0", &[], COUNT),
        ("SEQ.SET str -1", &[], VALUE),
    ]);
    // the whole error text, not only its start; imid's WRONGTYPE goes on to name the key and
    // what it holds (issue 46)
    let wrongtype = format!(
        "{WRONGTYPE}: str holds a string, not an imid sequence (an INCR counter becomes one in \
         place, with its value: SEQ.CONVERT key)"
    );
    for (args, want) in refusals(&rows) {
        let want = if want == WRONGTYPE {
            wrongtype.as_str()
        } else {
            want
        };
        assert_eq!(expect_err(&mut con, &bytes(&args)), want, "{args:?}");
    }
    // nothing was touched by any of them
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "k"]), 5);
    let v: String = cmd(&mut con, &["GET", "str"]).unwrap();
    assert_eq!(v, "x");
    assert_eq!(int_reply(&mut con, &["DBSIZE"]), 2);
    // and GET on our type is Redis's own WRONGTYPE
    let e = expect_err(&mut con, &[b"GET", b"k"]);
    assert_eq!(e, WRONGTYPE);
}

#[test]
fn binary_key_names_work() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let key: &[u8] = b"conv:\x00\xff\r\n";
    let v: i64 = redis::cmd("SEQ.NEXT").arg(key).query(&mut con).unwrap();
    assert_eq!(v, 1);
    let v: i64 = redis::cmd("SEQ.GET").arg(key).query(&mut con).unwrap();
    assert_eq!(v, 1);
}

/// 50 connections × 2,000 pipelined SEQ.NEXT over 10 keys: every key hands out exactly 1..N.
#[test]
fn concurrent_clients_get_each_value_exactly_once() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let got = on_clients(&s, 50, |t, con| {
        let mut pipe = redis::pipe();
        let keys: Vec<String> = (0..2000).map(|i| format!("k{}", (t + i) % 10)).collect();
        for k in &keys {
            pipe.cmd("SEQ.NEXT").arg(k);
        }
        let got: Vec<i64> = pipe.query(con).unwrap();
        keys.into_iter().zip(got).collect::<Vec<_>>()
    });
    let mut per_key: HashMap<String, Vec<i64>> = HashMap::new();
    for (k, v) in got.into_iter().flatten() {
        per_key.entry(k).or_default().push(v);
    }
    assert_eq!(per_key.len(), 10);
    let mut con = s.client();
    for (k, mut vs) in per_key {
        vs.sort_unstable();
        let n = vs.len() as i64;
        assert_eq!(n, 10_000, "{k}");
        assert!(
            vs.iter().copied().eq(1..=n),
            "{k}: values are not exactly 1..{n}"
        );
        assert_eq!(int_reply(&mut con, &["SEQ.GET", &k]), n);
    }
    assert_eq!(s.imid_stat("seq_issued"), 100_000);
}

#[test]
fn works_in_lua_functions_and_transactions() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let script = "local s = redis.call('SEQ.NEXT', KEYS[1]) \
                  redis.call('ZADD', KEYS[2], s, ARGV[1]) return s";
    let v: i64 = cmd(
        &mut con,
        &["EVAL", script, "2", "{c}:seq", "{c}:inbox", "m1"],
    )
    .unwrap();
    assert_eq!(v, 1);
    let v: i64 = cmd(
        &mut con,
        &["EVAL", script, "2", "{c}:seq", "{c}:inbox", "m2"],
    )
    .unwrap();
    assert_eq!(v, 2);
    let inbox: Vec<(String, i64)> =
        cmd(&mut con, &["ZRANGE", "{c}:inbox", "0", "-1", "WITHSCORES"]).unwrap();
    assert_eq!(inbox, [("m1".to_owned(), 1), ("m2".to_owned(), 2)]);
    // an error inside the script surfaces as a script error, not a crash
    let e = cmd::<i64>(
        &mut con,
        &[
            "EVAL",
            "return redis.call('SEQ.NEXT', KEYS[1], 'COUNT', '0')",
            "1",
            "x",
        ],
    )
    .unwrap_err();
    assert!(err_text(&e).contains("COUNT must be an integer"), "{e}");

    let lib = "#!lua name=seqlib\n\
               redis.register_function('seq_next', function(keys, args) return redis.call('SEQ.NEXT', keys[1]) end)\n\
               redis.register_function{function_name='seq_get', callback=function(keys, args) return redis.call('SEQ.GET', keys[1]) end, flags={'no-writes'}}";
    let name: String = cmd(&mut con, &["FUNCTION", "LOAD", lib]).unwrap();
    assert_eq!(name, "seqlib");
    assert_eq!(
        int_reply(&mut con, &["FCALL", "seq_next", "1", "{c}:seq"]),
        3
    );
    assert_eq!(
        int_reply(&mut con, &["FCALL_RO", "seq_get", "1", "{c}:seq"]),
        3
    );
    // a read-only function may not call a write command
    let e = cmd::<i64>(&mut con, &["FCALL_RO", "seq_next", "1", "{c}:seq"]).unwrap_err();
    assert!(!err_text(&e).is_empty());

    let (a, b, g): (i64, i64, i64) = redis::pipe()
        .atomic()
        .cmd("SEQ.NEXT")
        .arg("{c}:seq")
        .cmd("SEQ.NEXT")
        .arg("{c}:seq")
        .arg("COUNT")
        .arg(10)
        .cmd("SEQ.GET")
        .arg("{c}:seq")
        .query(&mut con)
        .unwrap();
    assert_eq!((a, b, g), (4, 14, 14));
}

#[test]
fn info_counts_issued_values() {
    let s = Server::start();
    let mut con = s.client();
    assert_eq!(s.imid_stat("seq_issued"), 0);
    assert_eq!(s.imid_stat("seq_gap_skips"), 0);
    int_reply(&mut con, &["SEQ.NEXT", "a"]);
    int_reply(&mut con, &["SEQ.NEXT", "a", "COUNT", "100"]);
    int_reply(&mut con, &["SEQ.NEXT", "b", "COUNT", "5"]);
    assert_eq!(s.imid_stat("seq_issued"), 106);
    // writes issued by this process never skip
    assert_eq!(s.imid_stat("seq_gap_skips"), 0);
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "a"]), 101);
}

#[test]
fn copy_and_memory_usage() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let big = "9223372036854775000";
    let _: String = cmd(&mut con, &["SEQ.SET", "seq", big]).unwrap();
    let _: String = cmd(&mut con, &["SET", "str", "9223372036854774999"]).unwrap();
    assert_eq!(int_reply(&mut con, &["INCR", "str"]), 9223372036854775000);
    let seq_mem = int_reply(&mut con, &["MEMORY", "USAGE", "seq"]);
    let str_mem = int_reply(&mut con, &["MEMORY", "USAGE", "str"]);
    println!("MEMORY USAGE: sequence key {seq_mem} bytes, INCR string key {str_mem} bytes");
    assert!(seq_mem > 0 && str_mem > 0);

    assert_eq!(int_reply(&mut con, &["COPY", "seq", "seq2"]), 1);
    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "seq2"]),
        9223372036854775001
    );
    assert_eq!(
        int_reply(&mut con, &["SEQ.GET", "seq"]),
        9223372036854775000,
        "the copy is independent"
    );
    let d1: Vec<String> = cmd(&mut con, &["DEBUG", "DIGEST-VALUE", "seq"]).unwrap();
    let _: String = cmd(&mut con, &["SEQ.SET", "seq2", big]).unwrap();
    let d2: Vec<String> = cmd(&mut con, &["DEBUG", "DIGEST-VALUE", "seq2"]).unwrap();
    assert_eq!(d1, d2);
    let _: String = cmd(&mut con, &["SEQ.SET", "seq2", "1"]).unwrap();
    let d3: Vec<String> = cmd(&mut con, &["DEBUG", "DIGEST-VALUE", "seq2"]).unwrap();
    assert_ne!(d1, d3);
    // delete and flush run the (empty) free callback
    assert_eq!(int_reply(&mut con, &["DEL", "seq2"]), 1);
    assert_eq!(int_reply(&mut con, &["UNLINK", "seq"]), 1);
    let _: String = cmd(&mut con, &["FLUSHALL"]).unwrap();
    let pong: String = cmd(&mut con, &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn no_op_writes_do_not_break_watch() {
    let s = Server::start();
    let mut con = s.client();
    let _: String = cmd(&mut con, &["SEQ.SET", "k", "10"]).unwrap();
    assert!(
        exec_survives(&s, "k", &["SEQ.ADVANCE", "k", "5"]),
        "an older ack touched the key"
    );
    assert!(exec_survives(&s, "k", &["SEQ.ADVANCE", "k", "10"]));
    assert!(
        exec_survives(&s, "k", &["SEQ.SET", "k", "10"]),
        "setting the same value touched it"
    );
    assert!(exec_survives(&s, "k", &["SEQ.GET", "k"]));
    assert!(
        !exec_survives(&s, "k", &["SEQ.ADVANCE", "k", "11"]),
        "a real change must abort EXEC"
    );
    assert!(!exec_survives(&s, "k", &["SEQ.SET", "k", "3"]));
    assert!(!exec_survives(&s, "k", &["SEQ.NEXT", "k"]));
}

#[test]
fn writes_publish_keyspace_events_and_no_ops_do_not() {
    let s = Server::start();
    let mut con = s.client();
    config_set(&mut con, "notify-keyspace-events", "Kd");
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyspace@0__:conv*").unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "conv"]).unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.ADVANCE", "conv", "0"]).unwrap(); // no change: no event
    let _: String = cmd(&mut con, &["SEQ.SET", "conv", "7"]).unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.ADVANCE", "conv", "9"]).unwrap();
    // a marker: everything before it has been delivered (so no read waits for a missing event)
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "conv-end"]).unwrap();
    let events = keyspace_events(&mut ps, "conv", "conv-end");
    assert_eq!(events, ["seq.next", "seq.set", "seq.advance"]);
}

#[test]
fn imids_writes_raise_no_overwritten_or_type_changed_events_on_redis_8_6() {
    // Redis 8.4+'s keyspace events n (new), o (overwritten) and c (type_changed): imid replaces
    // its values in place, so a sequence key's writes raise `new` once, at its creation, and
    // imid's own events; a client's SET over it raises o and c, as over any type.
    let bin = newer_server!("redis8.6");
    let s = Server::build()
        .args(&["--notify-keyspace-events", "Kdnoc"])
        .bin(bin)
        .start();
    let mut con = s.client();
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyspace@0__:conv*").unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "conv"]).unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "conv"]).unwrap();
    let _: String = cmd(&mut con, &["SEQ.SET", "conv", "10"]).unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.ADVANCE", "conv", "20"]).unwrap();
    let _: Vec<i64> = cmd(&mut con, &["SEQ.NEXT", "conv", "IDMP", "t"]).unwrap();
    let _: String = cmd(&mut con, &["SET", "conv", "over"]).unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "conv-end"]).unwrap();
    let events = keyspace_events(&mut ps, "conv", "conv-end");
    assert_eq!(
        events,
        [
            "new",
            "seq.next",
            "seq.next",
            "seq.set",
            "seq.advance",
            "seq.next",
            "overwritten",
            "type_changed"
        ]
    );
}
