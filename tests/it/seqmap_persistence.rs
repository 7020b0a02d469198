//! Sequence maps through Redis's persistence and replication: DEBUG RELOAD, RDB and AOF
//! restarts (with and without the RDB preamble, so the chunked AOF rewrite runs), DUMP/RESTORE,
//! COPY, corrupt payloads and truncated RDB files, a replica's digest, a promoted replica and
//! kill -9 under load: no field value is ever handed out twice.
use crate::common;
use common::rdb::*;
use common::*;
use std::collections::{HashMap, HashSet};

const MAX: &str = "9223372036854775807";

fn getall(con: &mut Connection, key: &str) -> HashMap<Vec<u8>, i64> {
    let v: Vec<(Vec<u8>, i64)> = redis::cmd("SEQ.HGETALL").arg(key).query(con).unwrap();
    v.into_iter().collect()
}

fn digest(con: &mut Connection) -> String {
    cmd(con, &["DEBUG", "DIGEST"]).unwrap()
}

/// A map of `n` fields (values 0, small, wide, MAX; names of 1 to 256 bytes, binary) plus a
/// small one, built with HSET, HNEXT and HADVANCE; returns both as HGETALL shows them.
fn fill(con: &mut Connection, n: usize) -> (HashMap<Vec<u8>, i64>, HashMap<Vec<u8>, i64>) {
    let mut pipe = redis::pipe();
    for chunk in 0..n.div_ceil(400) {
        let mut c = redis::cmd("SEQ.HSET");
        c.arg("big");
        for i in chunk * 400..((chunk + 1) * 400).min(n) {
            let mut name = format!("f{i}").into_bytes();
            let len = name.len().max(1 + i % 256);
            name.resize(len, b'\xfe');
            let v: u64 = match i % 5 {
                0 => 0,
                1 => i as u64,
                2 => (i as u64) << 20,
                3 => (i as u64) << 40,
                _ => i64::MAX as u64 - i as u64,
            };
            c.arg(name).arg(v);
        }
        pipe.add_command(c).ignore();
    }
    let _: () = pipe.query(con).unwrap();
    for f in ["a", "b", "c"] {
        int_reply(con, &["SEQ.HNEXT", "small", f, "COUNT", "7"]);
    }
    int_reply(con, &["SEQ.HADVANCE", "small", "cursor", "77"]);
    int_reply(con, &["SEQ.HSET", "small", "max", MAX]);
    (getall(con, "big"), getall(con, "small"))
}

#[test]
fn debug_reload_and_rdb_restart_reproduce_maps_and_skip_the_gap_once_per_field() {
    let mut s = Server::with(&["--imid.seq-gap", "1000"]);
    let mut con = s.client();
    let (big, small) = fill(&mut con, 5000);
    assert_eq!(big.len(), 5000);
    let d = digest(&mut con);
    let _: () = cmd(&mut con, &["DEBUG", "RELOAD"]).unwrap();
    assert_eq!(getall(&mut con, "big"), big);
    assert_eq!(getall(&mut con, "small"), small);
    assert_eq!(digest(&mut con), d);
    // loaded, so marked: the first HNEXT of each field skips the gap, the next does not
    assert_eq!(int_reply(&mut con, &["SEQ.HNEXT", "small", "a"]), 7 + 1001);
    assert_eq!(int_reply(&mut con, &["SEQ.HNEXT", "small", "a"]), 7 + 1002);
    assert_eq!(
        int_reply(&mut con, &["SEQ.HNEXT", "small", "b", "COUNT", "3"]),
        7 + 1003
    );
    // a missing field of a node that loaded data counts as marked
    assert_eq!(int_reply(&mut con, &["SEQ.HNEXT", "small", "new"]), 1001);
    assert_eq!(int_reply(&mut con, &["SEQ.HNEXT", "other", "x"]), 1001);
    // HADVANCE keeps the mark, as SEQ.ADVANCE does
    assert_eq!(
        int_reply(&mut con, &["SEQ.HADVANCE", "small", "cursor", "80"]),
        80
    );
    assert_eq!(
        int_reply(&mut con, &["SEQ.HNEXT", "small", "cursor"]),
        80 + 1001
    );
    assert_eq!(s.imid_stat("seq_gap_skips"), 5);
    let _: () = cmd(&mut con, &["SAVE"]).unwrap();
    let small = getall(&mut con, "small");
    let d = digest(&mut con);
    let mut con = s.crash_restart();
    assert_eq!(getall(&mut con, "big"), big);
    assert_eq!(getall(&mut con, "small"), small);
    assert_eq!(digest(&mut con), d);
    assert_eq!(
        int_reply(&mut con, &["SEQ.HNEXT", "small", "a"]),
        7 + 1002 + 1001
    );
}

