//! Issue 46, a chat backend as a team builds it: what cost them most, each measured item held
//! here (the guide's program, which runs standalone and on a Cluster, is in examples.rs and
//! cluster.rs; the docs' message IDs and references in docs.rs). Kinds and logs that cannot be
//! mixed up, unread counts without the user's own messages (IM.UNREAD on a replica too), read
//! receipts against a model, a reused client message id refused, errors that say what to do and
//! SEQ.CONVERT, a misspelled inbox that moves no cursor.
use crate::common;
use common::*;

const CHANGE_LUA: &str = include_str!("../../examples/lua/change.lua");
const PULL_LUA: &str = include_str!("../../examples/lua/pull.lua");

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn err_of(con: &mut Connection, args: &[String]) -> String {
    let e = cmd::<Value>(con, args).unwrap_err();
    let t = err_text(&e);
    t.split(" script:").next().unwrap_or_default().to_owned()
}

/// Item 1: `IM.PULL seqs trimmed log(friendship) log(profile) profile 0 friendship 0` answered
/// each kind with the other's changes, and IM.CHANGE wrote a profile change into the friendship
/// log. A log records its kind now: both are refused, natively and by the scripts, nothing
/// written; the cap still keeps `cap` changes.
#[test]
fn a_kind_paired_with_another_kinds_log_is_refused() {
    let s = Server::start();
    let mut con = s.client();
    let change_sha: String = cmd(&mut con, &["SCRIPT", "LOAD", CHANGE_LUA]).unwrap();
    let pull_sha: String = cmd(&mut con, &["SCRIPT", "LOAD", PULL_LUA]).unwrap();
    let (seqs, trimmed) = ("app:seq:{u1}", "app:trimmed:{u1}");
    let (friends, profile) = ("app:log:{u1}:friendship", "app:log:{u1}:profile");
    let change = |con: &mut Connection, log: &str, kind: &str, text: &str| -> Result<i64, String> {
        cmd::<i64>(con, &["IM.CHANGE", seqs, trimmed, log, kind, text, "2"])
            .map_err(|e| err_text(&e))
    };
    change(&mut con, friends, "friendship", "+bob").unwrap();
    change(&mut con, profile, "profile", "name=Ann").unwrap();
    let before = digest(&s);
    // IM.CHANGE of one kind into the other's log, and the script alike
    let want = "ERR change: the log records the kind friendship, not profile (each kind has a log of its own)";
    assert_eq!(change(&mut con, friends, "profile", "x").unwrap_err(), want);
    let lua = strs(&[
        "EVALSHA",
        &change_sha,
        "3",
        seqs,
        trimmed,
        friends,
        "profile",
        "x",
        "2",
    ]);
    assert_eq!(err_of(&mut con, &lua), want);
    assert_eq!(digest(&s), before, "a refused change wrote");
    // IM.PULL with the logs in the other order than the kinds
    let pull = |verb: &str| {
        let mut v = strs(&[verb]);
        if verb == "EVALSHA_RO" {
            v.extend(strs(&[&pull_sha, "4"]));
        }
        v.extend(strs(&[
            seqs,
            trimmed,
            friends,
            profile,
            "profile",
            "0",
            "friendship",
            "0",
        ]));
        v
    };
    let want = "ERR pull: log 1 of 2 records the kind friendship, not profile (give the logs in the order of the kinds)";
    assert_eq!(err_of(&mut con, &pull("IM.PULL")), want);
    assert_eq!(err_of(&mut con, &pull("EVALSHA_RO")), want);
    // in order: each kind its own changes
    let ok: Vec<Value> = cmd(
        &mut con,
        &[
            "IM.PULL",
            seqs,
            trimmed,
            friends,
            profile,
            "friendship",
            "0",
            "profile",
            "0",
        ],
    )
    .unwrap();
    assert_eq!(ok.len(), 8, "{ok:?}");
    // The record sits at +inf, the cap counts changes only, and no pull returns the record.
    for i in 0..5 {
        change(&mut con, friends, "friendship", &format!("+f{i}")).unwrap();
    }
    let log: Vec<(String, String)> =
        cmd(&mut con, &["ZRANGE", friends, "0", "-1", "WITHSCORES"]).unwrap();
    assert_eq!(
        log,
        [
            ("5|+f3".to_owned(), "5".to_owned()),
            ("6|+f4".to_owned(), "6".to_owned()),
            ("kind|friendship".to_owned(), "inf".to_owned())
        ]
    );
    // A log written before this version (no record) is taken as it is, and recorded by its
    // next change.
    let old = "app:log:{u1}:old";
    let _: i64 = cmd(&mut con, &["ZADD", old, "1", "1|x"]).unwrap();
    let _: i64 = cmd(&mut con, &["SEQ.HSET", seqs, "old", "1"]).unwrap();
    let pulled: Vec<Value> = cmd(&mut con, &["IM.PULL", seqs, trimmed, old, "old", "0"]).unwrap();
    assert_eq!(pulled.len(), 4);
    change(&mut con, old, "old", "y").unwrap();
    let top: Vec<String> = cmd(&mut con, &["ZRANGE", old, "+inf", "+inf", "BYSCORE"]).unwrap();
    assert_eq!(top, ["kind|old"]);
}

