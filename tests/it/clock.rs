//! The ID generators under a wall clock the test moves (the test-hooks build's IMID.TEST-CLOCK):
//! frozen, stepped back, and behind after a restart from RDB or AOF or a replica's promotion.
//! MSGID.GEN (first half) and UID.GEN (second half: the seq field fills and the next unit is
//! borrowed, in ms, seconds and Sonyflake's 10 ms) keep increasing and never repeat, because of
//! their persisted and replicated time leases (MSGID.FLOOR, UID.FLOOR), and the INFO counters
//! say what happened. Also: a panic in a handler is an `ERR internal error`, not a dead server.
use crate::common;
use common::*;
use std::collections::HashSet;

const EPOCH: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
/// Layout arguments: Snowflake in ms (the standalone default), UidGenerator's in seconds.
const MS: &[&str] = &[];
const SECONDS: &[&str] = &["--imid.uid-layout", "28,22,13", "--imid.uid-time-unit", "s"];
/// Sonyflake: 10 ms units, seq (8 bits) above the machine field (16 bits).
const SONYFLAKE: &[&str] = &["--imid.uid-layout", "sonyflake", "--imid.uid-node", "4660"];

fn msgid_time_of(con: &mut Connection, id: &str) -> i64 {
    let v: Vec<Value> = cmd(con, &["MSGID.DECODE", id]).unwrap();
    redis::from_redis_value(v[1].clone()).unwrap()
}

/// UID.DECODE's `(time, node, seq)`.
fn uid_decode(con: &mut Connection, uid: i64) -> (i64, i64, i64) {
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

/// Each `(i, fields)`: `ids[i]` decodes to `fields` (UID.DECODE's three, in its order).
fn assert_decoded(con: &mut Connection, ids: &[i64], want: &[(usize, (i64, i64, i64))]) {
    for &(i, fields) in want {
        assert_eq!(
            uid_decode(con, ids[i]),
            fields,
            "UID {i} of the run: {}",
            ids[i]
        );
    }
}

fn uid_time_of(con: &mut Connection, uid: i64) -> i64 {
    uid_decode(con, uid).0
}

/// On a freshly restarted (or promoted) node: moves its clock a minute back, issues `n` IDs
/// with `gen` ([`msgids`] or [`uids`]) and checks that they increase and that the first is above
/// every ID issued before. Returns the new IDs.
fn assert_starts_above<T: Ord + std::fmt::Display>(
    con: &mut Connection,
    old: &[T],
    n: usize,
    gen: fn(&mut Connection, usize, &str) -> Vec<T>,
) -> Vec<T> {
    set_clock(con, &["OFFSET", "-60000"]);
    let new = gen(con, n, "t");
    let last = old.iter().max().unwrap();
    assert!(new[0] > *last, "{} <= {last}", new[0]);
    assert_increasing("after the jump back", &new);
    new
}

fn with<'a>(layout: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    layout.iter().chain(extra).copied().collect()
}

#[test]
fn frozen_clock_borrows_exactly_one_ms_per_4096_ids() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    set_clock(&mut con, &["FREEZE", "1893456000000"]); // 2030-01-01, frozen
    let ids = msgids(&mut con, 10_000, "t");
    assert_increasing("message IDs", &ids);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 10_000);
    assert_eq!(msgid_time_of(&mut con, &ids[0]), 1893456000000);
    assert_eq!(msgid_time_of(&mut con, &ids[4095]), 1893456000000);
    assert_eq!(
        msgid_time_of(&mut con, &ids[4096]),
        1893456000001,
        "4097th ID borrows the next ms"
    );
    assert_eq!(msgid_time_of(&mut con, &ids[9_999]), 1893456000002);
    assert_eq!(s.imid_stat("msgid_borrowed_ms"), 2);
    assert_eq!(s.imid_stat("msgid_clock_regressions"), 0);
}

#[test]
fn clock_stepping_back_never_repeats_an_id() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    let before = msgids(&mut con, 3_000, "t");
    set_clock(&mut con, &["OFFSET", "-30000"]); // the wall clock jumps 30 seconds back
    let after = msgids(&mut con, 10_000, "t");
    let all: Vec<String> = before.iter().chain(after.iter()).cloned().collect();
    assert_increasing("message IDs", &all);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len());
    assert_eq!(
        s.imid_stat("msgid_clock_regressions"),
        1,
        "one regression event"
    );
    // While the clock is behind, IDs hold at the last time and count up, borrowing as needed.
    let last_before = msgid_time_of(&mut con, before.last().unwrap());
    assert_eq!(msgid_time_of(&mut con, &after[0]), last_before);
    assert!(
        s.imid_stat("msgid_borrowed_ms") >= 2,
        "10,000 IDs on a held millisecond borrow"
    );
    assert!(msgid_time_of(&mut con, after.last().unwrap()) < server_time_ms(&mut con) + 100);
}

