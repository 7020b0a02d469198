//! MSGID.GEN under a wall clock the test moves (the test-hooks build's IMID.TEST-CLOCK):
//! frozen, stepped back, and behind after a restart or a failover. IDs keep increasing and
//! never repeat, and the INFO counters say what happened. Also: a panic in a handler is an
//! `ERR internal error`, not a dead server.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod common;
use common::*;
use std::collections::HashSet;

fn gen_many(con: &mut Connection, n: usize, target: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut p = redis::pipe();
        for _ in 0..(n - out.len()).min(1000) {
            p.cmd("MSGID.GEN").arg(1).arg(target);
        }
        out.extend(p.query::<Vec<String>>(con).unwrap());
    }
    out
}

fn time_of(con: &mut Connection, id: &str) -> i64 {
    let v: Vec<Value> = cmd(con, &["MSGID.DECODE", id]).unwrap();
    redis::from_redis_value(v[1].clone()).unwrap()
}

fn assert_increasing(ids: &[String]) {
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "{} then {}", w[0], w[1]);
    }
}

fn set_clock(con: &mut Connection, args: &[&str]) {
    let mut a = vec!["IMID.TEST-CLOCK"];
    a.extend_from_slice(args);
    let _: String = cmd(con, &a).unwrap();
}

/// On a freshly restarted (or promoted) node: moves its clock a minute back, issues `n` IDs and
/// checks the first is above every ID issued before (`old`, in order). Returns the new IDs.
fn assert_starts_above(con: &mut Connection, old: &[String], n: usize) -> Vec<String> {
    set_clock(con, &["OFFSET", "-60000"]);
    let new = gen_many(con, n, "t");
    let last = old.last().unwrap();
    assert!(new[0] > *last, "{} <= {last}", new[0]);
    new
}

fn now_ms(con: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = cmd(con, &["TIME"]).unwrap();
    s * 1000 + us / 1000
}

#[test]
fn frozen_clock_borrows_exactly_one_ms_per_4096_ids() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    set_clock(&mut con, &["FREEZE", "1893456000000"]); // 2030-01-01, frozen
    let ids = gen_many(&mut con, 10_000, "t");
    assert_increasing(&ids);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 10_000);
    assert_eq!(time_of(&mut con, &ids[0]), 1893456000000);
    assert_eq!(time_of(&mut con, &ids[4095]), 1893456000000);
    assert_eq!(
        time_of(&mut con, &ids[4096]),
        1893456000001,
        "4097th ID borrows the next ms"
    );
    assert_eq!(time_of(&mut con, &ids[9_999]), 1893456000002);
    assert_eq!(s.imid_stat("msgid_borrowed_ms"), 2);
    assert_eq!(s.imid_stat("msgid_clock_regressions"), 0);
}

#[test]
fn clock_stepping_back_never_repeats_an_id() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    let before = gen_many(&mut con, 3_000, "t");
    set_clock(&mut con, &["OFFSET", "-30000"]); // the wall clock jumps 30 seconds back
    let after = gen_many(&mut con, 10_000, "t");
    let all: Vec<String> = before.iter().chain(after.iter()).cloned().collect();
    assert_increasing(&all);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len());
    assert_eq!(
        s.imid_stat("msgid_clock_regressions"),
        1,
        "one regression event"
    );
    // While the clock is behind, IDs hold at the last time and count up, borrowing as needed.
    let last_before = time_of(&mut con, before.last().unwrap());
    assert_eq!(time_of(&mut con, &after[0]), last_before);
    assert!(
        s.imid_stat("msgid_borrowed_ms") >= 2,
        "10,000 IDs on a held millisecond borrow"
    );
    assert!(time_of(&mut con, after.last().unwrap()) < now_ms(&mut con) + 100);
}

#[test]
fn restart_from_aof_with_the_clock_behind_starts_above_old_ids() {
    let mut s = Server::build()
        .hooked()
        .args(&["--appendonly", "yes", "--appendfsync", "always"])
        .start();
    let mut con = s.client();
    let old = gen_many(&mut con, 5_000, "t");
    s.kill(); // kill -9
    s.restart();
    let mut con = s.client();
    // The restarted node's clock is a minute behind.
    let new = assert_starts_above(&mut con, &old, 1_000);
    assert_increasing(&new);
}

/// A test-hooks server writing an AOF with every write fsynced and no RDB preamble (so a
/// rewrite's base file holds commands, not an RDB with aux data).
fn start_aof_without_preamble() -> Server {
    Server::build()
        .hooked()
        .args(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            "no",
        ])
        .start()
}

