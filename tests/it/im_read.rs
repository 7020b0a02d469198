//! IM.SYNC, IM.READ, IM.PULL and IM.CHANGE against their references, `examples/lua/sync.lua`,
//! `read.lua`, `pull.lua` and `change.lua`: on the test-hooks build with both servers' clocks
//! frozen at the same instant, a seeded random run of sends, reads, syncs, changes and pulls
//! (bad arguments among them) through the scripts on one server and through the native commands
//! on the other gives the same replies and the same data (`DEBUG DIGEST`). Then what the scripts
//! cannot show: errors checked before anything is written, key specs, replicas and the AOF, and
//! the fence: a fenced primary shows no reader a message or a change its replicas have not
//! acknowledged, and what a read on a replica guarantees.
use crate::common;
use common::scripts::*;
use common::*;
use std::time::Duration;

const USERS: [&str; 4] = ["ann", "ben", "cat", "dan"];
const KINDS: [&str; 3] = ["friend", "group", "conv"];

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from[rng.below(from.len() as u64) as usize]
}

/// A held seq: mostly a small number near what the run has made, now and then a bad one.
fn held(rng: &mut Rng) -> String {
    match rng.below(30) {
        0 => "-1".into(),
        1 => "x".into(),
        2 => "1000000000000000".into(),
        3 => "007".into(),
        _ => rng.below(40).to_string(),
    }
}

fn random_call(rng: &mut Rng, n: usize) -> Call {
    let conv = format!("c{}", rng.below(2));
    let user = pick(rng, &USERS);
    match rng.below(5) {
        0 => {
            let to: Vec<&str> = (0..=rng.below(3)).map(|_| pick(rng, &USERS)).collect();
            let cap = pick(rng, &["2", "3", "5", "100"]);
            let body = format!("b{n}{}", pick(rng, &["", "|", " x"]));
            let sender = pick(rng, &USERS);
            Call::send(&conv, &to, 1, sender, &format!("id{n}"), &body, cap)
        }
        1 => {
            let limit = pick(rng, &["1", "2", "3", "10", "0", "x", "999999999999999"]);
            Call::sync(&conv, user, &held(rng), limit)
        }
        2 => {
            let who = if rng.below(30) == 0 { "" } else { user };
            let upto = match rng.below(20) {
                0 => "-3".to_owned(),
                1 => "9223372036854775807".to_owned(),
                _ => rng.below(30).to_string(),
            };
            Call::read(&conv, who, &upto)
        }
        3 => {
            let kind = if rng.below(40) == 0 {
                ""
            } else {
                pick(rng, &KINDS)
            };
            let cap = pick(rng, &["1", "2", "4", "50", "0", "x"]);
            let change = format!("ch{n}{}", pick(rng, &["", "|y", " z"]));
            Call::change(user, kind, &change, cap)
        }
        _ => {
            let k = 1 + rng.below(3) as usize;
            let hs: Vec<(String, String)> = (0..k)
                .map(|_| (pick(rng, &KINDS).to_owned(), held(rng)))
                .collect();
            let hs: Vec<(&str, &str)> = hs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
            let mut c = Call::pull(user, &hs);
            if rng.below(40) == 0 {
                // a layout the script refuses: one ARGV too many
                c.args.push("1".into());
            }
            c
        }
    }
}

#[test]
fn random_sends_reads_syncs_changes_and_pulls_match_the_scripts() {
    let mut p = Pair::new(&Script::ALL, &[]);
    let mut rng = Rng(0x5EED_0035_0001);
    let mut counts = [0usize; 5];
    let mut errors = 0;
    let mut now = T0;
    for n in 0..800 {
        if rng.below(10) == 0 {
            now += [1, 999, 120_000][rng.below(3) as usize];
            let t = now.to_string();
            for c in [&mut p.cl, &mut p.cn] {
                let _: Value = cmd(c, &["IMID.TEST-CLOCK", "FREEZE", &t]).unwrap();
            }
        }
        let c = random_call(&mut rng, n);
        let r = p.run(&c);
        let i = Script::ALL.iter().position(|s| *s == c.script).unwrap();
        match r {
            Err(_) => errors += 1,
            Ok(_) => counts[i] += 1,
        }
        if n % 200 == 199 {
            p.assert_same_state();
        }
    }
    p.assert_same_state();
    assert!(
        counts.iter().all(|&c| c > 50) && errors > 20,
        "{counts:?} {errors}"
    );
    // the run reached trimmed logs and inboxes
    let markers: Vec<String> = cmd(&mut p.cn, &["KEYS", "*trimmed*"]).unwrap();
    assert!(markers.len() > 3, "{markers:?}");
}

