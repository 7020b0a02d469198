//! Sequences through Redis's persistence: DEBUG RELOAD, RDB and AOF restarts (with and without
//! the RDB preamble, so the AOF rewrite callback runs), DUMP/RESTORE and corrupt payloads,
//! the never-reissue gap, and the message-ID high-water mark carried as RDB aux data.
use crate::common;
use common::rdb::*;
use common::*;

/// A mixed workload; returns the keys it wrote.
fn workload(con: &mut Connection) -> Vec<String> {
    for i in 0..20 {
        int_reply(
            con,
            &["SEQ.NEXT", &format!("n{i}"), "COUNT", &(i + 1).to_string()],
        );
        int_reply(con, &["SEQ.NEXT", &format!("n{i}")]);
    }
    ok(con, &["SEQ.SET", "set", "123456789"]);
    ok(con, &["SEQ.SET", "max", "9223372036854775807"]);
    ok(con, &["SEQ.SET", "zero", "0"]);
    int_reply(con, &["SEQ.ADVANCE", "cursor", "77"]);
    int_reply(con, &["SEQ.ADVANCE", "cursor", "70"]);
    let mut keys: Vec<String> = (0..20).map(|i| format!("n{i}")).collect();
    keys.extend(["set", "max", "zero", "cursor"].map(String::from));
    keys
}

/// Fails unless the last 8 bytes of `bytes` are the CRC-64 (Redis's, little-endian) of the rest,
/// as DUMP payloads and RDB files end.
fn assert_crc64(bytes: &[u8], what: &str) {
    let (body, tail) = bytes.split_at(bytes.len() - 8);
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
    assert_eq!(crc.checksum(body).to_le_bytes(), tail, "{what}");
}

#[test]
fn values_survive_debug_reload() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let keys = workload(&mut con);
    let before = mget(&mut con, &keys);
    let digest: String = cmd(&mut con, &["DEBUG", "DIGEST"]).unwrap();
    ok(&mut con, &["DEBUG", "RELOAD"]);
    assert_eq!(mget(&mut con, &keys), before);
    let after: String = cmd(&mut con, &["DEBUG", "DIGEST"]).unwrap();
    assert_eq!(digest, after);
    // gap 0: the next value follows on
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "n0"]), before[0] + 1);
    assert_eq!(s.imid_stat("seq_gap_skips"), 0);
}

#[test]
fn gap_is_skipped_once_per_key_after_each_load() {
    let s = Server::start(); // default gap 1000
    let mut con = s.client();
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 1);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a", "COUNT", "4"]), 5);
    ok(&mut con, &["SEQ.SET", "b", "7"]);
    assert_eq!(s.imid_stat("seq_gap_skips"), 0, "own writes never skip");

    ok(&mut con, &["DEBUG", "RELOAD"]);
    // reads and ADVANCE do not use up the gap
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "a"]), 5);
    let v: Vec<i64> = cmd(&mut con, &["SEQ.MGET", "a", "b"]).unwrap();
    assert_eq!(v, [5, 7]);
    assert_eq!(int_reply(&mut con, &["SEQ.ADVANCE", "b", "8"]), 8);
    assert_eq!(int_reply(&mut con, &["SEQ.ADVANCE", "b", "2"]), 8);
    assert_eq!(s.imid_stat("seq_gap_skips"), 0);

    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 1006);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 1007);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "b", "COUNT", "2"]), 1010);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "b"]), 1011);
    assert_eq!(s.imid_stat("seq_gap_skips"), 2);
    assert_eq!(s.imid_stat("seq_issued"), 1 + 4 + 2 + 2 + 1);

    // a client's SET clears the mark
    ok(&mut con, &["DEBUG", "RELOAD"]);
    ok(&mut con, &["SEQ.SET", "b", "50"]);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "b"]), 51);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 2008);
    assert_eq!(s.imid_stat("seq_gap_skips"), 3);

    // the gap is read when the NEXT runs
    config_set(&mut con, "imid.seq-gap", "5");
    ok(&mut con, &["DEBUG", "RELOAD"]);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 2014);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 2015);
}

#[test]
fn gap_zero_skips_nothing() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 1);
    ok(&mut con, &["DEBUG", "RELOAD"]);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 2);
    // the mark was consumed by that NEXT: a later non-zero gap does not apply to it
    config_set(&mut con, "imid.seq-gap", "1000");
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "a"]), 3);
    assert_eq!(s.imid_stat("seq_gap_skips"), 0);
}