#[test]
fn restart_from_aof_without_preamble_keeps_the_mark_after_a_rewrite() {
    let mut s = start_aof_without_preamble();
    let mut con = s.client();
    // Without the preamble the mark rides on the rewrite of the first sequence key (an IM
    // dataset has them; the README says so).
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "{c}:seq"]).unwrap();
    let old = gen_many(&mut con, 2_000, "t");
    let _: String = cmd(&mut con, &["BGREWRITEAOF"]).unwrap();
    s.wait_for_aof_rewrite();
    s.kill();
    s.restart();
    let mut con = s.client();
    // The restarted node's clock is a minute behind.
    assert_starts_above(&mut con, &old, 100);
}

#[test]
fn restart_from_aof_without_preamble_keeps_the_mark_with_no_sequence_key() {
    // An ID-only dataset: no sequence key carries the mark into the rewritten base file, so
    // the node writes the mark again into the new AOF once the rewrite has finished.
    let mut s = start_aof_without_preamble();
    let mut con = s.client();
    let old = gen_many(&mut con, 2_000, "t");
    let _: String = cmd(&mut con, &["BGREWRITEAOF"]).unwrap();
    s.wait_for_aof_rewrite();
    // The rewrite's base file has no mark (and nothing else): only the incremental file can.
    let base = aof_files(&s, ".base.aof");
    assert!(!base.contains("MSGID.FLOOR"), "{base}");
    // The mark reaches the file in the event loop turn after the rewrite is installed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !aof_files(&s, ".incr.aof").contains("MSGID.FLOOR") {
        assert!(
            std::time::Instant::now() < deadline,
            "no MSGID.FLOOR in the new AOF after the rewrite"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    s.kill();
    s.restart();
    let mut con = s.client();
    // The restarted node's clock is a minute behind.
    assert_starts_above(&mut con, &old, 100);
}

/// The text of the AOF files in the server's appendonly directory whose names end in `suffix`.
fn aof_files(s: &Server, suffix: &str) -> String {
    let dir = s.dir.join("appendonlydir");
    let mut text = String::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().ends_with(suffix) {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()));
        }
    }
    text
}

#[test]
fn restart_from_rdb_with_the_clock_behind_starts_above_old_ids() {
    let mut s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    let old = gen_many(&mut con, 5_000, "t");
    s.shutdown(true); // SHUTDOWN SAVE: the high-water mark travels as RDB aux data
    s.restart();
    let mut con = s.client();
    // The restarted node's clock is a minute behind.
    assert_starts_above(&mut con, &old, 1_000);
    assert!(s.imid_stat("msgid_high_water_ms") > time_of(&mut con, old.last().unwrap()));
}

#[test]
fn debug_reload_keeps_the_mark() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    let old = gen_many(&mut con, 100, "t");
    let hwm = s.imid_stat("msgid_high_water_ms");
    let _: String = cmd(&mut con, &["DEBUG", "RELOAD"]).unwrap();
    assert!(s.imid_stat("msgid_high_water_ms") >= hwm);
    set_clock(&mut con, &["OFFSET", "-60000"]);
    assert!(gen_many(&mut con, 10, "t")[0] > *old.last().unwrap());
}

#[test]
fn promoted_replica_with_a_slow_clock_issues_above_the_old_primary() {
    for full_sync_first in [true, false] {
        let mut primary = Server::build().hooked().args(&[]).start();
        let mut pcon = primary.client();
        // IDs issued before the replica exists reach it through the full sync (RDB aux) ...
        let mut old = if full_sync_first {
            gen_many(&mut pcon, 2_000, "t")
        } else {
            Vec::new()
        };
        let port = primary.port.to_string();
        let replica = Server::build()
            .hooked()
            .args(&["--replicaof", "127.0.0.1", &port])
            .start();
        let mut rcon = replica.client();
        replica.wait_link_up();
        // ... and IDs issued afterwards through the replicated MSGID.FLOOR.
        old.extend(gen_many(&mut pcon, 5_000, "t"));
        let n: i64 = cmd(&mut pcon, &["WAIT", "1", "5000"]).unwrap();
        assert_eq!(n, 1, "replica did not acknowledge");
        primary.kill(); // the primary dies
        let _: String = cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
        // ... and the promoted replica's clock is a minute behind.
        let new = assert_starts_above(&mut rcon, &old, 1_000);
        assert_increasing(&new);
    }
}