#[test]
fn restart_from_aof_with_the_clock_behind_starts_above_old_ids() {
    let mut s = Server::build()
        .hooked()
        .args(&["--appendonly", "yes", "--appendfsync", "always"])
        .start();
    let mut con = s.client();
    let old = msgids(&mut con, 5_000, "t");
    let mut con = s.crash_restart(); // kill -9
                                     // The restarted node's clock is a minute behind.
    let new = assert_starts_above(&mut con, &old, 1_000, msgids);
    assert_increasing("after the restart", &new);
}

/// A test-hooks server writing an AOF with every write fsynced.
fn hooked_aof_always() -> Server {
    Server::build()
        .hooked()
        .args(&["--appendonly", "yes", "--appendfsync", "always"])
        .start()
}

/// A test-hooks server writing an AOF with every write fsynced and no RDB preamble (so a
/// rewrite's base file holds commands, not an RDB with aux data).
fn start_aof_without_preamble() -> Server {
    Server::build().hooked().args(&aof_always("no")).start()
}

#[test]
fn restart_from_aof_without_preamble_keeps_the_mark_after_a_rewrite() {
    let mut s = start_aof_without_preamble();
    let mut con = s.client();
    // Without the preamble the mark rides on the rewrite of the first sequence key (an IM
    // dataset has them; docs/durability.md says so).
    let _: i64 = cmd(&mut con, &["SEQ.NEXT", "{c}:seq"]).unwrap();
    let old = msgids(&mut con, 2_000, "t");
    s.rewrite_aof();
    let mut con = s.crash_restart();
    // The restarted node's clock is a minute behind.
    assert_starts_above(&mut con, &old, 100, msgids);
}

#[test]
fn restart_from_aof_without_preamble_keeps_the_mark_with_no_sequence_key() {
    id_only_rewrite_keeps_the_mark("MSGID.FLOOR", msgids);
}

/// An ID-only dataset (`gen`'s IDs: no sequence key, no ID of the other kind) in an AOF without
/// preamble: no key carries the mark (`floor`: the ID's lease) into the rewritten base file,
/// so the node writes it again into the new AOF once the rewrite has finished, and a restart
/// with the clock a minute behind starts above the old IDs.
fn id_only_rewrite_keeps_the_mark<T: Ord + std::fmt::Display>(
    floor: &str,
    gen: fn(&mut Connection, usize, &str) -> Vec<T>,
) {
    let mut s = start_aof_without_preamble();
    let mut con = s.client();
    let old = gen(&mut con, 2_000, "t");
    s.rewrite_aof();
    // The rewrite's base file has no mark (and nothing else): only the incremental file can.
    let base = aof_files(&s, ".base.aof");
    assert!(!base.contains(floor), "{base}");
    // The mark reaches the file in the event loop turn after the rewrite is installed.
    wait_until("the mark in the new AOF after the rewrite", 10, || {
        aof_files(&s, ".incr.aof").contains(floor)
    });
    let mut con = s.crash_restart();
    assert_starts_above(&mut con, &old, 100, gen);
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
    let old = msgids(&mut con, 5_000, "t");
    s.shutdown(true); // SHUTDOWN SAVE: the high-water mark travels as RDB aux data
    s.restart();
    let mut con = s.client();
    // The restarted node's clock is a minute behind.
    assert_starts_above(&mut con, &old, 1_000, msgids);
    assert!(s.imid_stat("msgid_high_water_ms") > msgid_time_of(&mut con, old.last().unwrap()));
}

#[test]
fn debug_reload_keeps_the_mark() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    let old = msgids(&mut con, 100, "t");
    let hwm = s.imid_stat("msgid_high_water_ms");
    let _: String = cmd(&mut con, &["DEBUG", "RELOAD"]).unwrap();
    assert!(s.imid_stat("msgid_high_water_ms") >= hwm);
    set_clock(&mut con, &["OFFSET", "-60000"]);
    assert!(msgids(&mut con, 10, "t")[0] > *old.last().unwrap());
}