#[test]
fn gap_overflow_is_an_error_and_changes_nothing() {
    let s = Server::start();
    let mut con = s.client();
    ok(&mut con, &["SEQ.SET", "a", "9223372036854775000"]);
    ok(&mut con, &["DEBUG", "RELOAD"]);
    let e = expect_err(&mut con, &[b"SEQ.NEXT", b"a"]);
    assert_eq!(e, "ERR sequence overflow");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "a"]), 9223372036854775000);
    assert_eq!(s.imid_stat("seq_gap_skips"), 0);
}

#[test]
fn values_survive_an_rdb_restart_and_then_skip_the_gap() {
    let mut s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let keys = workload(&mut con);
    let before = mget(&mut con, &keys);
    s.shutdown(true);
    s.restart();
    let mut con = s.client();
    assert_eq!(mget(&mut con, &keys), before);

    s.shutdown(true);
    s.restart_with(&["--imid.seq-gap", "1000"]);
    let mut con = s.client();
    assert_eq!(mget(&mut con, &keys), before);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "n0"]), before[0] + 1001);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "n0"]), before[0] + 1002);
    assert_eq!(s.imid_stat("seq_gap_skips"), 1);
}

fn aof_roundtrip(preamble: &str) {
    let args = [&aof_always(preamble)[..], &["--imid.seq-gap", "0"]].concat();
    let mut s = Server::with(&args);
    let mut con = s.client();
    let keys = workload(&mut con);
    let before = mget(&mut con, &keys);

    // replayed from the incremental AOF alone (the effects, as SEQ.SET)
    let mut con = s.crash_restart();
    assert_eq!(mget(&mut con, &keys), before);

    // rewritten, then replayed from the base file plus later writes
    s.rewrite_aof();
    let (name, base) = aof_base(&s);
    if preamble == "no" {
        assert!(name.ends_with(".aof"), "{name}");
        assert!(
            contains(&base, b"SEQ.SET"),
            "the rewrite callback wrote the base"
        );
        assert!(contains(&base, b"9223372036854775807"));
    } else {
        assert!(name.ends_with(".rdb"), "{name}");
    }
    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "n1", "COUNT", "3"]),
        before[1] + 3
    );
    let mut after = before.clone();
    after[1] += 3;
    let mut con = s.crash_restart();
    assert_eq!(mget(&mut con, &keys), after);

    // loaded from the AOF, so marked: with a gap the first NEXT skips
    let mut with_gap = args.to_vec();
    with_gap[7] = "1000";
    s.kill();
    s.restart_with(&with_gap);
    let mut con = s.client();
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "n1"]), after[1] + 1001);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "n2"]), after[2] + 1001);
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "n2"]), after[2] + 1002);
    assert_eq!(s.imid_stat("seq_gap_skips"), 2);
}

#[test]
fn values_survive_an_aof_restart_with_rdb_preamble() {
    aof_roundtrip("yes");
}

#[test]
fn values_survive_an_aof_restart_without_rdb_preamble() {
    aof_roundtrip("no");
}

#[test]
fn nothing_issued_is_reissued_after_kill_9() {
    let mut s = Server::with(&AOF_ALWAYS);
    let mut con = s.client();
    let mut last = 0;
    for _ in 0..500 {
        last = int_reply(&mut con, &["SEQ.NEXT", "conv"]);
    }
    let mut con = s.crash_restart();
    let next = int_reply(&mut con, &["SEQ.NEXT", "conv"]);
    assert!(next > last, "{next} after {last}");
    assert_eq!(next, last + 1001);
}

#[test]
fn dump_restore_roundtrips() {
    let s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    for v in [
        "0",
        "1",
        "63",
        "64",
        "16383",
        "16384",
        "4294967296",
        "9223372036854775807",
    ] {
        ok(&mut con, &["SEQ.SET", "src", v]);
        let payload: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut con).unwrap();
        let r: String = redis::cmd("RESTORE")
            .arg("dst")
            .arg(0)
            .arg(&payload)
            .arg("REPLACE")
            .query(&mut con)
            .unwrap();
        assert_eq!(r, "OK");
        let got = int_reply(&mut con, &["SEQ.GET", "dst"]);
        assert_eq!(got.to_string(), v);
        let t: String = cmd(&mut con, &["TYPE", "dst"]).unwrap();
        assert_eq!(t, "imidseq01");
    }
}