fn aof_roundtrip(preamble: &str) {
    let args = [&aof_always(preamble)[..], &["--imid.seq-gap", "1000"]].concat();
    let mut s = Server::with(&args);
    let mut con = s.client();
    let (big, small) = fill(&mut con, 3000);
    let d = digest(&mut con);
    // replayed from the incremental AOF alone
    let mut con = s.crash_restart();
    assert_eq!(getall(&mut con, "big"), big);
    assert_eq!(getall(&mut con, "small"), small);
    assert_eq!(digest(&mut con), d);
    // rewritten, then replayed from the base file
    s.rewrite_aof();
    let (name, base) = aof_base(&s);
    if preamble == "no" {
        assert!(name.ends_with(".aof"), "{name}");
        let chunks = base.windows(8).filter(|w| w == b"SEQ.HSET").count();
        // 3000 fields in commands of at most 512: 6, plus one for the small map
        assert_eq!(chunks, 7, "the rewrite chunks big maps");
        let biggest = base
            .split(|&b| b == b'*')
            .filter_map(|c| {
                std::str::from_utf8(&c[..c.len().min(8)])
                    .ok()?
                    .split("\r\n")
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .max()
            .unwrap();
        assert_eq!(
            biggest,
            2 + 2 * 512,
            "no command holds more than 512 fields"
        );
    } else {
        assert!(name.ends_with(".rdb"), "{name}");
    }
    let mut con = s.crash_restart();
    assert_eq!(getall(&mut con, "big"), big);
    assert_eq!(getall(&mut con, "small"), small);
    assert_eq!(digest(&mut con), d);
    assert_eq!(int_reply(&mut con, &["SEQ.HNEXT", "small", "a"]), 7 + 1001);
}

#[test]
fn maps_survive_an_aof_restart_with_rdb_preamble() {
    aof_roundtrip("yes");
}

#[test]
fn maps_survive_an_aof_restart_without_rdb_preamble() {
    aof_roundtrip("no");
}

#[test]
fn dump_restore_and_copy_reproduce_the_map() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let (big, _) = fill(&mut con, 2000);
    let dv: Vec<String> = cmd(&mut con, &["DEBUG", "DIGEST-VALUE", "big"]).unwrap();
    let p: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut con).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(&p)
        .query(&mut con)
        .unwrap();
    assert_eq!(getall(&mut con, "restored"), big);
    let dr: Vec<String> = cmd(&mut con, &["DEBUG", "DIGEST-VALUE", "restored"]).unwrap();
    assert_eq!(dr, dv);
    assert_eq!(int_reply(&mut con, &["COPY", "big", "copied"]), 1);
    assert_eq!(getall(&mut con, "copied"), big);
    // independent of the original
    assert_eq!(
        int_reply(&mut con, &["SEQ.HSET", "copied", "f1", "5", "only", "1"]),
        1
    );
    assert_eq!(getall(&mut con, "big"), big);
    assert_eq!(int_reply(&mut con, &["SEQ.HLEN", "copied"]), 2001);
    let a = int_reply(&mut con, &["MEMORY", "USAGE", "big"]);
    let b = int_reply(&mut con, &["MEMORY", "USAGE", "restored"]);
    assert!(a > 2000 * 10 && b > 2000 * 10, "{a} {b}");
    let t: String = cmd(&mut con, &["TYPE", "copied"]).unwrap();
    assert_eq!(t, "imidsmap1");
}

