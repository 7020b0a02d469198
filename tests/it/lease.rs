//! The two time leases (issue 18, item 2): message IDs' and UIDs', each capped at a mark its
//! loaders accept. UID.GEN's borrowing (bounded to 10 s past the clock) never moves message
//! IDs; UID.FLOOR replicates and persists the UID lease as MSGID.FLOOR does the other; RDB
//! (aux version 2, both marks), AOF with and without the RDB preamble and replication carry
//! both marks exactly; a node whose leases sit at their caps loads its own files.
use crate::common;
use common::*;

/// The message-ID lease's cap: every message ID's time is below 2^42.
const MSGID_CAP: i64 = 1 << 42;
/// The UID lease's cap (UID.FLOOR takes a signed 64-bit time).
const UID_CAP: i64 = i64::MAX;

/// The `time` field of a decoded ID (MSGID.DECODE or UID.DECODE).
fn time_field(con: &mut Connection, decode: &str, id: &str) -> i64 {
    let v: Vec<Value> = cmd(con, &[decode, id]).unwrap();
    let i = v
        .iter()
        .position(|x| redis::from_redis_value::<String>(x.clone()).ok().as_deref() == Some("time"))
        .expect("a time field");
    redis::from_redis_value(v[i + 1].clone()).unwrap()
}

fn msgid_time(con: &mut Connection) -> i64 {
    let id: String = cmd(con, &["MSGID.GEN", "1", "conv"]).unwrap();
    time_field(con, "MSGID.DECODE", &id)
}

fn marks(s: &Server) -> (i64, i64) {
    (
        s.imid_stat("msgid_high_water_ms"),
        s.imid_stat("uid_high_water_ms"),
    )
}

/// The text of the AOF directory's files whose names end with `suffix`.
fn aof_text(s: &Server, suffix: &str) -> String {
    let mut text = String::new();
    for e in std::fs::read_dir(s.dir.join("appendonlydir"))
        .unwrap()
        .flatten()
    {
        if e.file_name().to_string_lossy().ends_with(suffix) {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()));
        }
    }
    text
}