// ---- crafted DUMP payloads -------------------------------------------------------------

/// Parts of a real DUMP payload: the module id and the RDB version trailer.
fn real_dump(con: &mut Connection) -> (u64, [u8; 2]) {
    ok(con, &["SEQ.SET", "template", "1007"]);
    let p: Vec<u8> = redis::cmd("DUMP").arg("template").query(con).unwrap();
    assert_eq!(p[0], 7, "RDB type: module (v2)");
    assert_eq!(p[1], 0x81, "module id as a 64-bit length");
    let id = u64::from_be_bytes(p[2..10].try_into().unwrap());
    assert_eq!(id & 1023, 4, "encoding version 4");
    // what follows: value 1007 (14-bit length), flags 0, EOF
    assert_eq!(&p[10..16], &[2, 0x43, 0xef, 2, 0, 0]);
    assert_crc64(&p, "our CRC matches Redis's");
    let n = p.len();
    (id, [p[n - 10], p[n - 9]])
}

fn restore(con: &mut Connection, key: &str, p: &[u8]) -> redis::RedisResult<String> {
    redis::cmd("RESTORE").arg(key).arg(0).arg(p).query(con)
}

/// One IDMP token as saved: token, last, expiry (ms), fingerprint.
fn token_fields(token: &[u8], last: u64) -> Vec<u8> {
    [
        string_field(token),
        field(OP_UINT, last),
        field(OP_UINT, 4_000_000_000_000),
        field(OP_UINT, 1),
    ]
    .concat()
}

#[test]
fn corrupt_token_payloads_are_errors_not_crashes() {
    let mut s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let (id, ver) = real_dump(&mut con);
    let key = |flags: u64, rest: &[Vec<u8>]| {
        let mut b = [field(OP_UINT, 9), field(OP_UINT, flags)].concat();
        b.extend(rest.concat());
        b.extend(rdb_len(OP_EOF));
        payload(id, &b, ver)
    };
    // the crafting is right: one token (expiring in 2096) restores, and a retry is a duplicate
    let good = key(1, &[field(OP_UINT, 1), token_fields(b"m1", 7)]);
    assert_eq!(restore(&mut con, "good", &good).unwrap(), "OK");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "good"]), 9);
    let r: Vec<i64> = cmd(&mut con, &["SEQ.NEXT", "good", "IDMP", "m1"]).unwrap();
    assert_eq!(r, [7, 1]);
    // and our own DUMP of it is byte for byte the crafted payload
    let again: Vec<u8> = redis::cmd("DUMP").arg("good").query(&mut con).unwrap();
    assert_eq!(again, good);

    let long = [b'x'; 65];
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("count missing", key(1, &[])),
        ("count 0", key(1, &[field(OP_UINT, 0)])),
        ("count above 1000000", key(1, &[field(OP_UINT, 1_000_001)])),
        (
            "fewer tokens than counted",
            key(1, &[field(OP_UINT, 2), token_fields(b"a", 1)]),
        ),
        (
            "empty token",
            key(1, &[field(OP_UINT, 1), token_fields(b"", 1)]),
        ),
        (
            "65-byte token",
            key(
                1,
                &[
                    field(OP_UINT, 1),
                    string_field(&long),
                    field(OP_UINT, 1),
                    field(OP_UINT, 1),
                    field(OP_UINT, 1),
                ],
            ),
        ),
        (
            "token value 2^63",
            key(1, &[field(OP_UINT, 1), token_fields(b"a", 1 << 63)]),
        ),
        (
            "a token twice",
            key(
                1,
                &[
                    field(OP_UINT, 2),
                    token_fields(b"a", 1),
                    token_fields(b"a", 2),
                ],
            ),
        ),
        (
            "token as an integer",
            key(
                1,
                &[
                    field(OP_UINT, 1),
                    field(OP_UINT, 5),
                    field(OP_UINT, 1),
                    field(OP_UINT, 1),
                    field(OP_UINT, 1),
                ],
            ),
        ),
        (
            "truncated token",
            key(
                1,
                &[field(OP_UINT, 1), string_field(b"a"), field(OP_UINT, 1)],
            ),
        ),
        (
            "unknown flag",
            key(3, &[field(OP_UINT, 1), token_fields(b"a", 1)]),
        ),
    ];
    for (what, p) in &bad {
        let e = restore(&mut con, "k", p).expect_err(what);
        assert!(err_text(&e).starts_with("ERR"), "{what}: {}", err_text(&e));
        assert!(s.alive(), "{what} crashed the server: {}", s.log_tail());
        assert_eq!(int_reply(&mut con, &["EXISTS", "k"]), 0, "{what}");
    }
    // random corruption of a real payload with tokens: refused, never half loaded
    for i in 0..3 {
        let r: Vec<i64> = cmd(&mut con, &["SEQ.NEXT", "real", "IDMP", &format!("t{i}")]).unwrap();
        assert_eq!(r[1], 0);
    }
    let real: Vec<u8> = redis::cmd("DUMP").arg("real").query(&mut con).unwrap();
    for i in 0..real.len() {
        let mut p = real.clone();
        p[i] ^= 0x41;
        if let Ok(r) = restore(&mut con, "k", &p) {
            panic!("byte {i} restored: {r}");
        }
    }
    assert!(s.alive());
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "real"]), 3);
}

