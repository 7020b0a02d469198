//! UID.GEN / DECODE / ENCODE and the `imid.uid-*` configs against a real server: encode and
//! decode tables for the Snowflake, UidGenerator (seconds) and cluster layouts, refused
//! layouts, generation under concurrent pipelined clients, the shared time lease, random and
//! malformed input.
use crate::common;
use common::*;
use std::collections::HashSet;

const EPOCH: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z, the default imid.uid-epoch
const MAX: i64 = i64::MAX;

/// (time, node, seq) of UID.DECODE under RESP2 (a flat name/value array).
fn decode(con: &mut Connection, uid: i64) -> (i64, i64, i64) {
    let v: Vec<Value> = cmd(con, &["UID.DECODE", &uid.to_string()]).unwrap();
    let names: Vec<String> = [&v[0], &v[2], &v[4]]
        .iter()
        .map(|n| redis::from_redis_value((*n).clone()).unwrap())
        .collect();
    assert_eq!(names, ["time", "node", "seq"]);
    let as_i64 = |x: &Value| -> i64 { redis::from_redis_value(x.clone()).unwrap() };
    (as_i64(&v[1]), as_i64(&v[3]), as_i64(&v[5]))
}

fn encode(con: &mut Connection, t: i64, node: i64, seq: i64) -> redis::RedisResult<i64> {
    cmd(
        con,
        &[
            "UID.ENCODE",
            &t.to_string(),
            &node.to_string(),
            &seq.to_string(),
        ],
    )
}

/// Checks every (time, node, seq) <-> uid row both ways on the server.
fn check_table(con: &mut Connection, rows: &[(i64, i64, i64, i64)]) {
    for &(t, n, s, uid) in rows {
        assert_eq!(encode(con, t, n, s).unwrap(), uid, "encode {t} {n} {s}");
        assert_eq!(decode(con, uid), (t, n, s), "decode {uid}");
    }
}

/// Each (time_ms, node, seq) must be refused with exactly this error.
fn check_refusals(con: &mut Connection, rows: &[(&str, &str, &str, &str)]) {
    for (t, n, s, want) in rows {
        let e = expect_err(
            con,
            &[b"UID.ENCODE", t.as_bytes(), n.as_bytes(), s.as_bytes()],
        );
        assert_eq!(e, *want, "UID.ENCODE {t} {n} {s}");
    }
}

#[test]
fn snowflake_layout_table_with_edges() {
    let s = Server::start(); // auto = 41,10,12 in ms standalone
    let mut con = s.client();
    let last = EPOCH + (1 << 41) - 1;
    check_table(
        &mut con,
        &[
            (EPOCH, 0, 0, 0),
            (EPOCH, 0, 1, 1),
            (EPOCH, 1, 0, 1 << 12),
            (EPOCH + 1, 0, 0, 1 << 22),
            (EPOCH + 1, 1, 1, (1 << 22) | (1 << 12) | 1),
            (EPOCH, 1023, 4095, (1 << 22) - 1),
            (last, 0, 0, ((1 << 41) - 1) << 22),
            (last, 1023, 4095, MAX),
        ],
    );
    let last_s = last.to_string();
    let past = (last + 1).to_string();
    let before = (EPOCH - 1).to_string();
    let range = format!("ERR time_ms must be an integer in {EPOCH}..{last}");
    check_refusals(
        &mut con,
        &[
            (&before, "0", "0", "ERR time_ms must be at or after imid.uid-epoch (1767225600000)"),
            (&past, "0", "0", &format!("ERR time_ms must be at most {last}: the layout's time field ends on 2095-09-07T15:47:35Z")),
            ("-1", "0", "0", &range),
            ("1.5", "0", "0", &range),
            ("x", "0", "0", &range),
            ("9223372036854775808", "0", "0", &range),
            (&last_s, "1024", "0", "ERR node must be an integer in 0..1023"),
            (&last_s, "-1", "0", "ERR node must be an integer in 0..1023"),
            (&last_s, "0", "4096", "ERR seq must be an integer in 0..4095"),
            (&last_s, "0", "-1", "ERR seq must be an integer in 0..4095"),
            (&last_s, "0", "", "ERR seq must be an integer in 0..4095"),
        ],
    );
    // Decoding: every value in 0..2^63-1 is an ID; anything else is an error.
    for bad in [
        "-1",
        "9223372036854775808",
        "18446744073709551616",
        "",
        " 1",
        "1 ",
        "+1",
        "01",
        "-0",
        "1.0",
        "1e3",
        "0x10",
        "abc",
    ] {
        let e = expect_err(&mut con, &[b"UID.DECODE", bad.as_bytes()]);
        assert_eq!(
            e, "ERR uid must be an integer in 0..9223372036854775807",
            "{bad:?}"
        );
    }
    assert_eq!(
        s.imid_stat("uid_time_ends_ms"),
        EPOCH + (1 << 41),
        "INFO shows when the layout runs out"
    );
}