/// The sender among the recipients (the docs say so, for the sender's other devices).
fn send(con: &mut Connection, conv: &str, sender: &str, to: &[&str], cid: &str) -> i64 {
    let tag = format!("{{{conv}}}");
    let mut args = strs(&["IM.SEND", &tag, &format!("{tag}:seq")]);
    for u in to {
        args.push(format!("{tag}:inbox:{u}"));
        args.push(format!("{tag}:trimmed:{u}"));
    }
    args.extend(strs(&["1", sender, cid, "hi", "5000"]));
    let r: Vec<Value> = cmd(con, &args).unwrap();
    redis::from_redis_value(r[0].clone()).unwrap()
}

fn unread_of(con: &mut Connection, conv: &str, user: &str) -> i64 {
    let tag = format!("{{{conv}}}");
    int_reply(
        con,
        &[
            "IM.UNREAD",
            &format!("{tag}:read"),
            &format!("{tag}:inbox:{user}"),
            user,
        ],
    )
}

fn read(con: &mut Connection, conv: &str, user: &str, upto: i64) -> (i64, i64) {
    let tag = format!("{{{conv}}}");
    let r: Vec<i64> = cmd(
        con,
        &[
            "IM.READ",
            &format!("{tag}:read"),
            &format!("{tag}:inbox:{user}"),
            &format!("{tag}:seq"),
            user,
            &upto.to_string(),
        ],
    )
    .unwrap();
    (r[0], r[1])
}

