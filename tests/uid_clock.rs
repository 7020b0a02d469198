//! UID.GEN under a wall clock the test moves (the test-hooks build's IMID.TEST-CLOCK): frozen
//! (the seq field fills and the next unit is borrowed), stepped 30 s back, and behind after a
//! restart from RDB or AOF or a replica's promotion. UIDs keep increasing and never repeat,
//! because of their persisted and replicated time lease (UID.FLOOR).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod common;
use common::*;
use std::collections::HashSet;

const EPOCH: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
/// Layout arguments: Snowflake in ms (the standalone default), UidGenerator's in seconds.
const MS: &[&str] = &[];
const SECONDS: &[&str] = &["--imid.uid-layout", "28,22,13", "--imid.uid-time-unit", "s"];
/// Sonyflake: 10 ms units, seq (8 bits) above the machine field (16 bits).
const SONYFLAKE: &[&str] = &["--imid.uid-layout", "sonyflake", "--imid.uid-node", "4660"];

fn gen_many(con: &mut Connection, n: usize) -> Vec<i64> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut p = redis::pipe();
        for _ in 0..(n - out.len()).min(1000) {
            p.cmd("UID.GEN").arg("t");
        }
        out.extend(p.query::<Vec<i64>>(con).unwrap());
    }
    out
}

fn decode(con: &mut Connection, uid: i64) -> (i64, i64, i64) {
    let v: Vec<i64> = redis::cmd("UID.DECODE")
        .arg(uid)
        .query::<Vec<Value>>(con)
        .unwrap()
        .into_iter()
        .skip(1)
        .step_by(2)
        .map(|x| redis::from_redis_value(x).unwrap())
        .collect();
    (v[0], v[1], v[2])
}

fn time_of(con: &mut Connection, uid: i64) -> i64 {
    decode(con, uid).0
}

fn assert_increasing(ids: &[i64]) {
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "{} then {}", w[0], w[1]);
    }
}

fn set_clock(con: &mut Connection, args: &[&str]) {
    let mut a = vec!["IMID.TEST-CLOCK"];
    a.extend_from_slice(args);
    let _: String = cmd(con, &a).unwrap();
}

/// On a freshly restarted (or promoted) node: moves its clock a minute back, issues `n` UIDs
/// and checks the first is above every UID issued before. Returns the new UIDs.
fn assert_starts_above(con: &mut Connection, old: &[i64], n: usize) -> Vec<i64> {
    set_clock(con, &["OFFSET", "-60000"]);
    let new = gen_many(con, n);
    let last = *old.iter().max().unwrap();
    assert!(new[0] > last, "{} <= {last}", new[0]);
    assert_increasing(&new);
    new
}

fn with<'a>(layout: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    layout.iter().chain(extra).copied().collect()
}

#[test]
fn frozen_clock_fills_the_seq_field_then_borrows_the_next_ms() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    let frozen = EPOCH + 1_000_000;
    set_clock(&mut con, &["FREEZE", &frozen.to_string()]);
    let mut ids = gen_many(&mut con, 5_000);
    // ... and batches on the same frozen clock continue the same lane
    let batch: Vec<i64> = cmd(&mut con, &["UID.GEN", "t", "COUNT", "5000"]).unwrap();
    ids.extend(batch);
    assert_increasing(&ids);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 10_000);
    assert_eq!(decode(&mut con, ids[0]), (frozen, 0, 0));
    assert_eq!(decode(&mut con, ids[4095]), (frozen, 0, 4095));
    assert_eq!(
        decode(&mut con, ids[4096]),
        (frozen + 1, 0, 0),
        "the 4097th UID borrows the next ms"
    );
    assert_eq!(
        decode(&mut con, ids[9_999]),
        (frozen + 2, 0, 10_000 - 8192 - 1)
    );
    assert_eq!(s.imid_stat("uid_borrowed_units"), 2);
    assert_eq!(s.imid_stat("uid_generated"), 10_000);
    // the UID lease stays above the borrowed time; the message-ID lease is not UIDs'
    assert!(s.imid_stat("uid_high_water_ms") > frozen + 2);
    assert_eq!(s.imid_stat("msgid_high_water_ms"), 0);
}