/// The module id and RDB version trailer of a real map DUMP.
fn real_dump(con: &mut Connection) -> (u64, [u8; 2]) {
    int_reply(con, &["SEQ.HSET", "template", "a", "1"]);
    let p: Vec<u8> = redis::cmd("DUMP").arg("template").query(con).unwrap();
    assert_eq!(p[0], 7, "RDB type: module (v2)");
    assert_eq!(p[1], 0x81, "module id as a 64-bit length");
    let id = u64::from_be_bytes(p[2..10].try_into().unwrap());
    assert_eq!(id & 1023, 1, "encoding version 1");
    // count 1, the blob "\0a\x01", flags 0, tokens 0, EOF
    let mut body = field(OP_UINT, 1);
    body.extend(string_field(b"\x00a\x01"));
    body.extend(field(OP_UINT, 0));
    body.extend(field(OP_UINT, 0));
    body.extend(rdb_len(OP_EOF));
    let n = p.len();
    assert_eq!(p[10..n - 10], body[..], "the layout this test crafts");
    assert_eq!(
        payload(id, &body, [p[n - 10], p[n - 9]]),
        p,
        "our CRC matches"
    );
    (id, [p[n - 10], p[n - 9]])
}

fn body(count: u64, blob: &[u8], flags: u64, tokens: Option<u64>) -> Vec<u8> {
    let mut b = field(OP_UINT, count);
    b.extend(string_field(blob));
    b.extend(field(OP_UINT, flags));
    if let Some(t) = tokens {
        b.extend(field(OP_UINT, t));
    }
    b.extend(rdb_len(OP_EOF));
    b
}

#[test]
fn corrupt_restore_payloads_are_refused_without_a_crash() {
    let mut s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let (id, ver) = real_dump(&mut con);
    let two = b"\x00a\x01\x00b\x02";
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("good", body(2, two, 0, Some(0))),
        ("no field", body(0, b"", 0, Some(0))),
        ("count above the fields", body(3, two, 0, Some(0))),
        ("count below the fields", body(1, two, 0, Some(0))),
        ("a huge count", body(u64::MAX, two, 0, Some(0))),
        ("name cut short", body(2, b"\x00a\x01\x05b", 0, Some(0))),
        (
            "value cut short",
            body(2, b"\x00a\x01\x00b\x82", 0, Some(0)),
        ),
        (
            "a repeated field",
            body(2, b"\x00a\x01\x00a\x02", 0, Some(0)),
        ),
        (
            "a 10-byte value",
            body(
                1,
                b"\x00a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                0,
                Some(0),
            ),
        ),
        ("flags", body(2, two, 1, Some(0))),
        ("IDMP tokens", body(2, two, 0, Some(1))),
        ("no token count", body(2, two, 0, None)),
        ("a signed count", {
            let mut b = field(OP_SINT, 2);
            b.extend(string_field(two));
            b.extend(field(OP_UINT, 0));
            b.extend(field(OP_UINT, 0));
            b.extend(rdb_len(OP_EOF));
            b
        }),
        ("a number for the blob", {
            let mut b = field(OP_UINT, 2);
            b.extend(field(OP_UINT, 7));
            b.extend(field(OP_UINT, 0));
            b.extend(field(OP_UINT, 0));
            b.extend(rdb_len(OP_EOF));
            b
        }),
    ];
    for (what, b) in &cases {
        let p = payload(id, b, ver);
        let r: redis::RedisResult<String> = redis::cmd("RESTORE")
            .arg("k")
            .arg(0)
            .arg(&p)
            .query(&mut con);
        if *what == "good" {
            assert_eq!(r.unwrap(), "OK");
            assert_eq!(getall(&mut con, "k").len(), 2);
            let _: () = cmd(&mut con, &["DEL", "k"]).unwrap();
            continue;
        }
        let e = r.expect_err(what);
        assert!(err_text(&e).starts_with("ERR"), "{what}: {e}");
        assert!(s.alive(), "{what}: the server died");
        assert_eq!(
            int_reply(&mut con, &["EXISTS", "k"]),
            0,
            "{what}: nothing loaded"
        );
    }
    // an encoding version this build does not know
    let p = payload(id + 1, &cases[0].1, ver);
    let r: redis::RedisResult<String> = redis::cmd("RESTORE")
        .arg("k")
        .arg(0)
        .arg(&p)
        .query(&mut con);
    assert!(r.is_err());
    // random damage to a real payload, its checksum fixed: refused or loaded whole, never a crash
    int_reply(
        &mut con,
        &[
            "SEQ.HSET", "src", "x", "300", "yy", "70000", "zzz", MAX, "w", "0",
        ],
    );
    let real: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut con).unwrap();
    let mut seed = 19u64;
    let mut loaded = 0;
    for round in 0..400 {
        let mut p = real.clone();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = 10 + (seed >> 33) as usize % (p.len() - 20);
        if round % 2 == 0 {
            p[at] ^= 1 << ((seed >> 20) % 8);
        } else {
            p.remove(at);
        }
        let p = with_crc(p);
        let r: redis::RedisResult<String> = redis::cmd("RESTORE")
            .arg("k")
            .arg(0)
            .arg("REPLACE")
            .arg(&p)
            .query(&mut con);
        assert!(s.alive(), "round {round}: the server died");
        if r.is_ok() {
            loaded += 1;
            let n = int_reply(&mut con, &["SEQ.HLEN", "k"]);
            assert_eq!(getall(&mut con, "k").len() as i64, n);
            let _: () = cmd(&mut con, &["DEL", "k"]).unwrap();
        }
    }
    assert!(loaded < 400, "damage was noticed");
    let v: String = cmd(&mut con, &["PING"]).unwrap();
    assert_eq!(v, "PONG");
}