#[test]
fn discord_documented_snowflake_decodes_with_its_epoch() {
    // Discord's documented example, epoch 2015-01-01: 2016-04-30T11:18:25.796Z, worker 1,
    // process 0 (node 1 << 5 = 32), increment 7.
    let s = Server::with(&["--imid.uid-epoch", "1420070400000"]);
    let mut con = s.client();
    check_table(
        &mut con,
        &[(1_462_015_105_796, 32, 7, 175_928_847_299_117_063)],
    );
}

#[test]
fn uidgenerator_seconds_layout_table_with_edges() {
    let s = Server::with(&["--imid.uid-layout", "28,22,13", "--imid.uid-time-unit", "s"]);
    let mut con = s.client();
    let last = EPOCH + ((1 << 28) - 1) * 1000;
    check_table(
        &mut con,
        &[
            (EPOCH, 0, 0, 0),
            (EPOCH + 1000, 0, 0, 1 << 35),
            (EPOCH + 1000, 5, 17, (1 << 35) | (5 << 13) | 17),
            (EPOCH, (1 << 22) - 1, 8191, (1 << 35) - 1),
            (last, (1 << 22) - 1, 8191, MAX),
        ],
    );
    let not_whole =
        "ERR time_ms must be imid.uid-epoch plus a whole number of seconds (imid.uid-time-unit)";
    let half = (EPOCH + 1500).to_string();
    let last_plus = (last + 1).to_string();
    let past = (last + 1000).to_string();
    check_refusals(
        &mut con,
        &[
            (&half, "0", "0", not_whole),
            (&last_plus, "0", "0", not_whole),
            (&past, "0", "0", &format!("ERR time_ms must be at most {last}: the layout's time field ends on 2034-07-04T21:24:16Z")),
            (&half, "4194304", "0", "ERR node must be an integer in 0..4194303"),
            (&half, "0", "8192", "ERR seq must be an integer in 0..8191"),
        ],
    );
    // A generated ID's time is a whole second.
    let uid: i64 = cmd(&mut con, &["UID.GEN", "t"]).unwrap();
    let (t, node, seq) = decode(&mut con, uid);
    assert_eq!((t - EPOCH) % 1000, 0);
    assert_eq!((node, seq), (0, 0));
    assert!((server_time_ms(&mut con) - t).abs() < 60_000, "{t}");
    assert_eq!(s.imid_stat("uid_time_ends_ms"), EPOCH + (1 << 28) * 1000);
}

#[test]
fn cluster_layout_table_with_edges() {
    // The cluster layout, here on a standalone server with a worker number.
    let s = Server::with(&["--imid.uid-layout", "41,14,8", "--imid.uid-node", "16383"]);
    let mut con = s.client();
    check_table(
        &mut con,
        &[
            (EPOCH, 16_383, 255, (1 << 22) - 1),
            (EPOCH + 7, 12_182, 3, (7 << 22) | (12_182 << 8) | 3),
            (EPOCH + (1 << 41) - 1, 16_383, 255, MAX),
        ],
    );
    check_refusals(
        &mut con,
        &[
            (
                "1767225600000",
                "16384",
                "0",
                "ERR node must be an integer in 0..16383",
            ),
            (
                "1767225600000",
                "0",
                "256",
                "ERR seq must be an integer in 0..255",
            ),
        ],
    );
    let ids = uids(&mut con, 600, "anything");
    assert_increasing("UIDs", &ids);
    assert!(ids.iter().all(|&u| decode(&mut con, u).1 == 16_383));
}