#[test]
fn frozen_clock_in_seconds_borrows_the_next_second() {
    let s = Server::build().hooked().args(SECONDS).start();
    let mut con = s.client();
    let frozen = EPOCH + 5_000_500; // mid-second
    set_clock(&mut con, &["FREEZE", &frozen.to_string()]);
    let mut ids: Vec<i64> = Vec::new();
    for _ in 0..2 {
        ids.extend(cmd::<Vec<i64>>(&mut con, &["UID.GEN", "t", "COUNT", "10000"]).unwrap());
    }
    assert_increasing(&ids);
    let second = EPOCH + 5_000_000;
    assert_eq!(decode(&mut con, ids[8191]), (second, 0, 8191));
    assert_eq!(decode(&mut con, ids[8192]), (second + 1000, 0, 0));
    assert_eq!(decode(&mut con, ids[19_999]).0, second + 2000);
    assert_eq!(s.imid_stat("uid_borrowed_units"), 2);
}

#[test]
fn frozen_clock_under_sonyflake_borrows_the_next_ten_ms_and_never_sleeps() {
    let s = Server::build().hooked().args(SONYFLAKE).start();
    let mut con = s.client();
    let unit = EPOCH + 1_000_000; // a multiple of 10 ms after Sonyflake's 2014 epoch
    set_clock(&mut con, &["FREEZE", &(unit + 7).to_string()]);
    // With the clock frozen, a generator that waited for the next 10 ms would hang here.
    let mut ids = gen_many(&mut con, 1_000);
    ids.extend(cmd::<Vec<i64>>(&mut con, &["UID.GEN", "t", "COUNT", "5000"]).unwrap());
    assert_increasing(&ids);
    // UID.DECODE replies in the layout's order: time, seq, node
    assert_eq!(decode(&mut con, ids[0]), (unit, 0, 4660));
    assert_eq!(decode(&mut con, ids[255]), (unit, 255, 4660));
    assert_eq!(
        decode(&mut con, ids[256]),
        (unit + 10, 0, 4660),
        "the 257th borrows the next 10 ms"
    );
    assert_eq!(
        decode(&mut con, ids[5_999]),
        (unit + 230, 5_999 - 23 * 256, 4660)
    );
    // bit-exact: time << 24 | seq << 16 | machine
    let t = (unit - 1_409_529_600_000) / 10;
    assert_eq!(ids[257], (t + 1) << 24 | 1 << 16 | 4660);
    assert_eq!(s.imid_stat("uid_borrowed_units"), 23);
    assert_eq!(s.imid_stat("uid_generated"), 6_000);
}

#[test]
fn clock_thirty_seconds_back_never_repeats_a_uid() {
    for layout in [MS, SECONDS, SONYFLAKE] {
        let s = Server::build().hooked().args(layout).start();
        let mut con = s.client();
        let before = gen_many(&mut con, 3_000);
        set_clock(&mut con, &["OFFSET", "-30000"]); // the wall clock jumps 30 seconds back
        let after = gen_many(&mut con, 10_000);
        let all: Vec<i64> = before.iter().chain(after.iter()).copied().collect();
        assert_increasing(&all);
        // While the clock is behind, UIDs hold at the last time unit and count up.
        let last_before = time_of(&mut con, *before.last().unwrap());
        assert!(time_of(&mut con, after[0]) >= last_before);
        let (s_, us): (i64, i64) = cmd(&mut con, &["TIME"]).unwrap();
        let real_now = s_ * 1000 + us / 1000;
        assert!(
            time_of(&mut con, *after.last().unwrap()) < real_now + 5_000,
            "{layout:?}: held, not run ahead"
        );
    }
}