#[test]
fn a_truncated_rdb_with_tokens_is_refused_whole() {
    let mut s = Server::start();
    let mut con = s.client();
    for t in ["token-aaaa", "token-bbbb"] {
        let r: Vec<i64> = cmd(&mut con, &["SEQ.NEXT", "k", "IDMP", t]).unwrap();
        assert_eq!(r[1], 0);
    }
    let _: String = cmd(&mut con, &["SAVE"]).unwrap();
    let rdb = std::fs::read(s.dir.join("dump.rdb")).unwrap();
    let at = |needle: &[u8]| rdb.windows(needle.len()).position(|w| w == needle).unwrap();
    let (a, b) = (at(b"token-aaaa"), at(b"token-bbbb"));
    // cut inside the first token and inside the second. (Cut between two fields of a token,
    // Redis 7.0.15's own RDB check, which runs after the load failed, was seen spinning
    // in rdbLoadCheckModuleValue instead of exiting; imid had refused the key already.)
    for cut in [a + 4, b + 3] {
        load_rdb(&mut s, &rdb[..cut], Some("<imid> truncated"));
    }
    // the whole file still loads, tokens and all
    load_rdb(&mut s, &rdb, None);
    let mut con = s.client();
    let r: Vec<i64> = cmd(&mut con, &["SEQ.NEXT", "k", "IDMP", "token-bbbb"]).unwrap();
    assert_eq!(r, [2, 1]);
}