#[test]
fn configs_show_and_cannot_change_at_runtime() {
    let s = Server::with(&[
        "--imid.uid-layout",
        "30,20,13",
        "--imid.uid-time-unit",
        "s",
        "--imid.uid-node",
        "77",
        "--imid.uid-epoch",
        "1760000000000",
    ]);
    let mut con = s.client();
    let mut pairs = reply_pairs(&mut con, &["CONFIG", "GET", "imid.uid-*"]).unwrap();
    pairs.sort();
    assert_eq!(
        pairs,
        [
            ("imid.uid-epoch".into(), "1760000000000".into()),
            ("imid.uid-layout".into(), "30,20,13".into()),
            ("imid.uid-node".into(), "77".into()),
            ("imid.uid-time-unit".into(), "s".into()),
        ]
    );
    for (name, value) in [
        ("imid.uid-layout", "41,10,12"),
        ("imid.uid-layout", "30,20,13"),
        ("imid.uid-node", "5"),
        ("imid.uid-epoch", "1760000000000"),
        ("imid.uid-time-unit", "ms"),
    ] {
        let e = cmd::<String>(&mut con, &["CONFIG", "SET", name, value]).unwrap_err();
        assert!(
            err_text(&e).contains("can't set immutable config"),
            "{name}: {e}"
        );
    }
    let uid: i64 = cmd(&mut con, &["UID.GEN", "t"]).unwrap();
    let (t, node, _) = decode(&mut con, uid);
    assert_eq!(node, 77);
    assert_eq!((t - 1_760_000_000_000) % 1000, 0);
    assert_eq!(
        s.imid_stat("uid_time_ends_ms"),
        1_760_000_000_000 + (1 << 30) * 1000
    );
}

#[test]
fn module_arguments_set_the_defaults() {
    // `--loadmodule libimid.so uid-node 9 uid-layout 40,11,12`
    let s = Server::with(&["uid-node", "9", "uid-layout", "40,11,12"]);
    let mut con = s.client();
    let uid: i64 = cmd(&mut con, &["UID.GEN", "t"]).unwrap();
    assert_eq!(decode(&mut con, uid).1, 9);
    assert_eq!(config(&mut con, "imid.uid-layout"), "40,11,12");
}

#[test]
fn refused_layouts_stop_the_load_and_say_why() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let day = 86_400_000i64;
    // 35 bits of ms last 397.7 days: from 200 days ago that ends within a year, from 400
    // days ago it has ended.
    let soon = (now - 200 * day).to_string();
    let gone = (now - 400 * day).to_string();
    let future = (now + day).to_string();
    // (imid.uid-layout given alone, what the log says)
    #[rustfmt::skip]
    let layouts = [
        // A named scheme that has run out is refused like its widths are.
        ("uidgenerator", "imid.uid-layout has run out: its time field ended on 2024-11-20T21:24:16Z"),
        ("41,10,14", "imid.uid-layout widths must sum to 63 (or 64, the time field's top bit kept 0), not 65"),
        ("node:10,time:41,seq:12", "imid.uid-layout must name time first"),
        ("time:41,node:10,node:12", "imid.uid-layout names the node field twice"),
        ("snowflake", "imid.uid-layout must be auto, a named layout (twitter, discord, instagram, sonyflake, sonyflake-v2, uidgenerator, mastodon)"),
        ("0,31,32", "imid.uid-layout time width must be at least 1"),
        ("41,10", "imid.uid-layout must be auto, a named layout"),
        ("63,0,0", "reaches past the largest Unix time"),
    ];
    for (layout, want) in layouts {
        refused_load(&["--imid.uid-layout", layout], want);
    }
    #[rustfmt::skip]
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // UidGenerator's default layout and epoch ran out on 2024-11-20.
        (vec!["--imid.uid-layout", "28,22,13", "--imid.uid-time-unit", "s", "--imid.uid-epoch", "1463702400000"], "imid.uid-layout has run out: its time field ended on 2024-11-20T21:24:16Z"),
        (vec!["--imid.uid-layout", "35,14,14", "--imid.uid-epoch", &soon], "within a year"),
        (vec!["--imid.uid-layout", "35,14,14", "--imid.uid-epoch", &gone], "imid.uid-layout has run out"),
        (vec!["--imid.uid-epoch", &future], "is after the server clock"),
        (vec!["--imid.uid-time-unit", "0ms"], "imid.uid-time-unit must be auto, ms, s, or a whole number of them"),
        (vec!["--imid.uid-time-unit", "us"], "imid.uid-time-unit"),
        (vec!["--imid.uid-epoch", "1e3"], "imid.uid-epoch must be auto or Unix ms"),
        (vec!["--imid.uid-epoch", "-1"], "imid.uid-epoch"),
        (vec!["--imid.uid-node", "1024"], "imid.uid-node 1024 does not fit the layout's 10 node bits (0..1023)"),
        (vec!["--imid.uid-node", "-1"], "imid.uid-node must be auto or a non-negative integer"),
        (vec!["--imid.uid-layout", "twitter", "--imid.uid-node", "1024"], "imid.uid-node 1024 does not fit the layout's 10 node bits (0..1023)"),
        // Cluster mode: a named layout with fewer than 14 node bits needs a fixed node.
        (vec!["--cluster-enabled", "yes", "--imid.uid-layout", "instagram"], "needs at least 14 node bits; the layout has 13: set imid.uid-node to this node's worker number (0..8191)"),
        // In cluster mode `auto` puts the slot (14 bits) in the node field.
        (vec!["--cluster-enabled", "yes", "--imid.uid-layout", "41,10,12"], "needs at least 14 node bits; the layout has 10"),
    ];
    for (args, want) in &cases {
        refused_load(args, want);
    }
}

