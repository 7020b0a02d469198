//! SEQ.* command semantics against a real server: replies, every error path, concurrency,
//! scripts, transactions, command metadata and memory.
use crate::common;
use common::*;
use std::collections::HashMap;

const MAX: &str = "9223372036854775807";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn next_get_mget_set_advance_replies() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    assert_eq!(int(&mut con, &["SEQ.GET", "a"]), 0);
    assert_eq!(int(&mut con, &["SEQ.NEXT", "a"]), 1);
    assert_eq!(int(&mut con, &["SEQ.NEXT", "a"]), 2);
    assert_eq!(int(&mut con, &["seq.next", "a", "count", "10"]), 12);
    assert_eq!(
        int(&mut con, &["SEQ.NEXT", "a", "CoUnT", "1000000"]),
        1_000_012
    );
    // last COUNT wins, as in Redis's own option parsing
    assert_eq!(
        int(&mut con, &["SEQ.NEXT", "a", "COUNT", "5", "COUNT", "2"]),
        1_000_014
    );
    assert_eq!(int(&mut con, &["SEQ.GET", "a"]), 1_000_014);
    let t: String = cmd(&mut con, &["TYPE", "a"]).unwrap();
    assert_eq!(t, "imidseq01");

    let v: Vec<i64> = cmd(&mut con, &["SEQ.MGET", "a", "missing", "a"]).unwrap();
    assert_eq!(v, [1_000_014, 0, 1_000_014]);

    let ok: String = cmd(&mut con, &["SEQ.SET", "b", "41"]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(int(&mut con, &["SEQ.NEXT", "b"]), 42);
    let ok: String = cmd(&mut con, &["SEQ.SET", "b", "7"]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(int(&mut con, &["SEQ.GET", "b"]), 7);
    let ok: String = cmd(&mut con, &["SEQ.SET", "zero", "0"]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(int(&mut con, &["EXISTS", "zero"]), 1);

    assert_eq!(int(&mut con, &["SEQ.ADVANCE", "c", "0"]), 0);
    assert_eq!(
        int(&mut con, &["EXISTS", "c"]),
        0,
        "advancing to 0 creates nothing"
    );
    assert_eq!(int(&mut con, &["SEQ.ADVANCE", "c", "10"]), 10);
    assert_eq!(int(&mut con, &["SEQ.ADVANCE", "c", "3"]), 10);
    assert_eq!(int(&mut con, &["SEQ.ADVANCE", "c", "11"]), 11);
    assert_eq!(int(&mut con, &["SEQ.GET", "c"]), 11);

    // the full range
    let ok: String = cmd(&mut con, &["SEQ.SET", "m", MAX]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(int(&mut con, &["SEQ.GET", "m"]), i64::MAX);
    assert_eq!(int(&mut con, &["SEQ.ADVANCE", "n", MAX]), i64::MAX);
}

#[test]
fn writes_keep_the_ttl() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    assert_eq!(int(&mut con, &["SEQ.NEXT", "k"]), 1);
    assert_eq!(int(&mut con, &["EXPIRE", "k", "1000"]), 1);
    assert_eq!(int(&mut con, &["SEQ.NEXT", "k"]), 2);
    assert_eq!(int(&mut con, &["SEQ.ADVANCE", "k", "9"]), 9);
    let _: String = cmd(&mut con, &["SEQ.SET", "k", "20"]).unwrap();
    let ttl = int(&mut con, &["TTL", "k"]);
    assert!(ttl > 0 && ttl <= 1000, "ttl {ttl}");
}

#[test]
fn overflow_is_an_error_and_changes_nothing() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let _: String = cmd(&mut con, &["SEQ.SET", "k", "9223372036854775806"]).unwrap();
    let e = expect_err(&mut con, &[b"SEQ.NEXT", b"k", b"COUNT", b"2"]);
    assert_eq!(e, "ERR sequence overflow");
    assert_eq!(int(&mut con, &["SEQ.GET", "k"]), i64::MAX - 1);
    assert_eq!(int(&mut con, &["SEQ.NEXT", "k"]), i64::MAX);
    let e = expect_err(&mut con, &[b"SEQ.NEXT", b"k"]);
    assert_eq!(e, "ERR sequence overflow");
    assert_eq!(int(&mut con, &["SEQ.GET", "k"]), i64::MAX);
    assert_eq!(s.imid_stat("seq_issued"), 1);
}

#[test]
fn every_error_names_its_rule() {
    let s = Server::start();
    let mut con = s.client();
    let _: String = cmd(&mut con, &["SET", "str", "x"]).unwrap();
    let _: String = cmd(&mut con, &["SEQ.SET", "k", "5"]).unwrap();
    let arity = |c: &str| format!("ERR wrong number of arguments for '{c}' command");
    let cases: &[(&[&[u8]], String)] = &[
        (&[b"SEQ.NEXT"], arity("seq.next")),
        (&[b"SEQ.GET"], arity("seq.get")),
        (&[b"SEQ.GET", b"a", b"b"], arity("seq.get")),
        (&[b"SEQ.MGET"], arity("seq.mget")),
        (&[b"SEQ.SET", b"k"], arity("seq.set")),
        (&[b"SEQ.SET", b"k", b"1", b"2"], arity("seq.set")),
        (&[b"SEQ.ADVANCE", b"k"], arity("seq.advance")),
        // a fourth argument can only start `LIMIT seqkey`
        (
            &[b"SEQ.ADVANCE", b"k", b"1", b"2"],
            "ERR syntax error".into(),
        ),
        (
            &[b"SEQ.ADVANCE", b"k", b"1", b"LIMIT"],
            "ERR syntax error".into(),
        ),
        (&[b"SEQ.NEXT", b"k", b"COUNT"], "ERR syntax error".into()),
        (
            &[b"SEQ.NEXT", b"k", b"COUNTS", b"2"],
            "ERR syntax error".into(),
        ),
        (&[b"SEQ.NEXT", b"k", b"1"], "ERR syntax error".into()),
        (
            &[b"SEQ.NEXT", b"k", b"COUNT", b"2", b"X"],
            "ERR syntax error".into(),
        ),
        (
            &[b"SEQ.NEXT", b"k", b"COUNT", b"0"],
            "ERR COUNT must be an integer in 1..1000000".into(),
        ),
        (
            &[b"SEQ.NEXT", b"k", b"COUNT", b"1000001"],
            "ERR COUNT must be an integer in 1..1000000".into(),
        ),
        (
            &[b"SEQ.NEXT", b"k", b"COUNT", b"-1"],
            "ERR COUNT must be an integer in 1..1000000".into(),
        ),
        (
            &[b"SEQ.NEXT", b"k", b"COUNT", b"1.5"],
            "ERR COUNT must be an integer in 1..1000000".into(),
        ),
        (
            &[b"SEQ.NEXT", b"k", b"COUNT", b"two"],
            "ERR COUNT must be an integer in 1..1000000".into(),
        ),
        (
            &[b"SEQ.SET", b"k", b"-1"],
            "ERR value must be an integer in 0..9223372036854775807".into(),
        ),
        (
            &[b"SEQ.SET", b"k", b"9223372036854775808"],
            "ERR value must be an integer in 0..9223372036854775807".into(),
        ),
        (
            &[b"SEQ.SET", b"k", b"abc"],
            "ERR value must be an integer in 0..9223372036854775807".into(),
        ),
        (
            &[b"SEQ.SET", b"k", b""],
            "ERR value must be an integer in 0..9223372036854775807".into(),
        ),
        (
            &[b"SEQ.SET", b"k", b" 1"],
            "ERR value must be an integer in 0..9223372036854775807".into(),
        ),
        (
            &[b"SEQ.ADVANCE", b"k", b"-1"],
            "ERR value must be an integer in 0..9223372036854775807".into(),
        ),
        (
            &[b"SEQ.ADVANCE", b"k", b"9223372036854775808"],
            "ERR value must be an integer in 0..9223372036854775807".into(),
        ),
        (&[b"SEQ.NEXT", b"str"], WRONGTYPE.into()),
        (&[b"SEQ.NEXT", b"str", b"COUNT", b"3"], WRONGTYPE.into()),
        (&[b"SEQ.GET", b"str"], WRONGTYPE.into()),
        (&[b"SEQ.MGET", b"k", b"str"], WRONGTYPE.into()),
        (&[b"SEQ.SET", b"str", b"1"], WRONGTYPE.into()),
        (&[b"SEQ.ADVANCE", b"str", b"1"], WRONGTYPE.into()),
        // arguments are checked before the key's type
        (
            &[b"SEQ.NEXT", b"str", b"COUNT", b"0"],
            "ERR COUNT must be an integer in 1..1000000".into(),
        ),
        (
            &[b"SEQ.SET", b"str", b"-1"],
            "ERR value must be an integer in 0..9223372036854775807".into(),
        ),
    ];
    for (args, want) in cases {
        let got = expect_err(&mut con, args);
        assert_eq!(
            &got,
            want,
            "{:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        );
        assert!(got.starts_with("ERR ") || got.starts_with("WRONGTYPE "));
    }
    // nothing was touched by any of them
    assert_eq!(int(&mut con, &["SEQ.GET", "k"]), 5);
    let v: String = cmd(&mut con, &["GET", "str"]).unwrap();
    assert_eq!(v, "x");
    assert_eq!(int(&mut con, &["DBSIZE"]), 2);
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
    let url = s.url();
    let threads: Vec<_> = (0..50)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut pipe = redis::pipe();
                let keys: Vec<String> = (0..2000).map(|i| format!("k{}", (t + i) % 10)).collect();
                for k in &keys {
                    pipe.cmd("SEQ.NEXT").arg(k);
                }
                let got: Vec<i64> = pipe.query(&mut con).unwrap();
                keys.into_iter().zip(got).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut per_key: HashMap<String, Vec<i64>> = HashMap::new();
    for t in threads {
        for (k, v) in t.join().unwrap() {
            per_key.entry(k).or_default().push(v);
        }
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
        assert_eq!(int(&mut con, &["SEQ.GET", &k]), n);
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
    assert_eq!(int(&mut con, &["FCALL", "seq_next", "1", "{c}:seq"]), 3);
    assert_eq!(int(&mut con, &["FCALL_RO", "seq_get", "1", "{c}:seq"]), 3);
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
    int(&mut con, &["SEQ.NEXT", "a"]);
    int(&mut con, &["SEQ.NEXT", "a", "COUNT", "100"]);
    int(&mut con, &["SEQ.NEXT", "b", "COUNT", "5"]);
    assert_eq!(s.imid_stat("seq_issued"), 106);
    // writes issued by this process never skip
    assert_eq!(s.imid_stat("seq_gap_skips"), 0);
    assert_eq!(int(&mut con, &["SEQ.GET", "a"]), 101);
}

#[test]
fn copy_and_memory_usage() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let big = "9223372036854775000";
    let _: String = cmd(&mut con, &["SEQ.SET", "seq", big]).unwrap();
    let _: String = cmd(&mut con, &["SET", "str", "9223372036854774999"]).unwrap();
    assert_eq!(int(&mut con, &["INCR", "str"]), 9223372036854775000);
    let seq_mem = int(&mut con, &["MEMORY", "USAGE", "seq"]);
    let str_mem = int(&mut con, &["MEMORY", "USAGE", "str"]);
    println!("MEMORY USAGE: sequence key {seq_mem} bytes, INCR string key {str_mem} bytes");
    assert!(seq_mem > 0 && str_mem > 0);

    assert_eq!(int(&mut con, &["COPY", "seq", "seq2"]), 1);
    assert_eq!(int(&mut con, &["SEQ.NEXT", "seq2"]), 9223372036854775001);
    assert_eq!(
        int(&mut con, &["SEQ.GET", "seq"]),
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
    assert_eq!(int(&mut con, &["DEL", "seq2"]), 1);
    assert_eq!(int(&mut con, &["UNLINK", "seq"]), 1);
    let _: String = cmd(&mut con, &["FLUSHALL"]).unwrap();
    let pong: String = cmd(&mut con, &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
}

/// Runs WATCH key on `a`, `change` on `b`, then MULTI/EXEC on `a`: whether EXEC ran.
fn exec_survives(s: &Server, key: &str, change: &[&str]) -> bool {
    let mut a = s.client();
    let mut b = s.client();
    let _: () = redis::cmd("WATCH").arg(key).query(&mut a).unwrap();
    let _: Value = cmd(&mut b, change).unwrap();
    let r: Option<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("SEQ.GET")
        .arg(key)
        .query(&mut a)
        .unwrap();
    r.is_some()
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
    let _: String = cmd(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "Kd"]).unwrap();
    let mut sub = s.client();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyspace@0__:conv*").unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "conv"]).unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.ADVANCE", "conv", "0"]).unwrap(); // no change: no event
    let _: String = cmd(&mut con, &["SEQ.SET", "conv", "7"]).unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.ADVANCE", "conv", "9"]).unwrap();
    // a marker: everything before it has been delivered (so no read waits for a missing event)
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "conv-end"]).unwrap();
    let mut events = Vec::new();
    loop {
        let msg = ps.get_message().unwrap();
        if msg.get_channel_name() == "__keyspace@0__:conv-end" {
            break;
        }
        assert_eq!(msg.get_channel_name(), "__keyspace@0__:conv");
        events.push(msg.get_payload::<String>().unwrap());
    }
    assert_eq!(events, ["seq.next", "seq.set", "seq.advance"]);
}