/// Item 2: a user who received 1 message and sent 2 saw `unread 3`. IM.READ and IM.UNREAD leave
/// the user's own messages out, against a model over random sends and reads in a group where
/// every member is a recipient; IM.UNREAD runs on a replica. Beyond the newest 1,000 above the
/// cursor every message counts (docs/commands.md says so).
#[test]
fn unread_counts_leave_out_the_users_own_messages() {
    let s = Server::start();
    let r = s.replica(&[]);
    let mut con = s.client();
    // the case
    send(&mut con, "conv:1", "bob", &["ann", "bob"], "b1");
    send(&mut con, "conv:1", "ann", &["ann", "bob"], "a1");
    send(&mut con, "conv:1", "ann", &["ann", "bob"], "a2");
    assert_eq!(read(&mut con, "conv:1", "ann", 0), (0, 1));
    assert_eq!(unread_of(&mut con, "conv:1", "ann"), 1);
    assert_eq!(unread_of(&mut con, "conv:1", "bob"), 2);
    // a model: a group of 4, each send to all, random reads
    let users = ["ann", "bob", "cat", "dan"];
    let mut rng = Rng(0x46_0002);
    let mut sent: Vec<(i64, &str)> = Vec::new();
    let mut cursor = std::collections::HashMap::new();
    for i in 0..300 {
        let u = users[rng.below(4) as usize];
        if rng.below(3) == 0 {
            let upto = rng.below(sent.len() as u64 + 3) as i64;
            let (c, n) = read(&mut con, "conv:2", u, upto);
            let c0 = cursor.entry(u).or_insert(0);
            *c0 = (*c0).max(upto.min(sent.len() as i64));
            let want = sent.iter().filter(|(q, w)| *q > *c0 && *w != u).count() as i64;
            assert_eq!((c, n), (*c0, want), "read {u} {upto}");
        } else {
            let seq = send(&mut con, "conv:2", u, &users, &format!("c{i}"));
            sent.push((seq, u));
        }
    }
    s.wait_replica(&r);
    let mut rc = r.client();
    for u in users {
        let c0 = cursor.get(u).copied().unwrap_or(0);
        let want = sent.iter().filter(|(q, w)| *q > c0 && *w != u).count() as i64;
        assert_eq!(
            unread_of(&mut rc, "conv:2", u),
            want,
            "IM.UNREAD {u} on the replica"
        );
    }
    // More than 1,000 above the cursor: the newest 1,000 are looked at, the rest count whoever
    // sent them.
    let mut pipe = redis::pipe();
    let tag = "{conv:3}";
    for i in 0..1100 {
        let sender = if i < 50 { "ann" } else { "bob" };
        pipe.cmd("IM.SEND").arg(tag).arg(format!("{tag}:seq"));
        for u in ["ann", "bob"] {
            pipe.arg(format!("{tag}:inbox:{u}"))
                .arg(format!("{tag}:trimmed:{u}"));
        }
        pipe.arg(&["1", sender, &format!("c{i}"), "x", "5000"][..])
            .ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();
    // ann sent the oldest 50: past the newest 1,000 they count; bob's own 1,000 newest do not
    assert_eq!(unread_of(&mut con, "conv:3", "ann"), 1100);
    assert_eq!(unread_of(&mut con, "conv:3", "bob"), 100);
    assert_eq!(read(&mut con, "conv:3", "ann", 60), (60, 1040));
}

/// Item 3: "read by 12 of 20" and "read by all" needed SEQ.HGETALL per message. IM.READBY
/// counts the members named at or past a seq and the lowest cursor, against a model over random
/// reads, with one map lookup per member.
#[test]
fn read_receipts_match_a_model_over_random_reads() {
    let s = Server::start();
    let mut con = s.client();
    let members: Vec<String> = (0..20).map(|i| format!("u{i}")).collect();
    let _: () = cmd(&mut con, &["SEQ.SET", "{g}:seq", "100"]).unwrap();
    let mut model = [0i64; 20];
    let mut rng = Rng(0x46_0003);
    for _ in 0..400 {
        let i = rng.below(20) as usize;
        let upto = rng.below(110) as i64;
        let got: i64 = cmd(
            &mut con,
            &[
                "SEQ.HADVANCE",
                "{g}:read",
                &members[i],
                &upto.to_string(),
                "LIMIT",
                "{g}:seq",
            ],
        )
        .unwrap();
        model[i] = model[i].max(upto.min(100));
        assert_eq!(got, model[i]);
        let at = rng.below(101) as i64;
        let k = 1 + rng.below(20) as usize;
        let mut args = strs(&["IM.READBY", "{g}:read", &at.to_string()]);
        args.extend(members[..k].iter().cloned());
        let r: Vec<i64> = cmd(&mut con, &args).unwrap();
        let count = model[..k].iter().filter(|&&c| c >= at).count() as i64;
        let lowest = *model[..k].iter().min().unwrap();
        assert_eq!(r, [count, lowest], "at {at}, {k} members");
    }
    // a missing map: nobody has read anything
    let r: Vec<i64> = cmd(&mut con, &["IM.READBY", "{h}:read", "0", "a", "b"]).unwrap();
    assert_eq!(r, [2, 0]);
    for (args, want) in [
        (
            &["IM.READBY", "{g}:read", "-1", "a"][..],
            "ERR seq must be an integer in 0..9223372036854775807",
        ),
        (
            &["IM.READBY", "{g}:read", "1", ""],
            "ERR member must be 1..256 bytes",
        ),
        (
            &["IM.READBY", "{g}:read", "1"],
            "ERR readby: expected read seq member [member ...]",
        ),
    ] {
        assert_eq!(expect_err(&mut con, &bytes(args)), want);
    }
}

/// Item 5: a reused client message id with a different body silently returned the old message.
/// Refused now, writing nothing; the same message retried, to all or some of its recipients, is
/// still answered from the inboxes.
#[test]
fn a_reused_client_message_id_with_another_body_is_refused() {
    let s = Server::start();
    let mut con = s.client();
    let call = |body: &str, to: &[&str]| {
        let mut a = strs(&["IM.SEND", "{c}", "{c}:seq"]);
        for u in to {
            a.push(format!("{{c}}:inbox:{u}"));
            a.push(format!("{{c}}:trimmed:{u}"));
        }
        a.extend(strs(&["1", "ann", "m1", body, "10"]));
        a
    };
    let first: Vec<Value> = cmd(&mut con, &call("hello", &["ann", "bob"])).unwrap();
    let before = digest(&s);
    let again: Vec<Value> = cmd(&mut con, &call("hello", &["bob"])).unwrap();
    assert_eq!((&again[1], &again[2]), (&first[1], &Value::Int(1)));
    assert_eq!(
        err_of(&mut con, &call("hello!", &["ann", "bob"])),
        "ERR send: client_msg_id already used for seq 1 with another body (a retry repeats its message; a new message needs a new client_msg_id)"
    );
    assert!(err_of(&mut con, &call("hello", &["ann", "cat"]))
        .contains("which {c}:inbox:cat did not get"));
    assert_eq!(digest(&s), before);
}

/// Item 6: errors that did not say what to do. IM.READ with user and upto swapped names the
/// argument; a seq key that is an INCR string says what it holds, and SEQ.CONVERT turns it into
/// a sequence in place (TTL kept, replicated, in the AOF); IM.SYNC on a misspelled inbox moves
/// no cursor past messages it never got.
#[test]
fn errors_say_what_to_do_and_an_incr_counter_converts_in_place() {
    let s = Server::with(&aof_always("no"));
    let r = s.replica(&[]);
    let mut con = s.client();
    send(&mut con, "conv:e", "bob", &["ann"], "b1");
    let e = expect_err(
        &mut con,
        &bytes(&[
            "IM.READ",
            "{conv:e}:read",
            "{conv:e}:inbox:ann",
            "{conv:e}:seq",
            "5",
            "ann",
        ]),
    );
    assert_eq!(e, "ERR upto must be an integer in 0..9223372036854775807");
    let e = expect_err(
        &mut con,
        &bytes(&["IM.SYNC", "{conv:e}:seq", "{conv:e}:inbox:ann", "0", "10"]),
    );
    assert_eq!(e, "ERR sync: expected seq inbox trimmed last limit");
    // An INCR counter where a sequence belongs.
    let _: i64 = cmd(&mut con, &["INCRBY", "{c}:seq", "41"]).unwrap();
    let _: i64 = cmd(&mut con, &["EXPIRE", "{c}:seq", "1000"]).unwrap();
    let e = expect_err(&mut con, &bytes(&["SEQ.NEXT", "{c}:seq"]));
    assert_eq!(
        e,
        "WRONGTYPE Operation against a key holding the wrong kind of value: {c}:seq holds a string, not an imid sequence (an INCR counter becomes one in place, with its value: SEQ.CONVERT key)"
    );
    assert_eq!(int_reply(&mut con, &["SEQ.CONVERT", "{c}:seq"]), 41);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "{c}:seq"]), 42);
    let ttl = int_reply(&mut con, &["TTL", "{c}:seq"]);
    assert!((990..=1000).contains(&ttl), "TTL {ttl}");
    assert_eq!(
        int_reply(&mut con, &["SEQ.CONVERT", "{c}:seq"]),
        42,
        "again: no change"
    );
    assert_eq!(int_reply(&mut con, &["SEQ.CONVERT", "{c}:none"]), 0);
    for (v, want) in [("-3", "-3"), ("x", "x")] {
        let _: () = cmd(&mut con, &["SET", "{c}:bad", v]).unwrap();
        let e = expect_err(&mut con, &bytes(&["SEQ.CONVERT", "{c}:bad"]));
        assert_eq!(
            e,
            format!("ERR SEQ.CONVERT: the string holds {want}, not an integer in 0..9223372036854775807")
        );
    }
    let _: i64 = cmd(&mut con, &["RPUSH", "{c}:list", "1"]).unwrap();
    let e = expect_err(&mut con, &bytes(&["SEQ.CONVERT", "{c}:list"]));
    assert!(
        e.contains("{c}:list holds a list, not an imid sequence"),
        "{e}"
    );
    s.wait_replica(&r);
    assert_eq!(digest(&r), digest(&s));
    let want = digest(&s);
    let mut s = s;
    s.restart();
    assert_eq!(digest(&s), want, "after a restart from the AOF");
    // A misspelled inbox: empty and complete, but the cursor stays where the client was.
    let mut con = s.client();
    let page: Vec<Value> = cmd(
        &mut con,
        &[
            "IM.SYNC",
            "{conv:e}:seq",
            "{conv:e}:inbox:anne",
            "{conv:e}:trimmed:anne",
            "0",
            "10",
        ],
    )
    .unwrap();
    assert_eq!(
        page[..4],
        [Value::Int(1), Value::Int(0), Value::Int(1), Value::Int(0)]
    );
}