/// A replica of `primary` (test-hooks build, with `args`), linked up; then `issue` issues IDs
/// on the primary and returns its client, the replica acknowledges them (WAIT), the primary
/// dies (kill -9) and the replica is promoted. Returns the promoted replica and a client of it.
fn fail_over<'a>(
    primary: &mut Server,
    args: &[&str],
    issue: impl FnOnce() -> &'a mut Connection,
) -> (Server, Connection) {
    let port = primary.port.to_string();
    let replica = Server::build()
        .hooked()
        .args(&with(args, &["--replicaof", "127.0.0.1", &port]))
        .start();
    let mut rcon = replica.client();
    replica.wait_link_up();
    let n: i64 = cmd(issue(), &["WAIT", "1", "5000"]).unwrap();
    assert_eq!(n, 1, "replica did not acknowledge");
    primary.kill(); // the primary dies
    let _: String = cmd(&mut rcon, &["REPLICAOF", "NO", "ONE"]).unwrap();
    (replica, rcon)
}

#[test]
fn promoted_replica_with_a_slow_clock_issues_above_the_old_primary() {
    for full_sync_first in [true, false] {
        let mut primary = Server::build().hooked().args(&[]).start();
        let mut pcon = primary.client();
        // IDs issued before the replica exists reach it through the full sync (RDB aux) ...
        let mut old = if full_sync_first {
            msgids(&mut pcon, 2_000, "t")
        } else {
            Vec::new()
        };
        // ... and IDs issued afterwards through the replicated MSGID.FLOOR.
        let (_replica, mut rcon) = fail_over(&mut primary, &[], || {
            old.extend(msgids(&mut pcon, 5_000, "t"));
            &mut pcon
        });
        // ... and the promoted replica's clock is a minute behind.
        let new = assert_starts_above(&mut rcon, &old, 1_000, msgids);
        assert_increasing("after the failover", &new);
    }
}

