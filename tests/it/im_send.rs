//! IM.SEND against its reference, `examples/lua/send.lua`: on the test-hooks build with both
//! servers' clocks frozen at the same instant, the same sends (retries, caps, recipient lists,
//! errors) give the same replies, keyspace events, inbox contents, sequences, trimmed markers and
//! IDMP windows (`DEBUG DIGEST`); a seeded random model run does the same at length. Then what
//! the script cannot show: replicas and the AOF reach the primary's state whatever their clocks
//! say, nothing is written by a refused call, the key specs and ACL key patterns, CROSSSLOT in a
//! cluster, the recipient limit.
use crate::common;
use common::cluster::{key_of_another_slot, tags_in, Cluster};
use common::scripts::*;
use common::*;

/// A test-hooks server with its clock frozen at `at`, keyspace events on.
fn frozen_with_events(at: u64, extra: &[&str]) -> Server {
    let s = frozen(at, extra);
    config_set(&mut s.client(), "notify-keyspace-events", "KEA");
    s
}

/// The two servers of a comparison: `lua` runs send.lua, `native` IM.SEND, both frozen at T0,
/// keyspace events on.
fn send_pair(extra: &[&str]) -> Pair {
    let mut p = Pair::new(&[Script::Send], extra);
    p.both(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    p
}

/// The keyspace events published since `ps` subscribed, up to the marker key `mark` (which the
/// caller then writes).
fn events(ps: &mut redis::PubSub, s: &Server, mark: &str) -> Vec<String> {
    ok(&mut s.client(), &["SET", mark, "1"]);
    let mut out = Vec::new();
    loop {
        let msg = ps.get_message().unwrap();
        let channel = msg.get_channel_name().to_owned();
        if channel == format!("__keyspace@0__:{mark}") {
            return out;
        }
        let event: String = msg.get_payload().unwrap();
        out.push(format!("{channel} {event}"));
    }
}

fn seq_of(r: &Reply) -> i64 {
    match r {
        Ok(Value::Array(v)) => redis::from_redis_value(v[0].clone()).unwrap(),
        other => panic!("{other:?}"),
    }
}

fn duplicate(r: &Reply) -> bool {
    match r {
        Ok(Value::Array(v)) => v[2] == Value::Int(1),
        other => panic!("{other:?}"),
    }
}

fn ids_of(r: &Reply) -> (Value, Value) {
    match r {
        Ok(Value::Array(v)) => (v[1].clone(), v[3].clone()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_command_and_the_script_agree_on_a_frozen_clock() {
    let mut p = send_pair(&[]);
    let (mut sl, mut sn) = (p.lua.client(), p.native.client());
    let mut pl = sl.as_pubsub();
    let mut pn = sn.as_pubsub();
    pl.psubscribe("__keyspace@0__:*").unwrap();
    pn.psubscribe("__keyspace@0__:*").unwrap();
    let to = ["bob", "carol"];
    let first = p.run(&Call::send("a", &to, 1, "alice", "c1", "hi|there", "3"));
    assert!(!duplicate(&first));
    // a retry: the first reply, read back from bob's inbox
    let again = p.run(&Call::send("a", &to, 1, "alice", "c1", "hi|there", "3"));
    assert!(duplicate(&again));
    assert_eq!(
        (seq_of(&again), ids_of(&again)),
        (seq_of(&first), ids_of(&first))
    );
    // the client message id reused for another body, or naming another recipient: refused
    // alike by both, nothing written
    let edited = p.run(&Call::send("a", &to, 1, "alice", "c1", "edited", "3"));
    assert!(
        matches!(&edited, Err(e) if e.starts_with("ERR send: client_msg_id already used for seq 1 with another body")),
        "{edited:?}"
    );
    let other = p.run(&Call::send(
        "a",
        &["dave"],
        1,
        "alice",
        "c1",
        "hi|there",
        "3",
    ));
    assert_eq!(
        other,
        Err("ERR send: client_msg_id already used for seq 1, which {conv:a}:inbox:dave did not get (a retry names the first send's inboxes, or some of them)".to_owned())
    );
    // more than the cap: each inbox keeps the newest 3, the markers say what went
    for i in 2..=7 {
        p.run(&Call::send(
            "a",
            &to,
            1,
            "alice",
            &format!("c{i}"),
            &format!("m{i}"),
            "3",
        ))
        .unwrap();
    }
    // a retry of a message the cap dropped: nothing to read back
    let dropped = p.run(&Call::send("a", &to, 1, "alice", "c2", "m2", "3"));
    assert!(duplicate(&dropped) && ids_of(&dropped) == (Value::Nil, Value::Nil));
    // read back from the first inbox named that holds it (carol's, named first here)
    let from_carol = p.run(&Call::send(
        "a",
        &["carol", "bob"],
        1,
        "alice",
        "c6",
        "m6",
        "3",
    ));
    assert!(duplicate(&from_carol) && ids_of(&from_carol).0 != Value::Nil);
    // the same recipient twice, the sender among the recipients, an empty sender and body,
    // the highest channel type, a cap of 1, leading zeros in a cap
    p.run(&Call::send(
        "a",
        &["bob", "bob"],
        15,
        "alice",
        "c8",
        "",
        "2",
    ))
    .unwrap();
    p.run(&Call::send("a", &["alice", "bob"], 0, "", "c9", "x", "1"))
        .unwrap();
    p.run(&Call::send(
        "a",
        &["bob"],
        2,
        "bob",
        "c9",
        "bob's c9 is another message",
        "0005",
    ))
    .unwrap();
    // client message ids are per sender: alice's c1 and bob's c1 are two messages
    let bobs = p.run(&Call::send("a", &to, 1, "bob", "c1", "y", "3"));
    assert!(!duplicate(&bobs));
    // 301 s later (imid.seq-idmp-ttl 300): the token expired, the retry is a new message
    p.clock(T0 + 301_000);
    let late = p.run(&Call::send("a", &to, 1, "alice", "c7", "m7", "3"));
    assert!(!duplicate(&late));
    // errors, in the script's order of checks
    for (c, want) in [
        (
            Call::send("a", &to, 1, "alice", "c", "x", "0"),
            "ERR inbox cap must be at least 1",
        ),
        (
            Call::send("a", &to, 1, "a|b", "c", "x", "3"),
            "ERR sender must not contain '|'",
        ),
        (
            Call::send("a", &to, 1, "alice", "", "x", "3"),
            "ERR client message id must not be empty",
        ),
        (
            Call::send("a", &to, 16, "alice", "c", "x", "3"),
            "ERR channel_type must be an integer in 0..15",
        ),
    ] {
        assert_eq!(p.run(&c), Err(want.to_owned()));
    }
    p.assert_same_state();
    let el = events(&mut pl, &p.lua, "zz-mark");
    let en = events(&mut pn, &p.native, "zz-mark");
    assert_eq!(en, el, "keyspace events");
    for e in ["seq.next", "zadd", "zpopmin", "seq.advance"] {
        assert!(en.iter().any(|l| l.ends_with(e)), "no {e} event: {en:?}");
    }
    let trimmed = int_reply(&mut p.cn, &["SEQ.GET", "{conv:a}:trimmed:bob"]);
    assert!(trimmed > 0, "the cap dropped messages");
}

const USERS: [&str; 6] = ["ann", "ben", "cat", "dan", "eve", "fay"];

/// A random send: a conversation, a sender, 1 to 4 recipients (repeats allowed), a new client
/// message id or one sent before (a retry: mostly the same call, now and then with another
/// body, other recipients or some of the first ones), a cap, now and then a bad argument.
fn random_call(rng: &mut Rng, sent: &mut Vec<Call>, n: usize) -> Call {
    let to: Vec<&str> = (0..=rng.below(4))
        .map(|_| USERS[rng.below(6) as usize])
        .collect();
    if rng.below(10) < 3 && !sent.is_empty() {
        // a retry, in its conversation (mostly a recent send)
        let back = rng.below(sent.len().min(12) as u64) as usize + 1;
        let mut c = sent[sent.len() - back].clone();
        match rng.below(8) {
            0 => c.args[3] = format!("other body {n}"),
            1 => {
                let again = Call::send("x", &to, 1, "s", "c", "b", "1");
                let tag = c.keys[0].clone();
                c.keys.truncate(2);
                c.keys
                    .extend(again.keys[2..].iter().map(|k| k.replace("{conv:x}", &tag)));
            }
            2 => c.keys.truncate(4),
            _ => {}
        }
        return c;
    }
    let conv = format!("m{}", rng.below(3));
    let sender = USERS[rng.below(6) as usize];
    let cid = format!("id{n}");
    let cap = ["1", "2", "3", "5", "100", "2"][rng.below(6) as usize];
    let body = format!("b{n}{}", ["", "|", "||x", " "][rng.below(4) as usize]);
    let ct = rng.below(16) as u8;
    let mut c = Call::send(&conv, &to, ct, sender, &cid, &body, cap);
    match rng.below(40) {
        0 => c.args[4] = "0".into(),
        1 => c.args[1] = "x|y".into(),
        2 => c.args[0] = "16".into(),
        _ => sent.push(c.clone()),
    }
    c
}

#[test]
fn random_sends_retries_caps_and_recipients_match_the_script() {
    // A small IDMP window, so that windows fill and drop their oldest tokens.
    let mut p = send_pair(&["--imid.seq-idmp-max", "6"]);
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut sent = Vec::new();
    let mut now = T0;
    let (mut dups, mut errors, mut found, mut lost) = (0, 0, 0, 0);
    for n in 0..600 {
        if rng.below(8) == 0 {
            // the clock moves: within the millisecond's IDs, by seconds, past a token's TTL
            now += [0, 1, 999, 1_500, 120_000, 301_000][rng.below(6) as usize];
            p.clock(now);
        }
        let c = random_call(&mut rng, &mut sent, n);
        match p.run(&c) {
            Err(_) => errors += 1,
            r if duplicate(&r) => {
                dups += 1;
                if ids_of(&r).0 == Value::Nil {
                    lost += 1;
                } else {
                    found += 1;
                }
            }
            _ => {}
        }
        if n % 150 == 149 {
            p.assert_same_state();
        }
    }
    p.assert_same_state();
    // the run did exercise what it is for
    assert!(
        dups > 20 && found > 5 && lost > 5 && errors > 5,
        "{dups} {found} {lost} {errors}"
    );
    let markers: Vec<String> = cmd(&mut p.cn, &["KEYS", "*:trimmed:*"]).unwrap();
    assert!(!markers.is_empty());
}

#[test]
fn a_retry_is_recognised_across_the_script_and_the_command() {
    let s = Server::start();
    let mut con = s.client();
    let sha = load_scripts(&mut con, &[Script::Send]);
    let by_lua = Call::send("x", &["bob"], 1, "alice", "c1", "hi", "10");
    let first = lua(&mut con, &sha, &by_lua);
    let before = digest(&s);
    let again = native(&mut con, &by_lua);
    assert!(duplicate(&again));
    assert_eq!(
        (seq_of(&again), ids_of(&again)),
        (seq_of(&first), ids_of(&first))
    );
    let by_native = Call::send("x", &["bob"], 1, "alice", "c2", "there", "10");
    let second = native(&mut con, &by_native);
    assert_eq!(seq_of(&second), seq_of(&first) + 1);
    let again = lua(&mut con, &sha, &by_native);
    assert!(duplicate(&again));
    assert_eq!(ids_of(&again), ids_of(&second));
    // a retry writes nothing, and leaves a WATCH on the keys alone
    let after_second = digest(&s);
    assert_ne!(before, after_second);
    native(&mut con, &by_native).unwrap();
    assert_eq!(digest(&s), after_second);
    let argv = by_native.native_argv();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    for watched in ["{conv:x}:seq", "{conv:x}:inbox:bob"] {
        assert!(exec_survives(&s, watched, &argv), "{watched}");
    }
}

/// Sends with retries and moving clocks on a primary whose replica's clock is 10 days ahead:
/// the replica, the primary's AOF after a restart, and after a rewrite, all hold its state.
#[test]
fn replicas_and_the_aof_reach_the_primarys_state_whatever_their_clocks() {
    let primary = frozen_with_events(T0, &aof_always("no"));
    let replica = primary.hooked_replica(&[]);
    freeze(&mut replica.client(), T0 + 10 * 86_400_000);
    let mut con = primary.client();
    config_set(&mut con, "imid.seq-idmp-max", "6");
    let mut rng = Rng(0xA0F_0002);
    let mut sent = Vec::new();
    let mut now = T0;
    for n in 0..300 {
        if rng.below(8) == 0 {
            now += [1, 1_500, 301_000][rng.below(3) as usize];
            freeze(&mut con, now);
        }
        let _ = native(&mut con, &random_call(&mut rng, &mut sent, n));
    }
    primary.wait_replica(&replica);
    let want = digest(&primary);
    let want_state = keyspace(&mut con);
    assert_eq!(digest(&replica), want, "the replica");
    assert_eq!(keyspace(&mut replica.client()), want_state);
    // What went to the stream: one IM.SENDSET per send, no sorted-set command.
    let aof = aof_incr(&primary);
    assert!(contains(&aof, b"IM.SENDSET"), "no IM.SENDSET in the AOF");
    for other in [&b"ZADD"[..], b"ZPOPMIN", b"IM.SEND\r\n"] {
        assert!(
            !contains(&aof, other),
            "{} in the AOF",
            String::from_utf8_lossy(other)
        );
    }
    let mut primary = primary;
    primary.restart();
    assert_eq!(digest(&primary), want, "after a restart from the AOF");
    primary.rewrite_aof();
    primary.restart();
    assert_eq!(digest(&primary), want, "after an AOF rewrite and a restart");
    assert_eq!(keyspace(&mut primary.client()), want_state);
}

/// The script's errors, each with IM.SEND's counterpart; where they differ it is documented
/// (docs/commands.md, IM.SEND). A refused IM.SEND writes nothing, even where the script had
/// written part of the send before it failed.
#[test]
fn errors_match_the_script_and_a_refused_send_writes_nothing() {
    let s = Server::start();
    let mut con = s.client();
    let sha = load_scripts(&mut con, &[Script::Send]);
    let to = ["bob", "carol"];
    let ok_call = |conv: &str| Call::send(conv, &to, 1, "alice", "c1", "hi", "1");
    // (argument: channel_type 0, sender 1, client message id 2, body 3, cap 4; values refused
    // there; the error, the same from IM.SEND and send.lua)
    let bad_args: &[(usize, &[&str], &str)] = &[
        (4, &["0", "000"], "ERR inbox cap must be at least 1"),
        (
            4,
            &["", "x", "-1", "1.5", "1000000000000000"],
            "ERR inbox cap must be an integer in 0..999999999999999",
        ),
        (1, &["a|b"], "ERR sender must not contain '|'"),
        (2, &[""], "ERR client message id must not be empty"),
        (
            0,
            &["16", "-1"],
            "ERR channel_type must be an integer in 0..15",
        ),
    ];
    // (call, IM.SEND's error, send.lua's when it differs)
    let mut cases: Vec<(Call, &str, Option<&str>)> = Vec::new();
    for &(arg, values, want) in bad_args {
        for v in values {
            let mut c = ok_call("e");
            c.args[arg] = v.to_string();
            cases.push((c, want, None));
        }
    }
    // an odd number of keys
    let mut odd = ok_call("e");
    odd.keys.pop();
    cases.push((
        odd,
        "ERR send: expected tag, seq, then inbox/trimmed pairs, then channel_type sender client_msg_id body cap: got 10 arguments, so 3 keys after the sequence, an odd number (each inbox needs its trimmed key)",
        Some("ERR send: expected KEYS tag, seq, then inbox/trimmed pairs"),
    ));
    for (c, want, lua_want) in &cases {
        let before = (digest(&s), int_reply(&mut con, &["DBSIZE"]));
        assert_eq!(native(&mut con, c), Err(want.to_string()), "{c:?}");
        assert_eq!(
            lua(&mut con, &sha, c),
            Err(lua_want.unwrap_or(want).to_string()),
            "{c:?}"
        );
        assert_eq!(
            (digest(&s), int_reply(&mut con, &["DBSIZE"])),
            before,
            "{c:?} wrote"
        );
    }
    // Fewer than tag, seq, one pair and the 5 arguments (issue 46: one recipient without its
    // trimmed key was Redis's bare arity error): the layout, and what is missing.
    let e = expect_err(
        &mut con,
        &bytes(&["IM.SEND", "t", "s", "i", "1", "a", "c", "b", "5"]),
    );
    assert_eq!(e, "ERR send: expected tag, seq, then inbox/trimmed pairs, then channel_type sender client_msg_id body cap: got 8 arguments, at least 9 are needed (one inbox and its trimmed key)");

    // Keys of the wrong type. The script fails where it reaches them, after writing what came
    // before (the sequence and the first inbox); IM.SEND checks every key first.
    let wrong = |con: &mut Connection, key: &str| {
        let _: () = cmd(con, &["SET", key, "x"]).unwrap();
    };
    for (conv, bad_key) in [
        ("w1", "{conv:w1}:seq"),
        ("w2", "{conv:w2}:inbox:carol"),
        ("w3", "{conv:w3}:trimmed:carol"),
    ] {
        wrong(&mut con, bad_key);
        let before = digest(&s);
        let c = ok_call(conv);
        // IM.SEND's WRONGTYPE names the key and what it holds (after Redis's own text)
        let e = native(&mut con, &c).unwrap_err();
        let want = if bad_key.contains("inbox") {
            "not a sorted set"
        } else {
            "not an imid sequence (an INCR counter"
        };
        assert!(
            e.starts_with(&format!("{WRONGTYPE}: {bad_key} holds a string, {want}")),
            "{bad_key}: {e}"
        );
        assert_eq!(digest(&s), before, "{bad_key}: IM.SEND wrote");
        if conv == "w3" {
            // cap 1: the script trims (and so reaches carol's marker) only from her second
            // message on; IM.SEND refuses the marker at once
            assert!(lua(&mut con, &sha, &c).is_ok());
            let c2 = Call::send(conv, &to, 1, "alice", "c2", "hi", "1");
            assert!(lua(&mut con, &sha, &c2).unwrap_err().starts_with(WRONGTYPE));
        } else {
            let e = lua(&mut con, &sha, &c).unwrap_err();
            assert!(e.starts_with(WRONGTYPE), "{bad_key}: {e}");
        }
        if conv != "w1" {
            assert_ne!(
                digest(&s),
                before,
                "{bad_key}: the script wrote part of the send"
            );
        }
    }
    // A key named both as an inbox and as the sequence or a marker, missing: it would have to
    // be both a sorted set and a sequence. The script fails once it reaches the second use: at
    // once for the sequence, at the first trim for a marker.
    for (conv, keys) in [
        (
            "a1",
            vec!["{conv:a1}", "{conv:a1}:k", "{conv:a1}:k", "{conv:a1}:t"],
        ),
        (
            "a2",
            vec![
                "{conv:a2}",
                "{conv:a2}:seq",
                "{conv:a2}:i",
                "{conv:a2}:t",
                "{conv:a2}:t",
                "{conv:a2}:u",
            ],
        ),
    ] {
        let mut c = ok_call(conv);
        c.keys = keys.iter().map(|k| k.to_string()).collect();
        let before = digest(&s);
        assert_eq!(native(&mut con, &c), Err(WRONGTYPE.to_owned()), "{conv}");
        assert_eq!(digest(&s), before, "{conv}");
        if conv == "a2" {
            assert!(
                lua(&mut con, &sha, &c).is_ok(),
                "the script made the marker an inbox"
            );
            c.args[2] = "c2".into();
        }
        assert!(
            lua(&mut con, &sha, &c).unwrap_err().starts_with(WRONGTYPE),
            "{conv}"
        );
    }
    // The token taken by another request (SEQ.NEXT ... COUNT 2 IDMP with the send's token).
    let token = "1542fbc39d8acca600ac5246aaccae5a892ccc92"; // sha1("alice|c1")
    for conv in ["t1", "t2"] {
        let _: Vec<i64> = cmd(
            &mut con,
            &[
                "SEQ.NEXT",
                &format!("{{conv:{conv}}}:seq"),
                "COUNT",
                "2",
                "IDMP",
                token,
            ],
        )
        .unwrap();
    }
    let conflict = "ERR IDMP token already used on this key with another COUNT (a retry must repeat its request)";
    assert_eq!(native(&mut con, &ok_call("t1")), Err(conflict.to_owned()));
    assert_eq!(
        lua(&mut con, &sha, &ok_call("t2")),
        Err(conflict.to_owned())
    );
    // Overflow.
    for conv in ["o1", "o2"] {
        ok(
            &mut con,
            &[
                "SEQ.SET",
                &format!("{{conv:{conv}}}:seq"),
                "9223372036854775807",
            ],
        );
    }
    assert_eq!(
        native(&mut con, &ok_call("o1")),
        Err("ERR sequence overflow".to_owned())
    );
    assert_eq!(
        lua(&mut con, &sha, &ok_call("o2")),
        Err("ERR sequence overflow".to_owned())
    );
    // java hash mode: the tag must be UTF-8 (MSGID.GEN's rule)
    config_set(&mut con, "imid.msgid-hash", "java");
    let mut bad_tag: Vec<Vec<u8>> = vec![
        b"IM.SEND".to_vec(),
        b"{\xff}".to_vec(),
        b"{\xff}:seq".to_vec(),
        b"{\xff}:i".to_vec(),
        b"{\xff}:t".to_vec(),
    ];
    bad_tag.extend(["1", "a", "c", "b", "5"].map(|a| a.as_bytes().to_vec()));
    let argv: Vec<&[u8]> = bad_tag.iter().map(Vec::as_slice).collect();
    assert_eq!(
        expect_err(&mut con, &argv),
        "ERR target must be valid UTF-8 in java hash mode (imid.msgid-hash java)"
    );
}

/// At most 1,000 recipients: 1,000 go through, 1,001 are refused whole.
#[test]
fn a_send_to_more_than_1000_recipients_is_refused() {
    let s = Server::start();
    let mut con = s.client();
    let users: Vec<String> = (0..1001).map(|i| format!("u{i}")).collect();
    let all: Vec<&str> = users.iter().map(String::as_str).collect();
    let r = native(
        &mut con,
        &Call::send("big", &all[..1000], 1, "a", "c1", "x", "10"),
    )
    .unwrap();
    assert!(matches!(r, Value::Array(_)));
    assert_eq!(
        int_reply(&mut con, &["DBSIZE"]),
        1001,
        "the sequence and 1,000 inboxes"
    );
    let before = digest(&s);
    assert_eq!(
        native(&mut con, &Call::send("big", &all, 1, "a", "c2", "x", "10")),
        Err(
            "ERR send: at most 1000 recipients (inbox/trimmed pairs) per call, got 1001".to_owned()
        )
    );
    assert_eq!(digest(&s), before);
}

#[test]
fn key_specs_and_getkeys_name_every_key() {
    let s = Server::start();
    let mut con = s.client();
    let c = Call::send("k", &["bob", "carol"], 1, "a", "c", "b", "5");
    let mut args = vec!["COMMAND".to_owned(), "GETKEYS".to_owned()];
    args.extend(c.native_argv());
    let mut got: Vec<String> = cmd(&mut con, &args).unwrap();
    got.sort();
    let mut want = c.keys.clone();
    want.sort();
    assert_eq!(got, want);
    let mut args = vec![
        "COMMAND",
        "GETKEYS",
        "IM.SENDSET",
        "1 0000-0000-7VS6-D3E6 9 1 0",
    ];
    let native = c.native_argv();
    args.extend(native[1..].iter().map(String::as_str));
    let mut got: Vec<String> = cmd(&mut con, &args).unwrap();
    got.sort();
    assert_eq!(got, want);
    // the four specs: tag read-only, sequence and inboxes read-write (accessed), markers
    // read-write; the pairs every second argument, up to 5 before the last
    for (name, first, inbox_flags) in [
        ("im.send", 1, vec!["RW", "access", "update"]),
        ("im.sendset", 2, vec!["RW", "update"]),
    ] {
        let info: Vec<Vec<Value>> = cmd(&mut con, &["COMMAND", "INFO", name]).unwrap();
        let Value::Array(specs) = &info[0][8] else {
            panic!()
        };
        assert_eq!(specs.len(), 4, "{name}");
        let spec = |i: usize| -> (Vec<String>, String) {
            let Value::Array(kv) = &specs[i] else {
                panic!()
            };
            (
                redis::from_redis_value(kv[1].clone()).unwrap(),
                format!("{kv:?}"),
            )
        };
        assert_eq!(spec(0).0, ["RO"], "{name}");
        assert_eq!(spec(1).0, ["RW", "access", "update"], "{name}");
        assert_eq!(spec(2).0, inbox_flags, "{name}");
        assert_eq!(spec(3).0, ["RW", "update"], "{name}");
        for (i, index, last) in [(0, first, 0), (2, first + 2, -7), (3, first + 3, -6)] {
            let text = spec(i).1;
            assert!(
                text.contains(&format!("int({index})")) && text.contains(&format!("int({last})")),
                "{name} spec {i}: {text}"
            );
        }
    }
}

/// ACL key patterns judge IM.SEND by its key specs: write permission on the sequence, the
/// inboxes and the markers is needed; read permission on the tag suffices.
#[test]
fn acl_key_patterns_apply_to_every_key() {
    let s = Server::start();
    let mut admin = s.client();
    let mut user = |name: &str, markers: &str| {
        let mut args = vec!["ACL", "SETUSER", name, "on", ">pw", "+@all", "%R~{conv:1}"];
        args.extend(["~{conv:1}:seq", "~{conv:1}:inbox:*", markers]);
        ok(&mut admin, &args);
    };
    user("app", "~{conv:1}:trimmed:*");
    // markers readable only: a send may raise them, so it is refused
    user("ro_markers", "%R~{conv:1}:trimmed:*");
    ok(
        &mut admin,
        &["ACL", "SETUSER", "ro", "on", ">pw", "+@all", "%R~*"],
    );
    let login = |user: &str| {
        let mut c = s.client();
        let _: String = cmd(&mut c, &["AUTH", user, "pw"]).unwrap();
        c
    };
    let mut app = login("app");
    let good = Call::send("1", &["bob"], 1, "a", "c1", "x", "5");
    native(&mut app, &good).unwrap();
    // an inbox, or a marker, outside the user's keys
    let mut other_inbox = good.clone();
    other_inbox.keys[2] = "{conv:2}:inbox:bob".into();
    let mut other_marker = good.clone();
    other_marker.keys[3] = "elsewhere".into();
    for c in [other_inbox, other_marker] {
        let e = native(&mut app, &c).unwrap_err();
        assert!(e.starts_with("NOPERM"), "{e}");
    }
    for user in ["ro_markers", "ro"] {
        let c = Call::send("1", &["bob"], 1, "a", "c2", "x", "5");
        let e = native(&mut login(user), &c).unwrap_err();
        assert!(e.starts_with("NOPERM"), "{user}: {e}");
    }
    assert_eq!(
        int_reply(&mut admin, &["SEQ.GET", "{conv:1}:seq"]),
        1,
        "one send went through"
    );
}

/// In a cluster every key of a send must share the tag's slot: an inbox, a marker or the
/// sequence elsewhere is CROSSSLOT, and nothing is written. Redis 7.0 checks the keys the
/// getkeys API reports; Redis 8.2 and Valkey 9.1 those of the key specs.
fn keys_of_another_slot_are_crossslot(bin: Option<std::path::PathBuf>) {
    let cluster = Cluster::start(bin.as_deref(), &[], 0..1);
    let t = tags_in(0..1, 1).remove(0);
    let node = cluster.owner_of(&t);
    let mut con = node.client();
    let good = Call {
        script: Script::Send,
        keys: vec![
            format!("{{{t}}}"),
            format!("{{{t}}}:seq"),
            format!("{{{t}}}:inbox:bob"),
            format!("{{{t}}}:trimmed:bob"),
            format!("{{{t}}}:inbox:carol"),
            format!("{{{t}}}:trimmed:carol"),
        ],
        args: ["1", "alice", "c1", "hi", "5"].map(str::to_owned).to_vec(),
    };
    native(&mut con, &good).unwrap();
    let other = key_of_another_slot(&t);
    let before = digest(node);
    for i in 0..6 {
        let mut c = good.clone();
        c.keys[i] = other.clone();
        c.args[2] = format!("c{i}x");
        let e = native(&mut con, &c).unwrap_err();
        assert!(e.starts_with("CROSSSLOT"), "key {i}: {e}");
    }
    assert_eq!(digest(node), before, "nothing written");
}

#[test]
fn keys_of_another_slot_are_crossslot_in_a_cluster() {
    keys_of_another_slot_are_crossslot(None);
}

on_newer_servers!(keys_of_another_slot_are_crossslot_on, |bin| {
    keys_of_another_slot_are_crossslot(Some(bin))
});