/// A primary whose clock runs ten minutes ahead writes leases that far ahead; its replica and
/// its own AOF replay take them (only a client's MSGID.FLOOR is held to a minute's lead).
#[test]
fn floors_from_the_primary_and_the_aof_are_taken_however_far_ahead() {
    let mut primary = Server::build()
        .hooked()
        .args(&["--appendonly", "yes", "--appendfsync", "always"])
        .start();
    let mut pcon = primary.client();
    let port = primary.port.to_string();
    let replica = Server::build()
        .hooked()
        .args(&["--replicaof", "127.0.0.1", &port])
        .start();
    replica.wait_link_up();
    set_clock(&mut pcon, &["OFFSET", "600000"]);
    let old = gen_many(&mut pcon, 1_000, "t");
    let ahead = time_of(&mut pcon, old.last().unwrap());
    let n: i64 = cmd(&mut pcon, &["WAIT", "1", "5000"]).unwrap();
    assert_eq!(n, 1, "replica did not acknowledge");
    assert!(replica.imid_stat("msgid_high_water_ms") > ahead);
    // Restarted from its AOF with a correct clock, the primary still starts above.
    primary.kill();
    primary.restart();
    assert!(primary.imid_stat("msgid_high_water_ms") > ahead);
    let mut pcon = primary.client();
    let id: String = cmd(&mut pcon, &["MSGID.GEN", "1", "t"]).unwrap();
    assert!(id > *old.last().unwrap());
}

/// ... but not past the end of the 42-bit time field (2^42, the lease's cap): no correct
/// primary writes such a floor, and taking one would stop MSGID.GEN for good. A replica and an
/// AOF replay refuse it, log it, and keep their floor. (IMID.TEST-REPLICATE-FLOOR writes what
/// no client could get past MSGID.FLOOR.)
#[test]
fn floors_past_the_time_field_are_refused_from_the_primary_and_the_aof() {
    const PAST: &str = "4398046511105"; // 2^42 + 1
    let mut primary = Server::build()
        .hooked()
        .args(&["--appendonly", "yes", "--appendfsync", "always"])
        .start();
    let mut pcon = primary.client();
    let replica = primary.replica(&[]);
    let good = now_ms(&mut pcon) + 30_000;
    let _: () = cmd(&mut pcon, &["MSGID.FLOOR", &good.to_string()]).unwrap();
    for bad in [PAST, "9223372036854775807"] {
        let _: () = cmd(&mut pcon, &["IMID.TEST-REPLICATE-FLOOR", bad]).unwrap();
    }
    primary.wait_replica(&replica);
    let refused = format!("imid: refused MSGID.FLOOR {PAST} from the AOF or the primary");
    assert!(
        replica.log_tail().contains(&refused),
        "{}",
        replica.log_tail()
    );
    assert_eq!(replica.imid_stat("msgid_high_water_ms"), good);
    let mut rcon = replica.client();
    let _: String = cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
    let id: String = cmd(&mut rcon, &["MSGID.GEN", "1", "t"]).unwrap();
    assert!(time_of(&mut rcon, &id) >= good, "{id}");

    // The primary's AOF holds the same lines: replayed, they are refused the same way.
    primary.kill();
    primary.restart();
    assert!(
        primary.log_tail().contains(&refused),
        "{}",
        primary.log_tail()
    );
    assert_eq!(primary.imid_stat("msgid_high_water_ms"), good);
    let mut pcon = primary.client();
    let id: String = cmd(&mut pcon, &["MSGID.GEN", "1", "t"]).unwrap();
    assert!(time_of(&mut pcon, &id) >= good, "{id}");
}

#[test]
fn a_panic_in_a_handler_is_an_error_and_the_server_lives() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    let _: String = cmd(&mut con, &["SET", "k", "v"]).unwrap();
    let e = cmd::<Value>(&mut con, &["IMID.TEST-PANIC"]).unwrap_err();
    assert_eq!(err_text(&e), "ERR internal error");
    let v: String = cmd(&mut con, &["GET", "k"]).unwrap();
    assert_eq!(v, "v", "the dataset survives");
    assert!(
        s.log_tail()
            .contains("imid: internal error in IMID.TEST-PANIC"),
        "{}",
        s.log_tail()
    );
}

#[test]
fn release_build_has_no_test_hooks() {
    let s = Server::start();
    let mut con = s.client();
    let e = cmd::<Value>(&mut con, &["IMID.TEST-CLOCK", "REAL"]).unwrap_err();
    assert!(err_text(&e).contains("unknown command"), "{e}");
}