#[test]
fn corrupt_restore_payloads_are_errors_not_crashes() {
    let mut s = Server::with(&["--imid.seq-gap", "0"]);
    let mut con = s.client();
    let (id, ver) = real_dump(&mut con);
    let cat = |parts: &[Vec<u8>]| parts.concat();

    // the crafting itself is right: a well-formed payload restores
    let good = payload(
        id,
        &cat(&[field(OP_UINT, 5), field(OP_UINT, 0), rdb_len(OP_EOF)]),
        ver,
    );
    assert_eq!(restore(&mut con, "good", &good).unwrap(), "OK");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "good"]), 5);
    let max = payload(
        id,
        &cat(&[
            field(OP_UINT, i64::MAX as u64),
            field(OP_UINT, 0),
            rdb_len(OP_EOF),
        ]),
        ver,
    );
    assert_eq!(restore(&mut con, "max", &max).unwrap(), "OK");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "max"]), i64::MAX);
    // a key of encoding version 1 (written by earlier builds; same layout) restores
    let v1 = payload(
        (id & !1023) | 1,
        &cat(&[field(OP_UINT, 6), field(OP_UINT, 0), rdb_len(OP_EOF)]),
        ver,
    );
    assert_eq!(restore(&mut con, "v1", &v1).unwrap(), "OK");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "v1"]), 6);

    let bad: Vec<(&str, Vec<u8>)> = vec![
        (
            "encoding version 5",
            payload(
                (id & !1023) | 5,
                &cat(&[field(OP_UINT, 5), field(OP_UINT, 0), rdb_len(OP_EOF)]),
                ver,
            ),
        ),
        (
            "encoding version 0",
            payload(
                id & !1023,
                &cat(&[field(OP_UINT, 5), field(OP_UINT, 0), rdb_len(OP_EOF)]),
                ver,
            ),
        ),
        (
            "value 2^63",
            payload(
                id,
                &cat(&[field(OP_UINT, 1 << 63), field(OP_UINT, 0), rdb_len(OP_EOF)]),
                ver,
            ),
        ),
        (
            "value 2^64-1",
            payload(
                id,
                &cat(&[field(OP_UINT, u64::MAX), field(OP_UINT, 0), rdb_len(OP_EOF)]),
                ver,
            ),
        ),
        (
            "non-zero flags",
            payload(
                id,
                &cat(&[field(OP_UINT, 5), field(OP_UINT, 1), rdb_len(OP_EOF)]),
                ver,
            ),
        ),
        (
            "flags missing",
            payload(id, &cat(&[field(OP_UINT, 5), rdb_len(OP_EOF)]), ver),
        ),
        ("no fields", payload(id, &rdb_len(OP_EOF), ver)),
        (
            "truncated mid-field",
            payload(id, &cat(&[field(OP_UINT, 5), rdb_len(OP_UINT)]), ver),
        ),
        ("truncated after the id", payload(id, &[], ver)),
        (
            "signed instead of unsigned",
            payload(
                id,
                &cat(&[field(OP_SINT, 5), field(OP_UINT, 0), rdb_len(OP_EOF)]),
                ver,
            ),
        ),
        (
            "an extra field",
            payload(
                id,
                &cat(&[
                    field(OP_UINT, 5),
                    field(OP_UINT, 0),
                    field(OP_UINT, 0),
                    rdb_len(OP_EOF),
                ]),
                ver,
            ),
        ),
        (
            "unknown module type",
            payload(
                id ^ (1 << 20),
                &cat(&[field(OP_UINT, 5), field(OP_UINT, 0), rdb_len(OP_EOF)]),
                ver,
            ),
        ),
    ];
    for (what, p) in &bad {
        let e = restore(&mut con, "k", p).expect_err(what);
        let text = err_text(&e);
        assert!(text.starts_with("ERR"), "{what}: {text}");
        assert!(s.alive(), "{what} crashed the server: {}", s.log_tail());
        let pong: String = cmd(&mut con, &["PING"]).unwrap();
        assert_eq!(pong, "PONG", "{what}");
        assert_eq!(int_reply(&mut con, &["EXISTS", "k"]), 0, "{what}");
    }

    // random corruption of a real payload: caught by the checksum (or by the loader)
    let real: Vec<u8> = redis::cmd("DUMP").arg("template").query(&mut con).unwrap();
    for i in 0..real.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut p = real.clone();
            p[i] ^= flip;
            if let Ok(r) = restore(&mut con, "k", &p) {
                panic!("byte {i} ^ {flip:#x} restored: {r}");
            }
        }
    }
    assert!(s.alive());
    let pong: String = cmd(&mut con, &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "template"]), 1007);
}

#[test]
fn message_id_high_water_mark_survives_an_rdb_restart() {
    let mut s = Server::start();
    let mut con = s.client();
    // 50 s ahead (a client may lead the clock by at most a minute) and no ID issued after the
    // restart, so only the saved aux data can explain the mark then
    let floor = server_time_ms(&mut con) / 1000 * 1000 + 50_000;
    ok(&mut con, &["MSGID.FLOOR", &floor.to_string()]);
    assert!(s.imid_stat("msgid_high_water_ms") >= floor);
    // no sequence key exists: the aux data is saved anyway
    assert_eq!(int_reply(&mut con, &["DBSIZE"]), 0);
    s.shutdown(true);
    s.restart();
    assert!(s.imid_stat("msgid_high_water_ms") >= floor);
    let mut con = s.client();
    let id: String = cmd(&mut con, &["MSGID.GEN", "1", "conv"]).unwrap();
    let fields: Vec<Value> = cmd(&mut con, &["MSGID.DECODE", &id]).unwrap();
    let time: i64 = redis::from_redis_value(fields[1].clone()).unwrap();
    assert!(time >= floor, "{time} < {floor}");
}

/// `id` (this build's module type id) with encoding version 2: aux data of two marks and no
/// IDMP clock, as the builds before the clock wrote it.
fn v2(id: u64) -> u64 {
    (id & !1023) | 2
}