#[test]
fn module_loadex_with_a_refused_layout_leaves_no_module_behind() {
    let (s, module) = Server::loadable("yes");
    let mut con = s.client();
    let e = loadex(
        &mut con,
        &module,
        &[
            ("imid.uid-layout", "28,22,13"),
            ("imid.uid-time-unit", "s"),
            ("imid.uid-epoch", "1463702400000"),
        ],
    )
    .unwrap_err();
    assert!(e.starts_with("ERR"), "{e}");
    let e = cmd::<i64>(&mut con, &["UID.ENCODE", "1767225600000", "0", "0"]).unwrap_err();
    assert!(err_text(&e).contains("unknown command"), "{e}");
    let configs = [("imid.uid-layout", "28,22,13"), ("imid.uid-time-unit", "s")];
    loadex(&mut con, &module, &configs).unwrap();
    assert_eq!(encode(&mut con, EPOCH + 1000, 0, 0).unwrap(), 1 << 35);
}

#[test]
fn gen_replies_an_integer_or_an_increasing_array() {
    let s = Server::start();
    let mut con = s.client();
    let before = server_time_ms(&mut con);
    let one: i64 = cmd(&mut con, &["UID.GEN", "conv:1"]).unwrap();
    assert!(one > 0);
    let (t, node, _) = decode(&mut con, one);
    let after = server_time_ms(&mut con);
    assert!(
        before - 5 <= t && t <= after + 5,
        "{before} <= {t} <= {after}"
    );
    assert_eq!(node, 0, "auto standalone: node 0");
    // COUNT n: an array of n strictly increasing IDs, even for n = 1.
    let v: Vec<i64> = cmd(&mut con, &["UID.GEN", "conv:1", "COUNT", "1"]).unwrap();
    assert_eq!(v.len(), 1);
    assert!(v[0] > one);
    let v: Vec<i64> = cmd(&mut con, &["UID.GEN", "conv:1", "count", "10000"]).unwrap();
    assert_eq!(v.len(), 10_000);
    assert_increasing("UID.GEN COUNT 10000", &v);
    let next: i64 = cmd(&mut con, &["UID.GEN", "other"]).unwrap();
    assert!(next > v[9_999], "one lane per node: every target shares it");
    // The last COUNT wins, as options usually do.
    let v: Vec<i64> = cmd(&mut con, &["UID.GEN", "t", "COUNT", "9", "COUNT", "3"]).unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(s.imid_stat("uid_generated"), 1 + 1 + 10_000 + 1 + 3);
    // The batch of 10,000 read the clock once and holds 4096 per ms: it borrowed at least two.
    assert!(s.imid_stat("uid_borrowed_units") >= 2);
}