#[test]
fn truncated_and_corrupt_rdb_files_are_refused_without_a_crash() {
    // uncompressed, so that the crafted damage below lands in the map's fields
    let mut s = Server::with(&["--imid.seq-gap", "0", "--rdbcompression", "no"]);
    let mut con = s.client();
    let (big, _) = fill(&mut con, 3000);
    let _: () = cmd(&mut con, &["SAVE"]).unwrap();
    let rdb = std::fs::read(s.dir.join("dump.rdb")).unwrap();
    s.kill();
    // cut inside the big map's fields (nearly all of the file). Not tested: a cut right after
    // a module value's last field, where Redis 7.0.15's own checker (redis-check-rdb, which
    // the server runs after any failed load) loops for ever in rdbLoadCheckModuleValue on the
    // missing opcode: the module has refused the value by then (the log says why), and the
    // same happens to any module type.
    for cut in [rdb.len() / 3, rdb.len() / 2, rdb.len() * 2 / 3] {
        std::fs::write(s.dir.join("dump.rdb"), &rdb[..cut]).unwrap();
        let log = Server::build().dir(s.dir.clone()).refused("Short read").log;
        assert!(log.contains("<imid> truncated sequence map"), "{log}");
        assert!(!log.contains("crashed by signal"), "{log}");
    }
    // the intact file loads
    std::fs::write(s.dir.join("dump.rdb"), &rdb).unwrap();
    s.restart();
    assert_eq!(getall(&mut s.client(), "big"), big);
    s.kill();
    // a CRC-valid file whose map repeats a field: the module refuses it and says why
    // (the small map's field b, value 7, renamed a)
    let at: Vec<usize> = (0..rdb.len())
        .filter(|&i| rdb[i..].starts_with(b"\x00b\x07"))
        .collect();
    assert_eq!(at.len(), 1, "field b of the small map in the file");
    let mut bad = rdb.clone();
    bad[at[0] + 1] = b'a';
    std::fs::write(s.dir.join("dump.rdb"), with_crc(bad)).unwrap();
    let log = Server::build()
        .dir(s.dir.clone())
        .refused("appears twice")
        .log;
    assert!(log.contains("<imid>"), "logged through the module: {log}");
}