/// The aux record of imid in an RDB file: opcode 0xF7, the module type id (with the encoding
/// version in its low 10 bits), `when` (UINT 1: before the keyspace), the marks (UINT each:
/// version 4 message IDs' then UIDs' then the IDMP clock's three fields then the gap in force,
/// version 3 without the gap, version 2 the two marks, version 1 one mark), EOF.
fn aux_record(id: u64, marks: &[u64]) -> Vec<u8> {
    let mut r = vec![0xf7];
    r.extend(rdb_len(id));
    r.extend(field(OP_UINT, 1));
    for &m in marks {
        r.extend(field(OP_UINT, m));
    }
    r.extend(rdb_len(OP_EOF));
    r
}

/// The RDB file of `s` (saved now, holding the key `template` = 1007) with the imid aux record
/// replaced by `aux(id)`, the CRC-64 fixed; `id` is the module type id of this build. The saved
/// marks are both `floor`, set just before with MSGID.FLOOR (which raises both floors; no ID
/// issued, so no lease above it).
fn rdb_with_aux(
    s: &Server,
    con: &mut Connection,
    floor: u64,
    aux: impl Fn(u64) -> Vec<u8>,
) -> Vec<u8> {
    let (id, _) = real_dump(con);
    ok(con, &["MSGID.FLOOR", &floor.to_string()]);
    assert_eq!(s.imid_stat("msgid_high_water_ms"), floor as i64);
    assert_eq!(s.imid_stat("uid_high_water_ms"), floor as i64);
    ok(con, &["SAVE"]);
    let rdb = std::fs::read(s.dir.join("dump.rdb")).unwrap();
    assert_crc64(&rdb, "our CRC matches the file's");
    let n = rdb.len();
    // both marks, then no IDMP clock and no gap (encoding version 4)
    let old = aux_record(id, &[floor, floor, 0, 0, 0, 0]);
    let at: Vec<usize> = (0..n - 8).filter(|&i| rdb[i..].starts_with(&old)).collect();
    assert_eq!(
        at.len(),
        1,
        "one aux record with the marks {floor}, {floor} and no IDMP clock"
    );
    let mut out = rdb[..at[0]].to_vec();
    out.extend(aux(id));
    out.extend_from_slice(&rdb[at[0] + old.len()..]);
    with_crc(out)
}

/// Restarts `s` on `rdb`, or checks that it refuses it with `refusal` in its log.
fn load_rdb(s: &mut Server, rdb: &[u8], refusal: Option<&str>) {
    s.kill();
    std::fs::write(s.dir.join("dump.rdb"), rdb).unwrap();
    match refusal {
        Some(line) => {
            let log = Server::build().dir(s.dir.clone()).refused(line).log;
            assert!(log.contains("<imid>"), "logged through the module: {log}");
        }
        None => s.restart(),
    }
}

/// Back to an empty node for the next case.
fn reset(s: &mut Server) -> Connection {
    s.kill();
    let _ = std::fs::remove_file(s.dir.join("dump.rdb"));
    s.restart();
    s.client()
}