#[test]
fn argument_errors_name_the_rule_and_change_nothing() {
    let s = Server::start();
    let mut con = s.client();
    let count = "ERR COUNT must be an integer in 1..10000";
    let cases: &[(&[&[u8]], &str)] = &[
        (&[b"UID.GEN", b"t", b"COUNT", b"0"], count),
        (&[b"UID.GEN", b"t", b"COUNT", b"10001"], count),
        (&[b"UID.GEN", b"t", b"COUNT", b"-1"], count),
        (&[b"UID.GEN", b"t", b"COUNT", b"1.0"], count),
        (&[b"UID.GEN", b"t", b"COUNT", b""], count),
        (&[b"UID.GEN", b"t", b"COUNT"], "ERR syntax error"),
        (&[b"UID.GEN", b"t", b"LIMIT", b"5"], "ERR syntax error"),
        (&[b"UID.GEN", b"t", b"5"], "ERR syntax error"),
        (&[b"UID.GEN", b"t", b"STRINGS"], "ERR syntax error"),
        (&[b"UID.GEN", b"t", b"STRING", b"COUNT"], "ERR syntax error"),
        (
            &[b"UID.GEN", b"t", b"COUNT", b"5", b"x"],
            "ERR syntax error",
        ),
        (
            &[b"UID.GEN"],
            "ERR wrong number of arguments for 'uid.gen' command",
        ),
        (
            &[b"UID.DECODE"],
            "ERR wrong number of arguments for 'uid.decode' command",
        ),
        (&[b"UID.DECODE", b"1", b"2"], "ERR syntax error"),
        (
            &[b"UID.ENCODE", b"1", b"2"],
            "ERR wrong number of arguments for 'uid.encode' command",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(expect_err(&mut con, args), *want, "{args:?}");
    }
    assert_eq!(
        s.imid_stat("uid_generated"),
        0,
        "refused calls issue nothing"
    );
    assert_eq!(s.imid_stat("msgid_lease_renewals"), 0, "and write no lease");
}

#[test]
fn concurrent_pipelined_clients_get_unique_increasing_ids() {
    let s = Server::start();
    let per_client = on_clients(&s, 4, |t, con| {
        let mut got = Vec::new();
        for round in 0..20 {
            let mut p = redis::pipe();
            for i in 0..250 {
                if (i + round + t) % 50 == 0 {
                    p.cmd("UID.GEN")
                        .arg(format!("conv:{i}"))
                        .arg("COUNT")
                        .arg(20);
                } else {
                    p.cmd("UID.GEN").arg(format!("conv:{i}"));
                }
            }
            for v in p.query::<Vec<Value>>(con).unwrap() {
                match v {
                    Value::Int(u) => got.push(u),
                    Value::Array(a) => got.extend(
                        a.into_iter()
                            .map(|x| redis::from_redis_value::<i64>(x).unwrap()),
                    ),
                    other => panic!("{other:?}"),
                }
            }
        }
        got
    });
    let mut all = Vec::new();
    for got in per_client {
        // Each client sees its IDs in increasing order (one lane per node).
        assert_increasing("one client's UIDs", &got);
        all.extend(got);
    }
    let n = all.len();
    assert!(n > 4 * 20 * 250, "{n}");
    assert_eq!(
        all.iter().collect::<HashSet<_>>().len(),
        n,
        "a UID repeated"
    );
    assert_eq!(s.imid_stat("uid_generated"), n as i64);
}

#[test]
fn uids_have_a_time_lease_of_their_own() {
    let s = Server::with(&["--imid.uid-time-unit", "s", "--imid.uid-layout", "30,20,13"]);
    let mut con = s.client();
    // 10,000 IDs on one clock reading at 8192 per second borrow the next second ...
    let ids: Vec<i64> = cmd(&mut con, &["UID.GEN", "t", "COUNT", "10000"]).unwrap();
    assert_increasing("UID.GEN COUNT 10000", &ids);
    let (first_time, _, _) = decode(&mut con, ids[0]);
    let (last_time, _, _) = decode(&mut con, *ids.last().unwrap());
    assert!(last_time > first_time);
    assert!(s.imid_stat("uid_borrowed_units") >= 1);
    // ... and the UID high-water mark (INFO, RDB aux data, UID.FLOOR) stays above them,
    let hwm = s.imid_stat("uid_high_water_ms");
    assert!(hwm > last_time, "{hwm} <= {last_time}");
    assert!(s.imid_stat("uid_lease_renewals") >= 1);
    // while the message-ID lease never moved: UIDs' borrowed seconds are not message IDs'.
    assert_eq!(s.imid_stat("msgid_high_water_ms"), 0);
    assert_eq!(s.imid_stat("msgid_lease_renewals"), 0);
    let _: String = cmd(&mut con, &["MSGID.GEN", "1", "t"]).unwrap();
}

#[test]
fn lease_renewals_reach_replicas_and_the_aof() {
    let primary = Server::with(&AOF_ALWAYS);
    let replica = primary.replica(&[]);
    let mut con = primary.client();
    let uid: i64 = cmd(&mut con, &["UID.GEN", "t"]).unwrap();
    let (t, _, _) = decode(&mut con, uid);
    primary.wait_replica(&replica);
    // Only UIDs were issued: their lease reached the replica as UID.FLOOR.
    assert!(replica.imid_stat("uid_high_water_ms") > t);
    assert_eq!(
        replica.imid_stat("uid_high_water_ms"),
        primary.imid_stat("uid_high_water_ms")
    );
    assert_eq!(replica.imid_stat("msgid_high_water_ms"), 0);
    assert_eq!(primary.imid_stat("msgid_generated"), 0);
    let dir = primary.dir.join("appendonlydir");
    let aof: String = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()).into_owned())
        .collect();
    assert!(aof.contains("UID.FLOOR"), "{aof}");
    // A replica refuses UID.GEN; its decoders work.
    let mut rcon = replica.client();
    let e = cmd::<i64>(&mut rcon, &["UID.GEN", "t"]).unwrap_err();
    assert!(err_text(&e).starts_with("READONLY"), "{e}");
    assert_eq!(decode(&mut rcon, uid).0, t);
}