#[test]
fn a_replica_and_its_aof_reach_the_primarys_state() {
    let primary = Server::with(&[&aof_always("no")[..], &["--imid.seq-gap", "1000"]].concat());
    let mut replica = primary.replica(&["--imid.seq-gap", "1000"]);
    let mut p = primary.client();
    fill(&mut p, 1000);
    // a gap skip on the primary replicates its value as SEQ.HSET
    let _: () = cmd(&mut p, &["DEBUG", "RELOAD"]).unwrap();
    let sets = primary.calls("seq.hset");
    assert_eq!(int_reply(&mut p, &["SEQ.HNEXT", "small", "a"]), 7 + 1001);
    assert_eq!(int_reply(&mut p, &["SEQ.HNEXT", "small", "a"]), 7 + 1002);
    assert_eq!(
        int_reply(&mut p, &["SEQ.HNEXT", "small", "fresh", "COUNT", "4"]),
        1004
    );
    primary.wait_replica(&replica);
    assert_eq!(
        primary.calls("seq.hset"),
        sets,
        "the primary ran no SEQ.HSET of its own"
    );
    let r_sets = replica.calls("seq.hset");
    let r_nexts = replica.calls("seq.hnext");
    let r_advances = replica.calls("seq.hadvance");
    // no-ops replicate nothing (a's mark is gone since its HNEXT, so setting its value again
    // changes nothing)
    int_reply(&mut p, &["SEQ.HSET", "small", "a", "1009"]);
    int_reply(&mut p, &["SEQ.HADVANCE", "small", "b", "1"]);
    int_reply(&mut p, &["SEQ.HDEL", "small", "nope"]);
    int_reply(
        &mut p,
        &["SEQ.HADVANCE", "small", "b", "900", "LIMIT", "nokey"],
    );
    primary.wait_replica(&replica);
    assert_eq!(replica.calls("seq.hset"), r_sets);
    assert_eq!(replica.calls("seq.hadvance"), r_advances);
    assert_eq!(replica.calls("seq.hdel"), 0);
    assert_eq!(replica.calls("seq.hnext"), r_nexts);
    // more of every kind, then the digests
    let _: () = cmd(&mut p, &["SEQ.SET", "max", "500"]).unwrap();
    for i in 0..300 {
        let f = format!("u{}", i % 37);
        int_reply(
            &mut p,
            &["SEQ.HNEXT", "m2", &f, "COUNT", &(1 + i % 5).to_string()],
        );
        int_reply(
            &mut p,
            &[
                "SEQ.HADVANCE",
                "cur",
                &f,
                &(i * 7).to_string(),
                "LIMIT",
                "max",
            ],
        );
        if i % 10 == 0 {
            int_reply(&mut p, &["SEQ.HDEL", "m2", &format!("u{}", i % 13)]);
        }
    }
    int_reply(
        &mut p,
        &["SEQ.HDEL", "small", "a", "b", "c", "cursor", "max", "fresh"],
    );
    assert_eq!(int_reply(&mut p, &["EXISTS", "small"]), 0);
    primary.wait_replica(&replica);
    let d = digest(&mut p);
    assert_eq!(digest(&mut replica.client()), d, "replica");
    // the primary's own AOF, replayed
    let mut primary = primary;
    primary.kill();
    primary.restart();
    assert_eq!(digest(&mut primary.client()), d, "AOF replay");
    // a promoted replica: every field it holds skips the gap once, a missing one too
    let mut r = replica.client();
    let _: String = cmd(&mut r, &["REPLICAOF", "NO", "ONE"]).unwrap();
    let cur = getall(&mut r, "m2");
    let (f, v) = cur.iter().next().unwrap();
    let mut next = || cmd::<i64>(&mut r, &[&b"SEQ.HNEXT"[..], b"m2", f]).unwrap();
    assert_eq!((next(), next()), (v + 1001, v + 1002));
    assert_eq!(int_reply(&mut r, &["SEQ.HNEXT", "m2", "never"]), 1001);
    replica.kill();
}

/// Clients call SEQ.HNEXT on a few fields while the server is killed (-9) and restarted from its
/// AOF (fsync every second), three times: no field value is received twice.
#[test]
fn kill_9_under_load_never_reissues_a_field_value() {
    let mut s = Server::with(&[&AOF_EVERYSEC[..], &["--imid.seq-gap", "1000000"]].concat());
    let mut got: HashMap<String, Vec<i64>> = HashMap::new();
    for round in 0..3 {
        let port = s.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut seen: Vec<(String, i64)> = Vec::new();
                    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
                    let Ok(mut con) = client.get_connection() else {
                        return seen;
                    };
                    let mut i = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let f = format!("f{}", (i + w) % 8);
                        i += 1;
                        match redis::cmd("SEQ.HNEXT")
                            .arg("m")
                            .arg(&f)
                            .query::<i64>(&mut con)
                        {
                            Ok(v) => seen.push((f, v)),
                            Err(_) => break,
                        }
                    }
                    seen
                })
            })
            .collect();
        // let them run until at least some thousands of values went out
        let mut probe = s.client();
        while int_reply(&mut probe, &["SEQ.HLEN", "m"]) < 8 || s.imid_stat("seq_issued") < 3000 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        s.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in workers {
            for (f, v) in w.join().unwrap() {
                got.entry(f).or_default().push(v);
            }
        }
        s.restart();
        let _ = round;
    }
    let mut con = s.client();
    for (f, vs) in &mut got {
        let n = vs.len();
        let set: HashSet<i64> = vs.iter().copied().collect();
        assert_eq!(set.len(), n, "{f}: a value was received twice");
        let next = int_reply(&mut con, &["SEQ.HNEXT", "m", f]);
        assert!(
            vs.iter().all(|&v| v < next),
            "{f}: {next} not above every value received"
        );
    }
    assert!(got.values().map(Vec::len).sum::<usize>() >= 9000);
}

