//! The named UID layouts and explicit field orders through the `imid.uid-*` configs, explicit
//! epoch, unit and node overriding a name's, and UID.DECODE/UID.ENCODE under another layout
//! (`LAYOUT name-or-spec [EPOCH ms] [UNIT unit]`) without touching the node's config.
//! (tests/it/uid_reference.rs checks the layouts bit-exact against other implementations.)
use crate::common;
use common::*;

const EPOCH: i64 = 1_767_225_600_000; // 2026-01-01, imid's default epoch
const MAX: i64 = i64::MAX;
const TWITTER: i64 = 1_288_834_974_657;
const DISCORD: i64 = 1_420_070_400_000;
const INSTAGRAM: i64 = 1_314_220_021_721;
const SONYFLAKE: i64 = 1_409_529_600_000;
const SONYFLAKE_V2: i64 = 1_735_689_600_000;
const UIDGENERATOR: i64 = 1_463_702_400_000;

/// UID.DECODE's reply: the field names in reply order and their values.
fn decode(con: &mut Connection, args: &[&str]) -> (Vec<String>, Vec<i64>) {
    let mut a = vec!["UID.DECODE"];
    a.extend_from_slice(args);
    let v: Vec<Value> = cmd(con, &a).unwrap();
    let names = v
        .iter()
        .step_by(2)
        .map(|x| redis::from_redis_value(x.clone()).unwrap())
        .collect();
    let values = v
        .iter()
        .skip(1)
        .step_by(2)
        .map(|x| redis::from_redis_value(x.clone()).unwrap())
        .collect();
    (names, values)
}

/// UID.ENCODE time_ms node seq: the UID, or the error's text.
fn encode(con: &mut Connection, time_ms: i64, node: i64, seq: i64) -> Result<i64, String> {
    let args = [time_ms, node, seq].map(|v| v.to_string());
    let mut c = redis::cmd("UID.ENCODE");
    c.arg(&args);
    c.query(con).map_err(|e| err_text(&e))
}

#[test]
fn each_named_layout_through_the_config() {
    // name, node, epoch, unit ms, usable time bits, node bits, seq bits, seq above node
    type Row = (&'static str, &'static str, i64, i64, u32, u32, u32, bool);
    let table: &[Row] = &[
        ("twitter", "677", TWITTER, 1, 41, 10, 12, false),
        ("discord", "33", DISCORD, 1, 41, 10, 12, false),
        ("instagram", "5001", INSTAGRAM, 1, 40, 13, 10, false),
        ("sonyflake", "4660", SONYFLAKE, 10, 39, 16, 8, true),
        ("Sonyflake-V2", "65535", SONYFLAKE_V2, 10, 39, 16, 8, true),
        ("mastodon", "auto", 0, 1, 47, 0, 16, false),
    ];
    for &(name, node, epoch, unit, tbits, nbits, sbits, seq_first) in table {
        let s = Server::with(&["--imid.uid-layout", name, "--imid.uid-node", node]);
        let mut con = s.client();
        assert_eq!(config(&mut con, "imid.uid-layout"), name);
        assert_eq!(config(&mut con, "imid.uid-epoch"), "auto");
        assert_eq!(config(&mut con, "imid.uid-time-unit"), "auto");
        let end = epoch + (1i64 << tbits) * unit;
        assert_eq!(s.imid_stat("uid_time_ends_ms"), end, "{name}");
        let want_names = if seq_first {
            ["time", "seq", "node"]
        } else {
            ["time", "node", "seq"]
        };
        let uid: i64 = cmd(&mut con, &["UID.GEN", "t"]).unwrap();
        let (names, v) = decode(&mut con, &[&uid.to_string()]);
        assert_eq!(names, want_names, "{name}");
        let node_at = if seq_first { 2 } else { 1 };
        assert_eq!(v[node_at], node.parse::<i64>().unwrap_or(0), "{name}");
        // the epoch's first ID is 0 and the last unit's last one 2^63-1, bit 63 never set
        let max_node = (1i64 << nbits) - 1;
        let max_seq = (1i64 << sbits) - 1;
        let last = end - unit;
        let zero: i64 = cmd(&mut con, &["UID.ENCODE", &epoch.to_string(), "0", "0"]).unwrap();
        assert_eq!(zero, 0, "{name}");
        let top: i64 = cmd(
            &mut con,
            &[
                "UID.ENCODE",
                &last.to_string(),
                &max_node.to_string(),
                &max_seq.to_string(),
            ],
        )
        .unwrap();
        assert_eq!(top, MAX, "{name}");
        let e = expect_err(
            &mut con,
            &[b"UID.ENCODE", end.to_string().as_bytes(), b"0", b"0"],
        );
        assert!(e.starts_with("ERR time_ms must be at most"), "{name}: {e}");
        let (_, v) = decode(&mut con, &[&MAX.to_string()]);
        assert_eq!(v[0], last, "{name}");
    }
}