#[test]
fn restart_from_rdb_with_the_clock_behind_starts_above_old_uids() {
    for layout in [MS, SECONDS, SONYFLAKE] {
        let mut s = Server::build().hooked().args(layout).start();
        let mut con = s.client();
        let old = gen_many(&mut con, 5_000);
        s.shutdown(true); // SHUTDOWN SAVE: the lease travels as RDB aux data
        s.restart();
        let mut con = s.client();
        assert_starts_above(&mut con, &old, 1_000);
    }
}

#[test]
fn restart_from_aof_with_the_clock_behind_starts_above_old_uids() {
    for layout in [MS, SECONDS, SONYFLAKE] {
        let mut s = Server::build()
            .hooked()
            .args(&with(
                layout,
                &["--appendonly", "yes", "--appendfsync", "always"],
            ))
            .start();
        let mut con = s.client();
        let old = gen_many(&mut con, 5_000);
        s.kill(); // kill -9
        s.restart();
        let mut con = s.client();
        assert_starts_above(&mut con, &old, 1_000);
    }
}

#[test]
fn restart_from_a_rewritten_aof_without_preamble_with_only_uids() {
    // No sequence key and no message ID: the mark in the new AOF comes from UID.GEN's lease,
    // written again (UID.FLOOR) after the rewrite.
    let mut s = Server::build()
        .hooked()
        .args(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            "no",
        ])
        .start();
    let mut con = s.client();
    let old = gen_many(&mut con, 2_000);
    let _: String = cmd(&mut con, &["BGREWRITEAOF"]).unwrap();
    s.wait_for_aof_rewrite();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !incr_aof(&s).contains("UID.FLOOR") {
        assert!(
            std::time::Instant::now() < deadline,
            "no UID.FLOOR in the new AOF after the rewrite"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    s.kill();
    s.restart();
    let mut con = s.client();
    assert_starts_above(&mut con, &old, 100);
}

fn incr_aof(s: &Server) -> String {
    let mut text = String::new();
    for e in std::fs::read_dir(s.dir.join("appendonlydir"))
        .unwrap()
        .flatten()
    {
        if e.file_name().to_string_lossy().ends_with(".incr.aof") {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()));
        }
    }
    text
}

#[test]
fn promoted_replica_with_a_slow_clock_issues_above_the_old_primary() {
    for layout in [MS, SECONDS, SONYFLAKE] {
        let mut primary = Server::build().hooked().args(layout).start();
        let mut pcon = primary.client();
        // UIDs issued before the replica exists reach it through the full sync (RDB aux) ...
        let mut old = gen_many(&mut pcon, 2_000);
        let port = primary.port.to_string();
        let replica = Server::build()
            .hooked()
            .args(&with(layout, &["--replicaof", "127.0.0.1", &port]))
            .start();
        let mut rcon = replica.client();
        replica.wait_link_up();
        // ... and UIDs issued afterwards through the replicated lease (UID.FLOOR).
        old.extend(gen_many(&mut pcon, 5_000));
        let n: i64 = cmd(&mut pcon, &["WAIT", "1", "5000"]).unwrap();
        assert_eq!(n, 1, "replica did not acknowledge");
        primary.kill(); // the primary dies
        let _: String = cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
        // ... and the promoted replica's clock is a minute behind.
        assert_starts_above(&mut rcon, &old, 1_000);
    }
}

#[test]
fn a_restart_within_the_same_second_moves_to_a_later_second() {
    // Seconds layout, a clock frozen mid-second before and after the restart: the restarted
    // node's first UID must not reuse the old second (its seq space there is spent).
    let mut s = Server::build()
        .hooked()
        .args(&with(SECONDS, &["--appendonly", "yes"]))
        .start();
    let mut con = s.client();
    let frozen = (EPOCH + 9_000_250).to_string();
    set_clock(&mut con, &["FREEZE", &frozen]);
    let old = gen_many(&mut con, 100);
    s.kill();
    s.restart();
    let mut con = s.client();
    set_clock(&mut con, &["FREEZE", &frozen]);
    let new = gen_many(&mut con, 100);
    assert!(new[0] > *old.last().unwrap());
    assert!(time_of(&mut con, new[0]) > time_of(&mut con, *old.last().unwrap()));
}