/// The write sequences of `core::seqmap::tests::the_servers_intermediate_states` (one field per
/// call), which leave "grow" halfway through a resize of its index, "widen" halfway through a
/// compaction pass of its entries and "shrink" halfway through shrinking its index. Returns
/// what each key holds.
fn intermediate(con: &mut Connection) -> Vec<(&'static str, HashMap<Vec<u8>, i64>)> {
    let name = |i: u32| format!("f:{i:06}");
    let mut calls: Vec<redis::Cmd> = Vec::new();
    let mut grow = HashMap::new();
    for i in 0..34_400u32 {
        calls.push(
            redis::cmd("SEQ.HSET")
                .arg("grow")
                .arg(name(i))
                .arg(i)
                .clone(),
        );
        grow.insert(name(i).into_bytes(), i64::from(i));
    }
    let mut widen = HashMap::new();
    let mut shrink = HashMap::new();
    for i in 0..40_000u32 {
        for (key, model) in [("widen", &mut widen), ("shrink", &mut shrink)] {
            calls.push(redis::cmd("SEQ.HSET").arg(key).arg(name(i)).arg(i).clone());
            model.insert(name(i).into_bytes(), i64::from(i));
        }
    }
    for j in 0..17_500u32 {
        let i = j * 7919 % 40_000;
        let v = i64::from(i) + (1 << 32);
        calls.push(
            redis::cmd("SEQ.HSET")
                .arg("widen")
                .arg(name(i))
                .arg(v)
                .clone(),
        );
        widen.insert(name(i).into_bytes(), v);
    }
    for i in 0..28_000u32 {
        calls.push(redis::cmd("SEQ.HDEL").arg("shrink").arg(name(i)).clone());
        shrink.remove(name(i).as_bytes());
    }
    for chunk in calls.chunks(10_000) {
        let mut pipe = redis::pipe();
        for c in chunk {
            pipe.add_command(c.clone()).ignore();
        }
        let _: () = pipe.query(con).unwrap();
    }
    vec![("grow", grow), ("widen", widen), ("shrink", shrink)]
}

/// What a map in the middle of background work answers to HGETALL, HSCAN, DEBUG DIGEST-VALUE
/// (against a COPY, which is built whole) and DUMP/RESTORE.
fn check_intermediate(con: &mut Connection, maps: &[(&str, HashMap<Vec<u8>, i64>)]) {
    for (key, model) in maps {
        assert_eq!(&getall(con, key), model, "{key}");
        assert_eq!(int_reply(con, &["SEQ.HLEN", key]), model.len() as i64);
        assert_eq!(&hscan_all(con, key, 7).0, model, "{key}: HSCAN");
        let dv: Vec<String> = cmd(con, &["DEBUG", "DIGEST-VALUE", key]).unwrap();
        let copy = format!("{key}:copy");
        assert_eq!(int_reply(con, &["COPY", key, &copy]), 1);
        let dc: Vec<String> = cmd(con, &["DEBUG", "DIGEST-VALUE", &copy]).unwrap();
        assert_eq!(dc, dv, "{key}: a copy digests alike");
        let p: Vec<u8> = redis::cmd("DUMP").arg(*key).query(con).unwrap();
        let restored = format!("{key}:restored");
        let _: () = redis::cmd("RESTORE")
            .arg(&restored)
            .arg(0)
            .arg(&p)
            .query(con)
            .unwrap();
        assert_eq!(&getall(con, &restored), model, "{key}: RESTORE");
        let dr: Vec<String> = cmd(con, &["DEBUG", "DIGEST-VALUE", &restored]).unwrap();
        assert_eq!(dr, dv, "{key}: RESTORE digests alike");
        let _: i64 = cmd(con, &["DEL", &copy, &restored]).unwrap();
        assert!(int_reply(con, &["MEMORY", "USAGE", key]) > 10 * model.len() as i64);
    }
}