/// A primary with the fence on (one replica, `timeout` ms) and its replica, both online and the
/// first acknowledgement in.
fn fenced(timeout: &str) -> (Server, Server) {
    let p = Server::with(&[
        "--imid.fence-replicas",
        "1",
        "--imid.fence-timeout",
        timeout,
    ]);
    let r = p.replica(&[]);
    wait_until("the fence is on", 10, || p.imid_stat("fence_replicas") == 1);
    p.wait_replicas_online(1);
    let _: i64 = cmd(&mut p.client(), &["SEQ.NEXT", "warm"]).unwrap();
    (p, r)
}

fn page_of(r: &Reply) -> Vec<Value> {
    match r {
        Ok(Value::Array(v)) => match &v[4] {
            Value::Array(p) => p.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

/// The measured bug: with the fence on and the replica stopped, a send that waits and
/// then gets NOREPLICAS has written its inbox members already (ZRANGE shows them); IM.SYNC and
/// IM.PULL on the primary show none of them, nor their seqs, until the replica acknowledges;
/// then they do.
#[test]
fn a_fenced_primary_shows_no_reader_what_its_replicas_have_not_acknowledged() {
    let (p, r) = fenced("300");
    let mut con = p.client();
    // Acknowledged before the pause: shown at once.
    let first = Call::send("f", &["bob"], 1, "alice", "c0", "before", "100");
    native(&mut con, &first).unwrap();
    let ch = Call::change("bob", "friend", "added carol", "100");
    native(&mut con, &ch).unwrap();
    let sync = Call::sync("f", "bob", "0", "100");
    assert_eq!(page_of(&native(&mut con, &sync)).len(), 2);
    let paused = Paused::of(&r);
    let mut sent = 0;
    for i in 1..=3 {
        let c = Call::send("f", &["bob"], 1, "alice", &format!("c{i}"), "lost?", "100");
        let e = native(&mut con, &c).unwrap_err();
        assert!(e.starts_with("NOREPLICAS"), "{e}");
        sent += 1;
    }
    // A plain reservation within the fence's budget answers at once (docs/durability.md); its
    // change is written all the same, and not acknowledged.
    let _ = native(&mut con, &Call::change("bob", "friend", "added dan", "100"));
    // The sends wrote their members: what sync.lua would hand out.
    let members: Vec<String> = cmd(&mut con, &["ZRANGE", "{conv:f}:inbox:bob", "0", "-1"]).unwrap();
    assert_eq!(members.len(), 1 + sent);
    // The native reads show none of them: they wait, then NOREPLICAS (or are refused at once).
    let r1 = native(&mut con, &sync);
    assert!(
        matches!(&r1, Err(e) if e.starts_with("NOREPLICAS")),
        "IM.SYNC showed {r1:?}"
    );
    let pull = Call::pull("bob", &[("friend", "0")]);
    let r2 = native(&mut con, &pull);
    assert!(
        matches!(&r2, Err(e) if e.starts_with("NOREPLICAS")),
        "IM.PULL showed {r2:?}"
    );
    // A read that waits is answered once the replica acknowledges, with everything.
    config_set(&mut con, "imid.fence-timeout", "30000");
    let waiting = call_in_background(&p, &sync.native_argv());
    p.wait_until("the sync waits", 20, || p.imid_stat("fence_waiting") >= 1);
    drop(paused);
    let got = reply(
        waiting
            .recv_timeout(Duration::from_secs(30))
            .expect("no answer within 30 s"),
    );
    assert_eq!(page_of(&got).len(), 2 * (1 + sent), "{got:?}");
    let pulled = native(&mut con, &pull).unwrap();
    let added = texts(&pulled)
        .iter()
        .filter(|t| t.starts_with("added"))
        .count();
    assert_eq!(added, 2, "{pulled:?}");
}

/// What a read on a replica guarantees: every message whose send the fenced primary answered is
/// there at once (IM.SEND answers only once every replica of the term acknowledged it: its IDMP
/// record waits); a change only once the replica acknowledged it (IM.CHANGE may answer within
/// the fence's budget). The read-only commands run there, the writes are refused.
#[test]
fn a_read_on_a_replica_shows_every_answered_send() {
    let (p, r) = fenced("5000");
    let mut con = p.client();
    let mut rc = r.client();
    for i in 0..20 {
        let c = Call::send("g", &["bob"], 1, "alice", &format!("c{i}"), "hi", "100");
        native(&mut con, &c).unwrap();
        let k = native(
            &mut con,
            &Call::change("bob", "group", &format!("chg{i}"), "100"),
        )
        .unwrap();
        // No WAIT: the answer itself says the replica holds it.
        let page = page_of(&native(&mut rc, &Call::sync("g", "bob", "0", "1000")));
        assert_eq!(
            page.len(),
            2 * (i + 1),
            "send {i} answered, not on the replica"
        );
        // An answered IM.CHANGE may have answered within the fence's budget, before the
        // replica acknowledged: no such promise; once WAIT says so, the replica shows it.
        let _: i64 = cmd(&mut con, &["WAIT", "1", "0"]).unwrap();
        let pulled = native(&mut rc, &Call::pull("bob", &[("group", "0")])).unwrap();
        let changes = texts(&pulled)
            .iter()
            .filter(|t| t.starts_with("chg"))
            .count();
        assert_eq!(changes, i + 1, "{k:?} {pulled:?}");
    }
    for c in [
        Call::read("g", "bob", "3"),
        Call::change("bob", "group", "x", "5"),
    ] {
        let e = native(&mut rc, &c).unwrap_err();
        assert!(e.starts_with("READONLY"), "{e}");
    }
}

/// Every bulk string of a reply, depth first.
fn texts(v: &Value) -> Vec<String> {
    match v {
        Value::BulkString(b) => vec![String::from_utf8_lossy(b).into_owned()],
        Value::Array(a) => a.iter().flat_map(texts).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn key_specs_and_getkeys_name_every_key() {
    let s = Server::start();
    let mut con = s.client();
    let mut calls = vec![
        Call::sync("k", "bob", "0", "10"),
        Call::read("k", "bob", "3"),
        Call::change("bob", "friend", "x", "5"),
        Call::pull("bob", &[("friend", "0")]),
        Call::pull("bob", &[("friend", "0"), ("group", "3"), ("conv", "7")]),
    ];
    let mut set = Call::change("bob", "friend", "x", "5");
    set.keys.insert(0, "PREFIX".into());
    calls.push(set);
    for c in &calls {
        let mut argv = c.native_argv();
        if c.keys.first().map(String::as_str) == Some("PREFIX") {
            argv[0] = "IM.CHANGESET".into();
            argv[1] = "7".into();
        }
        let mut args = vec!["COMMAND".to_owned(), "GETKEYS".to_owned()];
        args.extend(argv);
        let mut got: Vec<String> = cmd(&mut con, &args).unwrap();
        got.sort();
        let mut want: Vec<String> = c.keys.iter().filter(|k| *k != "PREFIX").cloned().collect();
        want.sort();
        assert_eq!(got, want, "{c:?}");
    }
    // read-only where they only read: IM.SYNC and IM.PULL are readonly commands
    for (name, flag) in [
        ("im.sync", "readonly"),
        ("im.pull", "readonly"),
        ("im.read", "write"),
        ("im.change", "write"),
    ] {
        let info: Vec<Vec<Value>> = cmd(&mut con, &["COMMAND", "INFO", name]).unwrap();
        assert!(
            format!("{:?}", info[0][2]).contains(flag),
            "{name}: {:?}",
            info[0][2]
        );
    }
}

/// IM.READ and IM.CHANGE replicate exactly: a replica and the AOF (after a restart, and after a
/// rewrite) reach the primary's data; IM.CHANGESET, the explicit form, too.
#[test]
fn replicas_and_the_aof_reach_the_primarys_state() {
    let primary = Server::with(&aof_always("no"));
    let replica = primary.replica(&[]);
    let mut con = primary.client();
    let mut rng = Rng(0x5EED_0035_0002);
    for n in 0..300 {
        let _ = native(&mut con, &random_call(&mut rng, n));
    }
    ok(
        &mut con,
        &[
            "IM.CHANGESET",
            "5000",
            "app:seq:{zed}",
            "app:trimmed:{zed}",
            "app:log:{zed}:friend",
            "friend",
            "x",
            "1",
        ],
    );
    let _ = native(&mut con, &Call::change("zed", "friend", "y", "1"));
    primary.wait_replica(&replica);
    let want = digest(&primary);
    assert_eq!(digest(&replica), want, "the replica");
    let aof = aof_incr(&primary);
    for c in [&b"IM.READ"[..], b"IM.CHANGE", b"IM.CHANGESET"] {
        assert!(
            contains(&aof, c),
            "{} not in the AOF",
            String::from_utf8_lossy(c)
        );
    }
    let mut primary = primary;
    primary.restart();
    assert_eq!(digest(&primary), want, "after a restart from the AOF");
    primary.rewrite_aof();
    primary.restart();
    assert_eq!(digest(&primary), want, "after a rewrite and a restart");
    let v: Vec<i64> = cmd(
        &mut primary.client(),
        &["SEQ.HMGET", "app:seq:{zed}", "friend"],
    )
    .unwrap();
    assert_eq!(v, [5001]);
}

/// A refused IM.READ or IM.CHANGE writes nothing, where the script had written part of its work
/// before it reached the wrong-typed key.
#[test]
fn a_refused_read_or_change_writes_nothing() {
    let s = Server::start();
    let mut con = s.client();
    let shas = load_scripts(&mut con, &Script::ALL);
    ok(&mut con, &["SET", "{conv:w}:inbox:bob", "not a zset"]);
    ok(&mut con, &["SET", "app:log:{bob}:friend", "not a zset"]);
    ok(&mut con, &["SEQ.SET", "{conv:w}:seq", "9"]);
    let before = digest(&s);
    for c in [
        Call::read("w", "bob", "5"),
        Call::change("bob", "friend", "x", "5"),
    ] {
        let e = native(&mut con, &c).unwrap_err();
        assert!(e.starts_with("WRONGTYPE"), "{e}");
        assert_eq!(digest(&s), before, "{c:?} wrote");
        let e = lua(&mut con, &shas, &c).unwrap_err();
        assert!(e.starts_with("WRONGTYPE"), "{e}");
        // read.lua writes the cursor before it reaches the inbox; change.lua reads the log
        // first now (the kind it records), so it fails before writing too
        if c.script == Script::Read {
            assert_ne!(
                digest(&s),
                before,
                "the script wrote before it failed: {c:?}"
            );
        } else {
            assert_eq!(digest(&s), before, "{c:?}");
        }
        int_reply(&mut con, &["DEL", "{conv:w}:read", "app:seq:{bob}"]);
        assert_eq!(digest(&s), before);
    }
}

/// IM.READ counts a few unread by walking them and many by ZCOUNT: both agree with read.lua.
#[test]
fn unread_counts_agree_with_the_script_few_or_many() {
    let mut p = Pair::new(&Script::ALL, &[]);
    for i in 0..150 {
        p.run(&Call::send(
            "u",
            &["bob"],
            1,
            "alice",
            &format!("c{i}"),
            "hi",
            "1000",
        ))
        .unwrap();
    }
    for upto in ["0", "1", "10", "85", "86", "87", "100", "149", "150", "151"] {
        let r = p.run(&Call::read("u", "bob", upto));
        let Ok(Value::Array(v)) = &r else {
            panic!("{r:?}")
        };
        assert_eq!(
            v[1],
            Value::Int(150 - upto.parse::<i64>().unwrap().min(150)),
            "{upto}"
        );
        // the cursor never moves back: re-read from a fresh map each time
        let _: i64 = cmd(&mut p.cl, &["DEL", "{conv:u}:read"]).unwrap();
        let _: i64 = cmd(&mut p.cn, &["DEL", "{conv:u}:read"]).unwrap();
    }
    p.assert_same_state();
}

/// In Cluster, IM.SYNC and IM.PULL run on a replica after READONLY (read-only commands whose keys
/// are in the replica's primary's slots), IM.READ and IM.CHANGE are redirected to the primary
/// (MOVED), and keys of another slot are CROSSSLOT.
#[test]
fn a_cluster_replica_serves_the_reads_after_readonly() {
    use common::cluster::{key_of_another_slot, tags_in, Cluster};
    let mut cluster = Cluster::start(None, &[], 0..1);
    let t = tags_in(0..1, 1).remove(0);
    let owner = cluster.owner(slot(&t));
    let mut con = cluster.nodes[owner].client();
    let send = Call {
        script: Script::Send,
        keys: vec![
            format!("{{{t}}}"),
            format!("{{{t}}}:seq"),
            format!("{{{t}}}:inbox:bob"),
            format!("{{{t}}}:trimmed:bob"),
        ],
        args: strs(&["1", "alice", "c1", "hi", "5"]),
    };
    native(&mut con, &send).unwrap();
    let sync = Call {
        script: Script::Sync,
        keys: vec![
            format!("{{{t}}}:seq"),
            format!("{{{t}}}:inbox:bob"),
            format!("{{{t}}}:trimmed:bob"),
        ],
        args: strs(&["0", "10"]),
    };
    let change = Call {
        script: Script::Change,
        keys: vec![
            format!("{{{t}}}:s"),
            format!("{{{t}}}:tr"),
            format!("{{{t}}}:log:f"),
        ],
        args: strs(&["f", "x", "5"]),
    };
    native(&mut con, &change).unwrap();
    let pull = Call {
        script: Script::Pull,
        keys: change.keys.clone(),
        args: strs(&["f", "0"]),
    };
    let want_sync = native(&mut con, &sync).unwrap();
    let want_pull = native(&mut con, &pull).unwrap();
    let r = cluster.add_replica(owner, &[]);
    let mut rc = cluster.nodes[r].client();
    let e = native(&mut rc, &sync).unwrap_err();
    assert!(e.starts_with("MOVED"), "without READONLY: {e}");
    ok(&mut rc, &["READONLY"]);
    wait_until("the replica holds the send", 30, || {
        native(&mut rc, &sync).ok() == Some(want_sync.clone())
    });
    assert_eq!(native(&mut rc, &pull).unwrap(), want_pull);
    for c in [&change, &Call::read(&t, "bob", "1")] {
        let mut c = c.clone();
        if c.script == Script::Read {
            c.keys = vec![
                format!("{{{t}}}:read"),
                format!("{{{t}}}:inbox:bob"),
                format!("{{{t}}}:seq"),
            ];
        }
        let e = native(&mut rc, &c).unwrap_err();
        assert!(e.starts_with("MOVED"), "{c:?}: {e}");
    }
    let mut bad = sync.clone();
    bad.keys[1] = key_of_another_slot(&t);
    let e = native(&mut con, &bad).unwrap_err();
    assert!(e.starts_with("CROSSSLOT"), "{e}");
}

/// A promoted replica's first IM.CHANGE of a kind skips `imid.seq-gap` (the field came from its
/// old primary): replaying IM.CHANGE would not, so it replicates IM.CHANGESET, and its own
/// replica reaches its data.
#[test]
fn a_change_that_skips_the_gap_replicates_its_explicit_effect() {
    let p = Server::start();
    let r = p.replica(&[]);
    let mut con = p.client();
    let c = Call::change("gap", "friend", "a", "10");
    assert_eq!(native(&mut con, &c).unwrap(), Value::Int(1));
    p.wait_replica(&r);
    let mut rc = r.client();
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    let r2 = r.replica(&[]);
    let got = native(&mut rc, &Call::change("gap", "friend", "b", "10")).unwrap();
    let gap: i64 = config(&mut rc, "imid.seq-gap").parse().unwrap();
    assert_eq!(got, Value::Int(2 + gap), "the gap skipped");
    let again = native(&mut rc, &Call::change("gap", "friend", "c", "10")).unwrap();
    assert_eq!(again, Value::Int(3 + gap));
    r.wait_replica(&r2);
    assert_eq!(digest(&r2), digest(&r));
    let pulled = native(&mut r2.client(), &Call::pull("gap", &[("friend", "0")])).unwrap();
    let changes = texts(&pulled);
    assert_eq!(changes, ["friend", "a", "b", "c"], "{pulled:?}");
}