/// A primary whose clock runs ten minutes ahead writes leases that far ahead; its replica and
/// its own AOF replay take them (only a client's MSGID.FLOOR is held to a minute's lead).
#[test]
fn floors_from_the_primary_and_the_aof_are_taken_however_far_ahead() {
    let mut primary = hooked_aof_always();
    let mut pcon = primary.client();
    let replica = primary.hooked_replica(&[]);
    set_clock(&mut pcon, &["OFFSET", "600000"]);
    let old = msgids(&mut pcon, 1_000, "t");
    let ahead = msgid_time_of(&mut pcon, old.last().unwrap());
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
    let mut primary = hooked_aof_always();
    let mut pcon = primary.client();
    let replica = primary.replica(&[]);
    let good = server_time_ms(&mut pcon) + 30_000;
    let _: () = cmd(&mut pcon, &["MSGID.FLOOR", &good.to_string()]).unwrap();
    for bad in [PAST, "9223372036854775807"] {
        let _: () = cmd(&mut pcon, &["IMID.TEST-REPLICATE-FLOOR", bad]).unwrap();
    }
    primary.wait_replica(&replica);
    // `s` refused the floors, said so, and kept the good one.
    let refused = |s: &Server| {
        let log = format!("imid: refused MSGID.FLOOR {PAST} from the AOF or the primary");
        assert!(s.log_tail().contains(&log), "{}", s.log_tail());
        assert_eq!(s.imid_stat("msgid_high_water_ms"), good);
        let mut con = s.client();
        let _: String = cmd(&mut con, &["REPLICAOF", "NO", "ONE"]).unwrap();
        let id: String = cmd(&mut con, &["MSGID.GEN", "1", "t"]).unwrap();
        assert!(msgid_time_of(&mut con, &id) >= good, "{id}");
    };
    refused(&replica);
    // The primary's AOF holds the same lines: replayed, they are refused the same way.
    primary.kill();
    primary.restart();
    refused(&primary);
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

// UID.GEN

#[test]
fn frozen_clock_fills_the_seq_field_then_borrows_the_next_ms() {
    let s = Server::build().hooked().args(&[]).start();
    let mut con = s.client();
    let frozen = EPOCH + 1_000_000;
    set_clock(&mut con, &["FREEZE", &frozen.to_string()]);
    let mut ids = uids(&mut con, 5_000, "t");
    // ... and batches on the same frozen clock continue the same lane
    let batch: Vec<i64> = cmd(&mut con, &["UID.GEN", "t", "COUNT", "5000"]).unwrap();
    ids.extend(batch);
    assert_increasing("UIDs", &ids);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 10_000);
    // (time, node, seq); the 4097th UID borrows the next ms
    assert_decoded(
        &mut con,
        &ids,
        &[
            (0, (frozen, 0, 0)),
            (4095, (frozen, 0, 4095)),
            (4096, (frozen + 1, 0, 0)),
            (9_999, (frozen + 2, 0, 10_000 - 8192 - 1)),
        ],
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
    assert_increasing("UIDs", &ids);
    let second = EPOCH + 5_000_000;
    assert_decoded(
        &mut con,
        &ids,
        &[(8191, (second, 0, 8191)), (8192, (second + 1000, 0, 0))],
    );
    assert_eq!(uid_decode(&mut con, ids[19_999]).0, second + 2000);
    assert_eq!(s.imid_stat("uid_borrowed_units"), 2);
}

#[test]
fn frozen_clock_under_sonyflake_borrows_the_next_ten_ms_and_never_sleeps() {
    let s = Server::build().hooked().args(SONYFLAKE).start();
    let mut con = s.client();
    let unit = EPOCH + 1_000_000; // a multiple of 10 ms after Sonyflake's 2014 epoch
    set_clock(&mut con, &["FREEZE", &(unit + 7).to_string()]);
    // With the clock frozen, a generator that waited for the next 10 ms would hang here.
    let mut ids = uids(&mut con, 1_000, "t");
    ids.extend(cmd::<Vec<i64>>(&mut con, &["UID.GEN", "t", "COUNT", "5000"]).unwrap());
    assert_increasing("UIDs", &ids);
    // UID.DECODE replies in the layout's order: (time, seq, node); the 257th borrows the
    // next 10 ms
    assert_decoded(
        &mut con,
        &ids,
        &[
            (0, (unit, 0, 4660)),
            (255, (unit, 255, 4660)),
            (256, (unit + 10, 0, 4660)),
            (5_999, (unit + 230, 5_999 - 23 * 256, 4660)),
        ],
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
        let before = uids(&mut con, 3_000, "t");
        set_clock(&mut con, &["OFFSET", "-30000"]); // the wall clock jumps 30 seconds back
        let after = uids(&mut con, 10_000, "t");
        let all: Vec<i64> = before.iter().chain(after.iter()).copied().collect();
        assert_increasing("UIDs", &all);
        // While the clock is behind, UIDs hold at the last time unit and count up.
        let last_before = uid_time_of(&mut con, *before.last().unwrap());
        assert!(uid_time_of(&mut con, after[0]) >= last_before);
        let (s_, us): (i64, i64) = cmd(&mut con, &["TIME"]).unwrap();
        let real_now = s_ * 1000 + us / 1000;
        assert!(
            uid_time_of(&mut con, *after.last().unwrap()) < real_now + 5_000,
            "{layout:?}: held, not run ahead"
        );
    }
}

#[test]
fn restart_from_rdb_with_the_clock_behind_starts_above_old_uids() {
    for layout in [MS, SECONDS, SONYFLAKE] {
        let mut s = Server::build().hooked().args(layout).start();
        let mut con = s.client();
        let old = uids(&mut con, 5_000, "t");
        s.shutdown(true); // SHUTDOWN SAVE: the lease travels as RDB aux data
        s.restart();
        let mut con = s.client();
        assert_starts_above(&mut con, &old, 1_000, uids);
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
        let old = uids(&mut con, 5_000, "t");
        let mut con = s.crash_restart(); // kill -9
        assert_starts_above(&mut con, &old, 1_000, uids);
    }
}

#[test]
fn restart_from_a_rewritten_aof_without_preamble_with_only_uids() {
    // The mark in the new AOF comes from UID.GEN's lease, written again after the rewrite.
    id_only_rewrite_keeps_the_mark("UID.FLOOR", uids);
}

#[test]
fn promoted_replica_with_a_slow_clock_issues_uids_above_the_old_primary() {
    for layout in [MS, SECONDS, SONYFLAKE] {
        let mut primary = Server::build().hooked().args(layout).start();
        let mut pcon = primary.client();
        // UIDs issued before the replica exists reach it through the full sync (RDB aux) ...
        let mut old = uids(&mut pcon, 2_000, "t");
        // ... and UIDs issued afterwards through the replicated lease (UID.FLOOR).
        let (_replica, mut rcon) = fail_over(&mut primary, layout, || {
            old.extend(uids(&mut pcon, 5_000, "t"));
            &mut pcon
        });
        // ... and the promoted replica's clock is a minute behind.
        assert_starts_above(&mut rcon, &old, 1_000, uids);
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
    let old = uids(&mut con, 100, "t");
    let mut con = s.crash_restart();
    set_clock(&mut con, &["FREEZE", &frozen]);
    let new = uids(&mut con, 100, "t");
    assert!(new[0] > *old.last().unwrap());
    assert!(uid_time_of(&mut con, new[0]) > uid_time_of(&mut con, *old.last().unwrap()));
}