#[test]
fn rdb_marks_past_their_caps_are_refused_and_the_caps_load() {
    // A correct writer never saves a message-ID mark past 2^42 (the lease is capped there:
    // every ID is below it) nor a UID mark past 2^63-1; loading one would make every later
    // ID fail for good. So the file is refused, with a log line naming the mark, as a sequence
    // above 2^63-1 is; the caps themselves load.
    const CAP: u64 = 1 << 42;
    const UID_CAP: u64 = i64::MAX as u64;
    let mut s = Server::start();
    let mut con = s.client();
    let floor = server_time_ms(&mut con) as u64 / 1000 * 1000 + 50_000;
    // The line docs/durability.md quotes, around its "...": what the log says.
    let durability = std::fs::read_to_string(root().join("docs/durability.md")).unwrap();
    let quoted = durability
        .split("the log says `<imid> message-id high-water mark ...")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .expect("docs/durability.md quotes the refusal")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for mark in [CAP + 1, u64::MAX] {
        let rdb = rdb_with_aux(&s, &mut con, floor, |id| aux_record(v2(id), &[mark, floor]));
        let line = format!(
            "message-id high-water mark {mark} past the 42-bit time field (at most {CAP}: every ID below it)"
        );
        s.kill();
        std::fs::write(s.dir.join("dump.rdb"), &rdb).unwrap();
        let log = Server::build().dir(s.dir.clone()).refused(&line).log;
        assert!(
            log.contains(&format!("high-water mark {mark} {quoted}")),
            "the documented line {quoted:?} is what the log says:\n{log}"
        );
        con = reset(&mut s);
    }
    for mark in [UID_CAP + 1, u64::MAX] {
        let rdb = rdb_with_aux(&s, &mut con, floor, |id| aux_record(v2(id), &[floor, mark]));
        let line = format!("uid high-water mark {mark} past 2^63-1 ms (at most {UID_CAP})");
        load_rdb(&mut s, &rdb, Some(&line));
        con = reset(&mut s);
    }
    // The crafting is right: the same files with the caps load, and the marks are exactly them.
    let rdb = rdb_with_aux(&s, &mut con, floor, |id| {
        aux_record(v2(id), &[CAP, UID_CAP])
    });
    load_rdb(&mut s, &rdb, None);
    assert_eq!(s.imid_stat("msgid_high_water_ms"), CAP as i64);
    assert_eq!(s.imid_stat("uid_high_water_ms"), UID_CAP as i64);
    assert_eq!(int_reply(&mut s.client(), &["SEQ.GET", "template"]), 1007);
    // A mark of exactly 2^42 loads (docs/durability.md): the field is used up.
    assert_eq!(
        expect_err(&mut s.client(), &[b"MSGID.GEN", b"1", b"conv"]),
        "ERR message id time field exhausted (2^42-1 ms)"
    );
}

#[test]
fn the_idmp_clock_rides_in_the_rdb_and_a_bad_one_is_refused() {
    // Aux data version 3 and later carries the IDMP clock (src/node/idmp_clock.rs): time,
    // token lifetime (ms), window size (version 4 then the gap). One outside SEQ.IDMPCLOCK's ranges refuses the file, as does
    // one whose tokens would expire past 2^63-1 ms.
    let mut s = Server::start();
    let mut con = s.client();
    let floor = server_time_ms(&mut con) as u64 / 1000 * 1000 + 50_000;
    let bad: [([u64; 3], String); 4] = [
        ([floor, 999, 5], "ttl-ms must be in 1000..604800000".into()),
        ([floor, 10_000, 0], "max must be in 1..1000000".into()),
        (
            [1 << 63, 10_000, 5],
            format!(
                "IDMP clock {} 10000 5: ms + ttl-ms must be at most 9223372036854775807",
                1u64 << 63
            ),
        ),
        // A token it recorded would expire past 2^63-1, which no stream can write back.
        (
            [i64::MAX as u64 - 9_999, 10_000, 5],
            format!(
                "IDMP clock {} 10000 5: ms + ttl-ms must be at most 9223372036854775807",
                i64::MAX as u64 - 9_999
            ),
        ),
    ];
    for ([t, ttl, max], line) in bad {
        let rdb = rdb_with_aux(&s, &mut con, floor, |id| {
            aux_record(id, &[floor, floor, t, ttl, max, 0])
        });
        load_rdb(&mut s, &rdb, Some(&line));
        con = reset(&mut s);
    }
    // A good one, an hour ahead of the wall clock, loads: the node's IDMP clock never goes
    // back, so the first IDMP call decides by it and writes it to the new AOF.
    let ahead = server_time_ms(&mut con) as u64 + 3_600_000;
    let rdb = rdb_with_aux(&s, &mut con, floor, |id| {
        aux_record(id, &[floor, floor, ahead, 7_000, 3, 0])
    });
    load_rdb(&mut s, &rdb, None);
    let mut con = s.client();
    // fsync always: with everysec Redis postpones a write while a background fsync runs (up
    // to 2 s), so the file read below could miss the calls' lines on a loaded machine.
    ok(&mut con, &["CONFIG", "SET", "appendfsync", "always"]);
    ok(&mut con, &["CONFIG", "SET", "appendonly", "yes"]);
    s.wait_for_aof_rewrite();
    // (loaded data: a missing key skips the gap, and that call goes as its explicit effect)
    let r: Vec<i64> = cmd(&mut con, &["SEQ.NEXT", "k", "IDMP", "t"]).unwrap();
    assert_eq!(r, vec![1001, 0]);
    let r: Vec<i64> = cmd(&mut con, &["SEQ.NEXT", "k", "IDMP", "u"]).unwrap();
    assert_eq!(r, vec![1002, 0]);
    let incr = aof_incr(&s);
    let clock = format!(
        "SEQ.IDMPCLOCK\r\n${}\r\n{ahead}\r\n",
        ahead.to_string().len()
    );
    assert!(
        contains(&incr, clock.as_bytes()),
        "{}",
        String::from_utf8_lossy(&incr)
    );
}