/// Maps halfway through a resize of their index, or a compaction pass, read by everything
/// that reads a whole map: HGETALL, HSCAN, digest, DUMP, COPY, an RDB save and load (DEBUG
/// RELOAD), and an AOF rewrite with and without the RDB preamble replayed after a restart.
#[test]
fn intermediate_states_persist_and_digest_alike() {
    // `activerehashing no` keeps the cron from finishing the maps' work before they are read
    // (`the_cron_finishes_the_work_a_write_left`).
    let s = Server::with(&["--imid.seq-gap", "0", "--activerehashing", "no"]);
    let mut con = s.client();
    let maps = intermediate(&mut con);
    check_intermediate(&mut con, &maps);
    let d = digest(&mut con);
    let _: () = cmd(&mut con, &["DEBUG", "RELOAD"]).unwrap();
    for (key, model) in &maps {
        assert_eq!(&getall(&mut con, key), model, "{key} after DEBUG RELOAD");
    }
    assert_eq!(digest(&mut con), d);
    for preamble in ["no", "yes"] {
        let args = [
            &aof_always(preamble)[..],
            &["--imid.seq-gap", "0", "--activerehashing", "no"],
        ]
        .concat();
        let mut s = Server::with(&args);
        let mut con = s.client();
        let maps = intermediate(&mut con);
        let d = digest(&mut con);
        // The rewrite reads the maps as they stand.
        s.rewrite_aof();
        let mut con = s.crash_restart();
        for (key, model) in &maps {
            assert_eq!(
                &getall(&mut con, key),
                model,
                "{key} after an AOF rewrite ({preamble})"
            );
        }
        assert_eq!(digest(&mut con), d);
    }
}

/// `IMID.TEST-MAP-PENDING key`: whether the map has background work left, and how many maps
/// wait in the cron's queue.
fn map_pending(con: &mut Connection, key: &str) -> (i64, i64) {
    cmd(con, &["IMID.TEST-MAP-PENDING", key]).unwrap()
}

/// Maps a write left halfway through a resize of their index or a compaction pass (the write
/// sequences of `intermediate`) finish by themselves in the server's cron, as Redis's dicts
/// rehash in `serverCron`, without another write; the cron changes only their layout: the
/// fields, HSCAN, the digest and the AOF stay as they were. With `activerehashing no`, as for
/// Redis's own rehashing, it waits.
#[test]
fn the_cron_finishes_the_work_a_write_left() {
    let args = [
        &aof_always("yes")[..],
        &["--imid.seq-gap", "0", "--activerehashing", "no"],
    ]
    .concat();
    let s = Server::build().hooked().args(&args).start();
    let mut con = s.client();
    let maps = intermediate(&mut con);
    for (key, _) in &maps {
        assert_eq!(map_pending(&mut con, key).0, 1, "{key}: left with work");
    }
    assert_eq!(map_pending(&mut con, "grow").1, 3, "each map queued once");
    let d = digest(&mut con);
    let aof = s.info_field("persistence", "aof_current_size");
    // Several cron ticks (hz 10) with activerehashing no: the work waits.
    std::thread::sleep(std::time::Duration::from_millis(500));
    for (key, _) in &maps {
        assert_eq!(map_pending(&mut con, key).0, 1, "{key}: activerehashing no");
    }
    let _: () = cmd(&mut con, &["CONFIG", "SET", "activerehashing", "yes"]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while maps
        .iter()
        .any(|(key, _)| map_pending(&mut con, key).0 == 1)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "maps still pending after 120 s of cron ticks: {:?}",
            maps.iter()
                .map(|(key, _)| map_pending(&mut con, key))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(map_pending(&mut con, "grow").1, 0, "the queue is empty");
    for (key, model) in &maps {
        assert_eq!(&getall(&mut con, key), model, "{key} after the cron");
        assert_eq!(
            &hscan_all(&mut con, key, 7).0,
            model,
            "{key}: HSCAN after the cron"
        );
    }
    assert_eq!(digest(&mut con), d, "the cron changes no digest");
    assert_eq!(
        s.info_field("persistence", "aof_current_size"),
        aof,
        "the cron writes nothing to the AOF"
    );
}