#[test]
fn explicit_epoch_unit_and_node_override_a_name() {
    // UidGenerator's layout from 2026: its bits, its seconds, a later epoch
    let s = Server::with(&[
        "--imid.uid-layout",
        "uidgenerator",
        "--imid.uid-epoch",
        &EPOCH.to_string(),
    ]);
    let mut con = s.client();
    assert_eq!(config(&mut con, "imid.uid-epoch"), EPOCH.to_string());
    assert_eq!(s.imid_stat("uid_time_ends_ms"), EPOCH + (1 << 28) * 1000);
    assert_eq!(
        encode(&mut con, EPOCH + 1000, 5, 17),
        Ok((1 << 35) | (5 << 13) | 17)
    );
    assert_eq!(
        encode(&mut con, EPOCH + 1, 0, 0).unwrap_err(),
        "ERR time_ms must be imid.uid-epoch plus a whole number of seconds (imid.uid-time-unit)"
    );
    drop(s);
    // Twitter's bits and epoch in 10 ms units
    let s = Server::with(&words(
        "--imid.uid-layout twitter --imid.uid-time-unit 10ms",
    ));
    let mut con = s.client();
    assert_eq!(config(&mut con, "imid.uid-time-unit"), "10ms");
    assert_eq!(s.imid_stat("uid_time_ends_ms"), TWITTER + (1 << 41) * 10);
    assert_eq!(encode(&mut con, TWITTER + 10, 0, 0), Ok(1 << 22));
    let e = encode(&mut con, TWITTER + 15, 0, 0).unwrap_err();
    assert_eq!(e, "ERR time_ms must be imid.uid-epoch plus a whole number of 10 ms units (imid.uid-time-unit 10ms)");
    drop(s);
    // Sonyflake spelled out as fields, unit and epoch: the same IDs as the name
    let s = Server::with(&[
        "--imid.uid-layout",
        "time:39,seq:8,node:16",
        "--imid.uid-time-unit",
        "10ms",
        "--imid.uid-epoch",
        &SONYFLAKE.to_string(),
    ]);
    let mut con = s.client();
    for (t, n, q) in [(SONYFLAKE + 10, 1, 1), (SONYFLAKE + 123_450, 4660, 200)] {
        let args = [t.to_string(), n.to_string(), q.to_string()];
        let mine: i64 = cmd(&mut con, &["UID.ENCODE", &args[0], &args[1], &args[2]]).unwrap();
        let named = [
            "UID.ENCODE",
            &args[0],
            &args[1],
            &args[2],
            "LAYOUT",
            "sonyflake",
        ];
        let named: i64 = cmd(&mut con, &named).unwrap();
        assert_eq!(mine, named);
    }
    drop(s);
    // 64-bit explicit widths from the default epoch: the time field's top bit stays 0
    let s = Server::with(&["--imid.uid-layout", "42,10,12"]);
    let mut con = s.client();
    assert_eq!(s.imid_stat("uid_time_ends_ms"), EPOCH + (1 << 41));
    assert_eq!(
        decode(&mut con, &[&MAX.to_string()]).1,
        [EPOCH + (1 << 41) - 1, 1023, 4095]
    );
}