#[test]
fn an_rdb_of_the_first_aux_format_loads_its_one_mark_into_both_floors() {
    // Earlier builds wrote encoding version 1: keys as now, and one mark in the aux data for
    // message IDs and UIDs alike. The file below is this build's, rewritten to that format
    // (every module id with version 1, the aux record with one mark).
    let mut s = Server::start();
    let mut con = s.client();
    let floor = server_time_ms(&mut con) as u64 / 1000 * 1000 + 50_000;
    let mark = floor + 3_000_000; // further than any client could set: only the file explains it
    let rdb = rdb_with_aux(&s, &mut con, floor, |id| {
        aux_record((id & !1023) | 1, &[mark])
    });
    let (id, _) = real_dump(&mut con);
    let (now, v1) = (rdb_len(id), rdb_len((id & !1023) | 1));
    let mut old = Vec::new();
    let mut i = 0;
    let mut keys = 0;
    while i < rdb.len() {
        if rdb[i..].starts_with(&now) {
            old.extend_from_slice(&v1);
            i += now.len();
            keys += 1;
        } else {
            old.push(rdb[i]);
            i += 1;
        }
    }
    assert_eq!(keys, 1, "one key of the type, now of version 1");
    load_rdb(&mut s, &with_crc(old), None);
    assert_eq!(s.imid_stat("msgid_high_water_ms"), mark as i64);
    assert_eq!(s.imid_stat("uid_high_water_ms"), mark as i64);
    let mut con = s.client();
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "template"]), 1007);
    let id: String = cmd(&mut con, &["MSGID.GEN", "1", "conv"]).unwrap();
    let fields: Vec<Value> = cmd(&mut con, &["MSGID.DECODE", &id]).unwrap();
    let time: i64 = redis::from_redis_value(fields[1].clone()).unwrap();
    assert!(time >= mark as i64, "{time} < {mark}");
    let uid: i64 = cmd(&mut con, &["UID.GEN", "conv"]).unwrap();
    let fields: Vec<Value> = cmd(&mut con, &["UID.DECODE", &uid.to_string()]).unwrap();
    let time: i64 = redis::from_redis_value(fields[1].clone()).unwrap();
    assert!(time >= mark as i64, "{time} < {mark}");
    // Saved again, it is written in version 4 with both marks, and loads the same.
    s.shutdown(true);
    s.restart();
    assert!(s.imid_stat("msgid_high_water_ms") > mark as i64);
    assert!(s.imid_stat("uid_high_water_ms") > mark as i64);
}

#[test]
fn refused_restore_payloads_log_at_verbose_level_only() {
    // Redis logs its own RESTORE failures at verbose level; a client looping bad payloads must
    // not fill the log at the default level. Refusals while loading data stay warnings (see
    // rdb_marks_past_their_caps_are_refused_and_the_caps_load).
    let s = Server::start();
    let mut con = s.client();
    let (id, ver) = real_dump(&mut con);
    let bad = payload(
        id,
        &[field(OP_UINT, 5), field(OP_UINT, 2), rdb_len(OP_EOF)].concat(),
        ver,
    );
    let line = "sequence flags 0x2 unknown";
    for _ in 0..1000 {
        restore(&mut con, "k", &bad).expect_err("refused");
    }
    assert!(!s.log_text().contains(line), "{}", s.log_tail());
    // At verbose level the reason is there, once per payload.
    config_set(&mut con, "loglevel", "verbose");
    for _ in 0..3 {
        restore(&mut con, "k", &bad).expect_err("refused");
    }
    assert_eq!(s.log_text().matches(line).count(), 3, "{}", s.log_tail());
    assert_eq!(int_reply(&mut con, &["EXISTS", "k"]), 0);
}