/// Appends `args` as one command to the (stopped) server's incremental AOF file: what a
/// primary's renewals or an earlier build write there, replayed at the next start.
fn append_to_aof(s: &Server, args: &[&str]) {
    let dir = s.dir.join("appendonlydir");
    let incr = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incremental AOF file");
    let mut resp = format!("*{}\r\n", args.len());
    for a in args {
        resp.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(incr).unwrap();
    std::io::Write::write_all(&mut f, resp.as_bytes()).unwrap();
}

/// The scenario: a legal layout where every UID borrows a whole second (`53,10,0` in
/// seconds), 10 x `UID.GEN x COUNT 10000`, then DEBUG RELOAD. Before the split each run
/// dragged the one shared lease 10,000 s ahead and message IDs with it (27.8 h after ten);
/// now a run may borrow at most 10 s past the clock, and message IDs keep their own lease.
#[test]
fn uid_borrowing_is_bounded_and_never_moves_message_ids() {
    let s = Server::build()
        .hooked()
        .args(&["--imid.uid-layout", "53,10,0", "--imid.uid-time-unit", "s"])
        .start();
    let mut con = s.client();
    // A frozen clock half a second into a second, so which runs fit does not depend on how
    // fast the machine is.
    let second = server_time_ms(&mut con) / 1000 * 1000;
    let frozen = second + 500;
    freeze(&mut con, frozen);
    assert_eq!(msgid_time(&mut con), frozen);
    assert_eq!(s.imid_stat("msgid_high_water_ms"), frozen + LEASE_MS);

    // Ten runs of 10,000: each would need 10,000 s. Refused, nothing issued.
    for _ in 0..10 {
        let e = expect_err(&mut con, &[b"UID.GEN", b"x", b"COUNT", b"10000"]);
        assert!(
            e.starts_with(
                "ERR UID rate exceeded: imid.uid-layout 53,10,0 in s holds 1 UIDs per s per lane, and UID.GEN may borrow at most 10000 ms ahead of the clock; this run would end "
            ) && e.ends_with(" ms ahead, so nothing was issued: COUNT 10000 never fits (at most 11 per call)"),
            "{e}"
        );
    }
    assert_eq!(s.imid_stat("uid_generated"), 0);
    // Eleven fit: this second and the next ten, each UID its own second.
    let run: Vec<i64> = cmd(&mut con, &["UID.GEN", "x", "COUNT", "11"]).unwrap();
    for (i, u) in run.iter().enumerate() {
        assert_eq!(
            time_field(&mut con, "UID.DECODE", &u.to_string()),
            second + 1000 * i as i64
        );
    }
    // The twelfth would be 10.5 s ahead: refused until the clock moves on.
    let e = expect_err(&mut con, &[b"UID.GEN", b"x"]);
    assert!(
        e.ends_with("this run would end 10500 ms ahead, so nothing was issued: retry in 500 ms"),
        "{e}"
    );
    assert_eq!(s.imid_stat("uid_generated"), 11);
    let last_uid = second + 10_000;
    // The UID lease covers the borrowed seconds; the message-ID lease did not move.
    assert_eq!(
        marks(&s),
        (frozen + LEASE_MS, last_uid + LEASE_MS),
        "(message-ID mark, UID mark)"
    );
    assert_eq!(s.imid_stat("msgid_lease_renewals"), 1);

    ok(&mut con, &["DEBUG", "RELOAD"]);
    assert_eq!(marks(&s), (frozen + LEASE_MS, last_uid + LEASE_MS));
    // Message IDs stay within their normal lease of the clock (the shared lease would have put
    // them at the UIDs' mark, 15 s ahead) ...
    let t = msgid_time(&mut con);
    assert!(
        (frozen..=frozen + LEASE_MS).contains(&t),
        "message ID time {t}, clock {frozen}"
    );
    // ... and UIDs start above every UID issued before the reload.
    let next: i64 = cmd(&mut con, &["UID.GEN", "x"]).unwrap();
    assert!(next > *run.last().unwrap());
    assert!(time_field(&mut con, "UID.DECODE", &next.to_string()) >= last_uid + LEASE_MS);
}

/// Leases at their caps: the message-ID lease at 2^42 (an ID at 2^42-1 issued) and the UID
/// floor at 2^63-1, reached through the AOF (the path a primary's lease takes). The node
/// replays its own AOF and loads its own RDB file; past the caps a replayed floor is refused.
#[test]
fn leases_at_their_caps_write_files_the_node_loads() {
    let mut s = Server::with(&AOF_ALWAYS);
    s.kill();
    for (cmd_, v) in [
        ("MSGID.FLOOR", (MSGID_CAP - 1).to_string()),
        ("MSGID.FLOOR", (MSGID_CAP + 1).to_string()),
        ("UID.FLOOR", UID_CAP.to_string()),
        ("UID.FLOOR", (UID_CAP as u64 + 1).to_string()),
    ] {
        append_to_aof(&s, &[cmd_, &v]);
    }
    s.restart();
    for refused in [
        format!(
            "imid: refused MSGID.FLOOR {} from the AOF or the primary",
            MSGID_CAP + 1
        ),
        format!(
            "imid: refused UID.FLOOR {} from the AOF or the primary",
            UID_CAP as u64 + 1
        ),
    ] {
        assert!(s.log_text().contains(&refused), "{}", s.log_tail());
    }
    assert_eq!(marks(&s), (MSGID_CAP - 1, UID_CAP));
    let mut con = s.client();
    // The last millisecond of the 42-bit field: the lease reaches 2^42 and no further.
    assert_eq!(msgid_time(&mut con), MSGID_CAP - 1);
    assert_eq!(marks(&s), (MSGID_CAP, UID_CAP));
    assert_eq!(msgid_time(&mut con), MSGID_CAP - 1, "seq 1, no renewal");
    assert_eq!(s.imid_stat("msgid_lease_renewals"), 1);
    let e = expect_err(&mut con, &[b"UID.GEN", b"x"]);
    assert!(e.starts_with("ERR uid time field exhausted"), "{e}");
    ok(&mut con, &["SAVE"]);

    // Its own AOF (holding the renewal MSGID.FLOOR 2^42) replays without refusing it ...
    assert!(aof_text(&s, ".incr.aof").contains(&format!("\r\n{MSGID_CAP}\r\n")));
    s.kill();
    s.restart();
    let own = format!("refused MSGID.FLOOR {MSGID_CAP} ");
    assert!(!s.log_text().contains(&own), "{}", s.log_tail());
    assert_eq!(marks(&s), (MSGID_CAP, UID_CAP));
    let mut con = s.client();
    let e = expect_err(&mut con, &[b"MSGID.GEN", b"1", b"conv"]);
    assert_eq!(e, "ERR message id time field exhausted (2^42-1 ms)");
    // ... and so does its own RDB file.
    s.restart_with(&["--appendonly", "no"]);
    assert_eq!(marks(&s), (MSGID_CAP, UID_CAP));
}

/// Both marks survive every restart path exactly: RDB, AOF with the RDB preamble, AOF without
/// it after a rewrite (the first key carries `MSGID.FLOOR` then `UID.FLOOR`, and both are
/// written again once the rewrite is done).
#[test]
fn restarts_keep_both_marks() {
    for (name, args) in [
        ("rdb", &[][..]),
        (
            "aof with preamble",
            &["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"][..],
        ),
        (
            "aof without preamble",
            &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"][..],
        ),
    ] {
        let mut s = Server::with(args);
        let mut con = s.client();
        let now = server_time_ms(&mut con);
        let (m, u) = (now + 20_000, now + 50_000);
        ok(&mut con, &["MSGID.FLOOR", &m.to_string()]);
        ok(&mut con, &["UID.FLOOR", &u.to_string()]);
        assert_eq!(marks(&s), (m, u), "{name}");
        let _: i64 = cmd(&mut con, &["SEQ.NEXT", "k"]).unwrap();
        if args.is_empty() {
            s.shutdown(true);
        } else {
            s.rewrite_aof();
            if name == "aof without preamble" {
                let base = aof_text(&s, ".base.aof");
                let (mi, ui) = (
                    base.find("MSGID.FLOOR").expect(&base),
                    base.find("UID.FLOOR").expect(&base),
                );
                assert!(mi < ui, "MSGID.FLOOR first: {base}");
                assert!(base.contains(&u.to_string()), "{base}");
            }
            s.kill();
        }
        s.restart();
        assert_eq!(marks(&s), (m, u), "{name}");
        assert_eq!(int_reply(&mut s.client(), &["SEQ.GET", "k"]), 1, "{name}");
    }
}

/// A replica holds exactly its primary's two marks: from the full sync (RDB aux data) and
/// from the replicated FLOOR commands (clients' and the leases' renewals).
#[test]
fn a_replica_reaches_exactly_the_primarys_two_marks() {
    let primary = Server::start();
    let mut pcon = primary.client();
    let now = server_time_ms(&mut pcon);
    ok(&mut pcon, &["MSGID.FLOOR", &(now + 20_000).to_string()]);
    ok(&mut pcon, &["UID.FLOOR", &(now + 40_000).to_string()]);
    let replica = primary.replica(&[]);
    primary.wait_replica(&replica);
    assert_eq!(marks(&replica), (now + 20_000, now + 40_000));
    for _ in 0..3 {
        let _: Vec<i64> = cmd(&mut pcon, &["UID.GEN", "x", "COUNT", "10000"]).unwrap();
        let _ = msgid_time(&mut pcon);
    }
    ok(&mut pcon, &["UID.FLOOR", &(now + 45_000).to_string()]);
    primary.wait_replica(&replica);
    let (m, u) = marks(&primary);
    assert!(m >= now + 20_000 + LEASE_MS && u >= now + 45_000, "{m} {u}");
    assert_eq!(marks(&replica), (m, u));
}

#[test]
fn uid_floor_from_a_client() {
    let s = Server::with(&AOF_ALWAYS);
    let mut con = s.client();
    // UID.GEN renews the UID lease only, and writes UID.FLOOR, not MSGID.FLOOR.
    let first: i64 = cmd(&mut con, &["UID.GEN", "x"]).unwrap();
    assert_eq!(s.imid_stat("msgid_high_water_ms"), 0);
    assert_eq!(s.imid_stat("msgid_lease_renewals"), 0);
    assert_eq!(s.imid_stat("uid_lease_renewals"), 1);
    let incr = aof_text(&s, ".incr.aof");
    assert!(
        incr.contains("UID.FLOOR") && !incr.contains("MSGID.FLOOR"),
        "{incr}"
    );

    let now = server_time_ms(&mut con);
    let before = marks(&s);
    let ahead = (now + 600_000).to_string();
    for (args, want) in [
        (
            &[&b"UID.FLOOR"[..]][..],
            "ERR wrong number of arguments for 'uid.floor' command",
        ),
        (
            &[b"UID.FLOOR", b"-1"],
            "ERR time_ms must be an integer in 0..9223372036854775807",
        ),
        (
            &[b"UID.FLOOR", b"9223372036854775808"],
            "ERR time_ms must be an integer in 0..9223372036854775807",
        ),
        (
            &[b"UID.FLOOR", ahead.as_bytes()],
            "ERR time_ms must be at most 60000 ms ahead of the server clock",
        ),
    ] {
        assert_eq!(expect_err(&mut con, args), want, "{args:?}");
    }
    assert_eq!(marks(&s), before, "a refused floor moved a mark");
    // Within a minute: the UID floor only; a lower one never lowers it.
    let floor = now + 30_000;
    ok(&mut con, &["UID.FLOOR", &floor.to_string()]);
    ok(&mut con, &["UID.FLOOR", "5"]);
    assert_eq!(marks(&s), (before.0, floor));
    let uid: i64 = cmd(&mut con, &["UID.GEN", "x"]).unwrap();
    assert!(uid > first);
    assert!(time_field(&mut con, "UID.DECODE", &uid.to_string()) >= floor);
    assert!(msgid_time(&mut con) < floor, "message IDs did not move");
    // MSGID.FLOOR raises both floors (older AOFs and primaries rely on it).
    let higher = now + 40_000;
    ok(&mut con, &["MSGID.FLOOR", &higher.to_string()]);
    assert_eq!(marks(&s), (higher, higher));
}