#[test]
fn cluster_mode_takes_a_named_layout_with_a_fixed_node_or_enough_node_bits() {
    // Twitter's 10 node bits cannot hold a slot: with a fixed worker number it loads.
    let s = Server::with(&words(
        "--cluster-enabled yes --imid.uid-layout twitter --imid.uid-node 5",
    ));
    let mut con = s.client();
    assert_eq!(config(&mut con, "imid.uid-node"), "5");
    drop(s);
    // Sonyflake's 16-bit machine field holds the slot.
    let s = Server::with(&["--cluster-enabled", "yes", "--imid.uid-layout", "sonyflake"]);
    let mut con = s.client();
    assert_eq!(config(&mut con, "imid.uid-layout"), "sonyflake");
    // refused without a node, and the log says what to set
    let log = Server::build()
        .args(&["--cluster-enabled", "yes", "--imid.uid-layout", "discord"])
        .refused("Can't load module")
        .log;
    assert!(
        log.contains("the layout has 10: set imid.uid-node to this node's worker number (0..1023), or use a layout with 14 or more node bits"),
        "{log}"
    );
}

#[test]
fn decode_and_encode_under_another_layout() {
    let s = Server::start();
    let mut con = s.client();
    // (LAYOUT arguments, time, node, seq, uid, reply order has seq before node)
    type Row = (&'static [&'static str], i64, i64, i64, i64, bool);
    let rows: &[Row] = &[
        (
            &["LAYOUT", "discord"],
            1_462_015_105_796,
            32,
            7,
            175_928_847_299_117_063,
            false,
        ),
        (
            &["LAYOUT", "twitter"],
            TWITTER + 1,
            1023,
            4095,
            (1 << 22) | (1023 << 12) | 4095,
            false,
        ),
        (
            &["LAYOUT", "instagram"],
            INSTAGRAM + 1,
            1,
            1,
            (1 << 23) | (1 << 10) | 1,
            false,
        ),
        (
            &["LAYOUT", "sonyflake"],
            SONYFLAKE + 10,
            1,
            1,
            (1 << 24) | (1 << 16) | 1,
            true,
        ),
        (
            &["layout", "SONYFLAKE-V2"],
            SONYFLAKE_V2 + 20,
            65_535,
            255,
            (2 << 24) | (255 << 16) | 65_535,
            true,
        ),
        // UidGenerator's default ran out in 2024: its IDs can still be read and built
        (
            &["LAYOUT", "uidgenerator"],
            UIDGENERATOR + 1000,
            5,
            17,
            (1 << 35) | (5 << 13) | 17,
            false,
        ),
        (
            &["LAYOUT", "mastodon"],
            1_668_897_144_000,
            0,
            5,
            (1_668_897_144_000 << 16) | 5,
            false,
        ),
        // explicit widths take 2026-01-01 and ms unless EPOCH and UNIT say otherwise
        (&["LAYOUT", "41,10,12"], EPOCH + 1, 0, 0, 1 << 22, false),
        (
            &["LAYOUT", "time:41,seq:12,node:10"],
            EPOCH + 1,
            1,
            0,
            (1 << 22) | 1,
            true,
        ),
        (
            &["LAYOUT", "twitter", "EPOCH", "0", "UNIT", "s"],
            3000,
            0,
            0,
            3 << 22,
            false,
        ),
        (
            &["LAYOUT", "uidgenerator", "UNIT", "ms", "EPOCH", "5"],
            6,
            0,
            0,
            1 << 35,
            false,
        ),
        (&["LAYOUT", "auto"], EPOCH + 1, 0, 0, 1 << 22, false),
    ];
    for &(opts, t, n, q, uid, seq_first) in rows {
        let mut args = vec![t.to_string(), n.to_string(), q.to_string()];
        args.extend(opts.iter().map(|s| s.to_string()));
        let mut a = vec!["UID.ENCODE"];
        a.extend(args.iter().map(String::as_str));
        assert_eq!(cmd::<i64>(&mut con, &a).unwrap(), uid, "{opts:?}");
        let u = uid.to_string();
        let mut d = vec![u.as_str()];
        d.extend_from_slice(opts);
        let (names, v) = decode(&mut con, &d);
        if seq_first {
            assert_eq!(
                (names, v),
                (
                    vec!["time".into(), "seq".into(), "node".into()],
                    vec![t, q, n]
                ),
                "{opts:?}"
            );
        } else {
            assert_eq!(
                (names, v),
                (
                    vec!["time".into(), "node".into(), "seq".into()],
                    vec![t, n, q]
                ),
                "{opts:?}"
            );
        }
    }
    let refused: &[(&[&str], &str)] = &[
        (&["1", "LAYOUT", "bogus"], "ERR LAYOUT: imid.uid-layout must be auto, a named layout (twitter, discord, instagram, sonyflake, sonyflake-v2, uidgenerator, mastodon)"),
        (&["1", "LAYOUT", "41,10,14"], "ERR LAYOUT: imid.uid-layout widths must sum to 63 (or 64"),
        (&["1", "LAYOUT", "seq:12,time:41,node:10"], "ERR LAYOUT: imid.uid-layout must name time first"),
        (&["1", "LAYOUT", "twitter", "EPOCH", "9223372036854775807"], "ERR LAYOUT: imid.uid-layout 41,10,12 in ms reaches past the largest Unix time"),
        (&["1", "LAYOUT", "twitter", "EPOCH", "-1"], "ERR EPOCH must be an integer in 0..9223372036854775807"),
        (&["1", "LAYOUT", "twitter", "UNIT", "0ms"], "ERR UNIT must be ms, s, or a whole number of them (e.g. 10ms, 2s), at most 1 day"),
        (&["1", "LAYOUT", "twitter", "UNIT", "auto"], "ERR UNIT must be ms, s"),
        (&["1", "EPOCH", "5"], "ERR syntax error"),
        (&["1", "LAYOUT"], "ERR syntax error"),
        (&["1", "LAYOUT", "twitter", "EPOCH"], "ERR syntax error"),
        (&["1", "LAYOUT", "twitter", "EPOCH", "1", "EPOCH", "2"], "ERR syntax error"),
        (&["1", "LAYOUT", "twitter", "UNIT", "s", "UNIT", "s"], "ERR syntax error"),
        (&["1", "LAYOUT", "twitter", "LAYOUT", "discord"], "ERR syntax error"),
        (&["-1", "LAYOUT", "twitter"], "ERR uid must be an integer in 0..9223372036854775807"),
    ];
    for &(args, want) in refused {
        let mut a: Vec<&[u8]> = vec![b"UID.DECODE"];
        a.extend(args.iter().map(|s| s.as_bytes()));
        let e = expect_err(&mut con, &a);
        assert!(e.starts_with(want), "{args:?}: {e}");
        // UID.ENCODE reads the option the same way
        if args[0] == "1" {
            let mut a: Vec<&[u8]> = vec![b"UID.ENCODE", b"0", b"0", b"0"];
            a.extend(args[1..].iter().map(|s| s.as_bytes()));
            assert!(
                expect_err(&mut con, &a).starts_with(want),
                "ENCODE {args:?}"
            );
        }
    }
    let e = expect_err(
        &mut con,
        &[b"UID.ENCODE", b"0", b"0", b"0", b"LAYOUT", b"sonyflake"],
    );
    assert_eq!(
        e,
        "ERR time_ms must be at or after imid.uid-epoch (1409529600000)"
    );
    let e = expect_err(
        &mut con,
        &[
            b"UID.ENCODE",
            SONYFLAKE.to_string().as_bytes(),
            b"65536",
            b"0",
            b"LAYOUT",
            b"sonyflake",
        ],
    );
    assert_eq!(e, "ERR node must be an integer in 0..65535");
    // the node's own layout is untouched, and nothing was issued
    assert_eq!(config(&mut con, "imid.uid-layout"), "auto");
    assert_eq!(
        decode(&mut con, &[&(1i64 << 22).to_string()]).1,
        [EPOCH + 1, 0, 0]
    );
    assert_eq!(s.imid_stat("uid_generated"), 0);
}