#[test]
fn continuing_an_existing_numbering_with_a_floor() {
    // A Snowflake fleet's worker 5 last issued an ID 20 s ahead of this server's clock (its
    // clock ran fast). Same layout and epoch, worker 5, and a floor one unit past that ID's
    // time: the first UID lies above it.
    let s = Server::with(&["--imid.uid-node", "5"]);
    let mut con = s.client();
    let ahead = server_time_ms(&mut con) + 20_000;
    let theirs = encode(&mut con, ahead, 5, 4095).unwrap();
    let _: String = cmd(&mut con, &["UID.FLOOR", &(ahead + 1).to_string()]).unwrap();
    let ours: i64 = cmd(&mut con, &["UID.GEN", "t"]).unwrap();
    assert!(ours > theirs, "{ours} <= {theirs}");
    assert_eq!(decode(&mut con, ours), (ahead + 1, 5, 0));
    // UID.FLOOR moves UIDs only (MSGID.FLOOR, as in earlier versions, would move both).
    assert_eq!(s.imid_stat("msgid_high_water_ms"), 0);
}

#[test]
fn the_target_is_routing_only() {
    let s = Server::start();
    let mut con = s.client();
    // Declared as the key (command_specs.rs: GETKEYS), yet nothing is stored under it.
    let _: i64 = cmd(&mut con, &["UID.GEN", "{conv:42}"]).unwrap();
    let n: i64 = cmd(&mut con, &["DBSIZE"]).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn works_inside_multi_and_scripts() {
    let s = Server::start();
    let mut con = s.client();
    let (a, b): (i64, Vec<i64>) = redis::pipe()
        .atomic()
        .cmd("UID.GEN")
        .arg("t")
        .cmd("UID.GEN")
        .arg("t")
        .arg("COUNT")
        .arg(2)
        .query(&mut con)
        .unwrap();
    assert!(a < b[0] && b[0] < b[1]);
    // Lua numbers are doubles: an integer reply above 2^53 loses its low bits there. STRING
    // hands the script the exact decimal text, which it can store or pass on unchanged.
    let (u, node, lossy): (String, i64, String) = redis::Script::new(
        "local u = redis.call('UID.GEN', KEYS[1], 'STRING') \
         local lossy = redis.call('UID.GEN', KEYS[1]) \
         return {u, redis.call('UID.DECODE', u)[4], string.format('%.0f', lossy)}",
    )
    .key("{conv:1}")
    .invoke(&mut con)
    .unwrap();
    let u: i64 = u.parse().unwrap();
    assert!(u > b[1]);
    assert_eq!(node, 0);
    let lossy: i64 = lossy.parse().unwrap();
    assert_eq!(
        lossy % 16,
        0,
        "a UID near 2^57 as a double keeps no low bits: {lossy}"
    );
    // STRING outside scripts: bulk strings of the same IDs.
    let one: String = cmd(&mut con, &["UID.GEN", "t", "STRING"]).unwrap();
    let many: Vec<String> = cmd(&mut con, &["UID.GEN", "t", "string", "COUNT", "3"]).unwrap();
    let one: i64 = one.parse().unwrap();
    let many: Vec<i64> = many.iter().map(|m| m.parse().unwrap()).collect();
    assert!(one > u && many[0] > one);
    assert_increasing("UID.GEN STRING COUNT 3", &many);
    let v: Value = cmd(&mut con, &["UID.GEN", "t", "STRING"]).unwrap();
    assert!(matches!(v, Value::BulkString(_)), "{v:?}");
}

#[test]
fn random_and_malformed_input_is_only_ever_err_and_the_server_lives() {
    use rand::{Rng, SeedableRng};
    let s = Server::with(&["--imid.uid-layout", "41,12,10"]);
    let mut con = s.client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x51D);
    let words: &[&[u8]] = &[
        b"0",
        b"1",
        b"-1",
        b"-0",
        b"01",
        b"+1",
        b" 1",
        b"1 ",
        b"1.5",
        b"1e3",
        b"0x10",
        b"",
        b"COUNT",
        b"count",
        b"STRING",
        b"string",
        b"10000",
        b"10001",
        b"4095",
        b"4096",
        b"1023",
        b"1024",
        b"1767225600000",
        b"1767225599999",
        b"3966248855551",
        b"3966248855552",
        b"9223372036854775807",
        b"9223372036854775808",
        b"-9223372036854775808",
        b"18446744073709551615",
        b"99999999999999999999999",
        b"nan",
        b"inf",
        b"\x00",
        b"\xff\xfe",
        b"\r\n",
        b"{conv:1}",
    ];
    let commands: &[&str] = &["UID.GEN", "UID.DECODE", "UID.ENCODE"];
    let mut sent = 0usize;
    let mut ok = 0usize;
    let mut last_gen = 0i64;
    while sent < 100_000 {
        let mut p = redis::pipe();
        p.ignore_errors();
        let mut calls = Vec::new();
        for _ in 0..1000 {
            let name = commands[rng.random_range(0..commands.len())];
            let argc = rng.random_range(0..6);
            let args: Vec<Vec<u8>> = (0..argc)
                .map(|_| match rng.random_range(0..10) {
                    0..=5 => words[rng.random_range(0..words.len())].to_vec(),
                    6 | 7 => rng
                        .random_range(-5i64..5_000_000_000_000)
                        .to_string()
                        .into_bytes(),
                    8 => rng.random::<i64>().to_string().into_bytes(),
                    _ => (0..rng.random_range(0..300))
                        .map(|_| rng.random())
                        .collect(),
                })
                .collect();
            let mut c = redis::cmd(name);
            for a in &args {
                c.arg(a.as_slice());
            }
            p.add_command(c);
            calls.push((name, args));
        }
        let replies: Vec<Value> = p.query(&mut con).unwrap();
        assert_eq!(replies.len(), calls.len());
        for ((name, args), r) in calls.iter().zip(replies) {
            match r {
                Value::ServerError(e) => {
                    assert_eq!(e.code(), "ERR", "{name} {args:?}: {e:?}");
                }
                Value::Int(u) => {
                    assert!(u >= 0, "{name} {args:?}: {u}");
                    if *name == "UID.GEN" {
                        assert!(u > last_gen, "{u} after {last_gen}");
                        last_gen = u;
                    }
                    ok += 1;
                }
                Value::BulkString(b) if *name == "UID.GEN" => {
                    let u: i64 = String::from_utf8(b).unwrap().parse().unwrap();
                    assert!(u > last_gen, "{u} after {last_gen}");
                    last_gen = u;
                    ok += 1;
                }
                Value::Array(a) if *name == "UID.GEN" => {
                    for x in a {
                        // integers, or decimal text with STRING
                        let u: i64 = redis::from_redis_value(x).unwrap();
                        assert!(u > last_gen, "{u} after {last_gen}");
                        last_gen = u;
                    }
                    ok += 1;
                }
                Value::Array(a) if *name == "UID.DECODE" => {
                    assert_eq!(a.len(), 6);
                    ok += 1;
                }
                other => panic!("{name} {args:?}: {other:?}"),
            }
        }
        sent += calls.len();
    }
    assert!(ok > 1000, "some calls were valid: {ok}");
    let pong: String = cmd(&mut con, &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
    let next: i64 = cmd(&mut con, &["UID.GEN", "t"]).unwrap();
    assert!(next > last_gen);
    eprintln!("{sent} random UID calls, {ok} valid, the rest ERR");
}
