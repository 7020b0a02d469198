//! MSGID.* against a real redis-server with the module loaded.
use crate::common;
use common::*;
use std::collections::HashSet;

/// Decodes a 19-character ID independently of the module ([`msgid_bits`]).
fn fields_of(id: &str) -> (u64, u64, u64, u64) {
    assert_eq!(id.len(), 19, "{id}");
    let v = msgid_bits(id);
    (
        (v >> 38) as u64,
        ((v >> 26) & 0xFFF) as u64,
        ((v >> 22) & 0xF) as u64,
        (v & 0x3F_FFFF) as u64,
    )
}

#[test]
fn encode_and_decode_every_reference_vector() {
    let s = Server::start();
    let mut con = s.client();
    let rows = vectors("msgid.tsv");
    assert!(rows.len() > 300);
    for r in &rows {
        let id: String = cmd(
            &mut con,
            &[
                "MSGID.ENCODE",
                &r["time_ms"],
                &r["seq"],
                &r["channel_type"],
                &r["hash22"],
            ],
        )
        .unwrap();
        assert_eq!(id, r["msgid_str"], "encode {r:?}");
        let f: Vec<(String, i64)> = {
            let v: Vec<Value> = cmd(&mut con, &["MSGID.DECODE", &r["msgid_str"]]).unwrap();
            v.chunks(2)
                .map(|p| {
                    (
                        redis::from_redis_value(p[0].clone()).unwrap(),
                        redis::from_redis_value(p[1].clone()).unwrap(),
                    )
                })
                .collect()
        };
        let names: Vec<&str> = f.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["time", "seq", "channel_type", "hash"]);
        let vals: Vec<String> = f.iter().map(|(_, v)| v.to_string()).collect();
        assert_eq!(
            vals,
            [&r["time_ms"], &r["seq"], &r["channel_type"], &r["hash22"]].map(String::as_str),
            "decode {r:?}"
        );
    }
}

#[test]
fn hash_matches_java_for_every_reference_target() {
    let s = Server::with(&["--imid.msgid-hash", "java"]);
    let mut con = s.client();
    let mut n = 0;
    for file in ["javahash.tsv", "msgid.tsv"] {
        for r in vectors(file) {
            let target = match r.get("target_id_utf8_hex") {
                Some(h) if !h.is_empty() || r["target_id"].is_empty() => {
                    data_encoding::HEXLOWER_PERMISSIVE
                        .decode(h.as_bytes())
                        .unwrap()
                }
                _ => unescape(&r["target_id"]),
            };
            let h: i64 = redis::cmd("MSGID.HASH")
                .arg(&target)
                .query(&mut con)
                .unwrap();
            assert_eq!(h.to_string(), r["hash22"], "{file} {r:?}");
            n += 1;
        }
    }
    assert!(n > 500);
}

#[test]
fn every_decode_rejection_vector_is_an_err() {
    let s = Server::start();
    let mut con = s.client();
    let mut n = 0;
    for r in vectors("reject.tsv")
        .iter()
        .filter(|r| r["command"] == "MSGID.DECODE")
    {
        let arg = unescape(&r["arg1"]);
        let e = expect_err(&mut con, &[b"MSGID.DECODE", &arg]);
        assert!(e.starts_with("ERR invalid message id"), "{r:?}: {e}");
        n += 1;
    }
    assert!(n >= 40, "only {n} rows");
}

#[test]
fn generated_ids_are_unique_increasing_typed_and_timely() {
    let s = Server::with(&["--imid.msgid-hash", "java"]);
    let mut con = s.client();
    let before = server_time_ms(&mut con) as u64;
    let conns = 4;
    let per_conn = 50_000;
    let handles: Vec<_> = (0..conns)
        .map(|c| {
            let url = s.url();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                let target = format!("conv:{c}");
                let ty = (c % 16).to_string();
                let mut ids: Vec<String> = Vec::with_capacity(per_conn);
                while ids.len() < per_conn {
                    let mut p = redis::pipe();
                    for _ in 0..1000 {
                        p.cmd("MSGID.GEN").arg(&ty).arg(&target);
                    }
                    let got: Vec<String> = p.query(&mut con).unwrap();
                    ids.extend(got);
                }
                let hash: u64 = redis::cmd("MSGID.HASH")
                    .arg(&target)
                    .query(&mut con)
                    .unwrap();
                (c, hash, ids)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let after = server_time_ms(&mut con) as u64;

    let mut all = HashSet::new();
    for (c, hash, ids) in &results {
        assert_eq!(ids.len(), per_conn);
        assert_increasing(format!("connection {c}"), ids);
        for id in ids {
            let (t, _seq, ty, h) = fields_of(id);
            assert_eq!(ty, (*c % 16) as u64);
            assert_eq!(h, *hash);
            assert!(
                t + 1000 >= before && t <= after + 1000,
                "time {t} outside [{before}, {after}] ± 1 s"
            );
            assert!(all.insert(id.clone()), "duplicate {id}");
        }
    }
    assert_eq!(all.len(), conns * per_conn);
    assert_eq!(s.imid_stat("msgid_generated"), (conns * per_conn) as i64);
}

#[test]
fn argument_errors_name_the_rule() {
    let s = Server::start();
    let mut con = s.client();
    const CHANNEL: &str = "ERR channel_type must be an integer in 0..15";
    const TIME: &str = "ERR time_ms must be an integer in 0..4398046511103";
    const SEQ: &str = "ERR seq must be an integer in 0..4095";
    const HASH: &str = "ERR hash must be an integer in 0..4194303";
    let rows: &[Refused] = &[
        ("MSGID.GEN", &[], ARITY),
        ("MSGID.GEN 1", &[], ARITY),
        ("MSGID.GEN 1 t x", &[], ARITY),
        ("MSGID.GEN _ t", &["16", "-1", "x", "1.5"], CHANNEL),
        ("MSGID.ENCODE 0 0 0", &[], ARITY),
        ("MSGID.ENCODE _ 0 0 0", &["4398046511104", "-1"], TIME),
        ("MSGID.ENCODE 0 _ 0 0", &["4096", "-1"], SEQ),
        ("MSGID.ENCODE 0 0 16 0", &[], CHANNEL),
        ("MSGID.ENCODE 0 0 0 _", &["4194304", "abc"], HASH),
        (
            "MSGID.ENCODE 99999999999999999999 0 0 0",
            &[],
            "ERR time_ms must be an integer",
        ),
        ("MSGID.DECODE", &[], ARITY),
        ("MSGID.DECODE a b", &[], ARITY),
        (
            "MSGID.DECODE 0000-0000-0000-000",
            &[],
            "ERR invalid message id: expected 19 characters",
        ),
        (
            "MSGID.DECODE 0000_0000-0000-0000",
            &[],
            "ERR invalid message id: expected '-' at position 5",
        ),
        (
            "MSGID.DECODE 0000-0000-0000-000w",
            &[],
            "ERR invalid message id: character at position 19",
        ),
        ("MSGID.HASH", &[], ARITY),
        ("MSGID.FLOOR -5", &[], "ERR time_ms must be an integer"),
    ];
    assert_refusals(&mut con, rows, |_, _| {});
    // Edge values are accepted.
    let id: String = cmd(
        &mut con,
        &["MSGID.ENCODE", "4398046511103", "4095", "15", "4194303"],
    )
    .unwrap();
    assert_eq!(id, "VVVV-VVVV-VVVV-VVVV");
}

#[test]
fn java_mode_refuses_invalid_utf8_targets() {
    let s = Server::with(&["--imid.msgid-hash", "java"]);
    let mut con = s.client();
    for bad in [&b"\xff"[..], b"conv\xc3", b"\xed\xa0\x80"] {
        let e = expect_err(&mut con, &[b"MSGID.GEN", b"1", bad]);
        assert!(e.starts_with("ERR target must be valid UTF-8"), "{e}");
        let e = expect_err(&mut con, &[b"MSGID.HASH", bad]);
        assert!(e.starts_with("ERR target must be valid UTF-8"), "{e}");
    }
    assert_eq!(
        s.imid_stat("msgid_generated"),
        0,
        "bad input issues nothing"
    );
}

#[test]
fn hash_mode_config_is_validated_and_switchable() {
    let s = Server::start();
    let mut con = s.client();
    let v: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.msgid-hash"]).unwrap();
    assert_eq!(v, ["imid.msgid-hash", "auto"]);
    // auto on a non-cluster server is java
    let h: i64 = cmd(&mut con, &["MSGID.HASH", "user1"]).unwrap();
    assert_eq!(h, 2526662);
    let e = cmd::<()>(&mut con, &["CONFIG", "SET", "imid.msgid-hash", "murmur"]).unwrap_err();
    assert!(err_text(&e).starts_with("ERR"), "{e}");
    let v: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.msgid-hash"]).unwrap();
    assert_eq!(v[1], "auto", "a refused value changes nothing");
    config_set(&mut con, "imid.msgid-hash", "slot");
    // slot mode: CRC16 slot of the target (12182 for "foo") in the top 14 bits
    let h: i64 = cmd(&mut con, &["MSGID.HASH", "foo"]).unwrap();
    assert_eq!(h >> 8, 12182);
    let h2: i64 = cmd(&mut con, &["MSGID.HASH", "{foo}:inbox"]).unwrap();
    assert_eq!(h2 >> 8, 12182, "hash tags pick the slot");
    // invalid UTF-8 is fine in slot mode
    let _: i64 = redis::cmd("MSGID.HASH")
        .arg(&b"\xff"[..])
        .query(&mut con)
        .unwrap();
}

#[test]
fn bad_config_at_load_is_refused() {
    for (name, value) in [("--imid.msgid-hash", "bogus"), ("--imid.msgid-hash", "")] {
        let log = Server::build()
            .args(&[name, value])
            .refused("Can't load module")
            .log;
        assert!(log.contains("imid.msgid-hash"), "{log}");
    }
}

#[test]
fn info_counts_generation_and_the_lease() {
    let s = Server::start();
    let mut con = s.client();
    assert_eq!(s.imid_stat("msgid_generated"), 0);
    for _ in 0..10 {
        let _: String = cmd(&mut con, &["MSGID.GEN", "1", "x"]).unwrap();
    }
    assert_eq!(s.imid_stat("msgid_generated"), 10);
    assert_eq!(s.imid_stat("msgid_clock_regressions"), 0);
    assert!(s.imid_stat("msgid_lease_renewals") >= 1);
    let now = server_time_ms(&mut con);
    let hwm = s.imid_stat("msgid_high_water_ms");
    assert!(hwm > now, "the lease {hwm} is ahead of now {now}");
}

#[test]
fn a_client_cannot_push_the_floor_far_into_the_future() {
    let s = Server::start();
    let mut con = s.client();
    let now = server_time_ms(&mut con) as u64;
    let _: String = cmd(&mut con, &["MSGID.GEN", "1", "x"]).unwrap();
    let before = s.imid_stat("msgid_high_water_ms");
    // The end of the 42-bit field (2^42 is the largest floor: every ID below it), ten minutes
    // ahead.
    for bad in [(1u64 << 42) - 1, 1u64 << 42, now + 600_000] {
        let e = expect_err(&mut con, &[b"MSGID.FLOOR", bad.to_string().as_bytes()]);
        assert_eq!(
            e, "ERR time_ms must be at most 60000 ms ahead of the server clock",
            "{bad}"
        );
    }
    // Microseconds given for milliseconds, and anything else past the 42-bit time field:
    // refused from any source (for a replayed or replicated floor see tests/it/clock.rs).
    for bad in [now * 1000, (1u64 << 42) + 1, i64::MAX as u64] {
        let e = expect_err(&mut con, &[b"MSGID.FLOOR", bad.to_string().as_bytes()]);
        assert_eq!(
            e, "ERR time_ms must be an integer in 0..4398046511104",
            "{bad}"
        );
    }
    assert_eq!(
        s.imid_stat("msgid_high_water_ms"),
        before,
        "a refused floor moved the mark"
    );
    // Within a minute ahead is taken, and later IDs start there.
    let ahead = now + 30_000;
    let _: () = cmd(&mut con, &["MSGID.FLOOR", &ahead.to_string()]).unwrap();
    assert!(s.imid_stat("msgid_high_water_ms") >= ahead as i64);
    let id: String = cmd(&mut con, &["MSGID.GEN", "1", "x"]).unwrap();
    assert!(fields_of(&id).0 >= ahead, "{id}");
}

#[test]
fn many_ids_in_one_millisecond_borrow_the_next() {
    // Whether 4096 IDs land in one millisecond depends on the machine; the exact borrow count
    // is checked under a frozen clock in tests/it/clock.rs. Here: at most 4096 per millisecond,
    // and a borrow only ever follows a full millisecond.
    let s = Server::start();
    let mut con = s.client();
    let mut p = redis::pipe();
    for _ in 0..20_000 {
        p.cmd("MSGID.GEN").arg(0).arg("t");
    }
    let ids: Vec<String> = p.query(&mut con).unwrap();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let per_ms_max = {
        let mut counts = std::collections::HashMap::new();
        for id in &ids {
            *counts.entry(fields_of(id).0).or_insert(0u32) += 1;
        }
        counts.into_values().max().unwrap()
    };
    assert!(per_ms_max <= 4096);
    let borrowed = s.imid_stat("msgid_borrowed_ms");
    let seqs_at_max = ids.iter().filter(|id| fields_of(id).1 == 4095).count() as i64;
    assert!(
        borrowed <= seqs_at_max,
        "a borrow follows a full millisecond"
    );
}

#[test]
fn random_garbage_to_decode_is_always_an_error_and_the_server_lives() {
    use rand::{Rng, SeedableRng};
    let s = Server::start();
    let mut con = s.client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1D);
    let alphabet = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_ \x00\xff";
    let mut sent = 0;
    while sent < 100_000 {
        let mut p = redis::pipe();
        let mut inputs = Vec::new();
        for _ in 0..1000 {
            let len = if rng.random_bool(0.5) {
                19
            } else {
                rng.random_range(0..40)
            };
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.random_bool(0.9) {
                        alphabet[rng.random_range(0..alphabet.len())]
                    } else {
                        rng.random()
                    }
                })
                .collect();
            p.cmd("MSGID.DECODE").arg(&s);
            inputs.push(s);
        }
        let replies: Vec<redis::RedisResult<Value>> = p
            .query::<Vec<Value>>(&mut con)
            .map(|v| v.into_iter().map(Ok).collect())
            .unwrap_or_else(|_| Vec::new());
        // A pipeline with errors comes back as Value::ServerError items in redis 1.x.
        for (input, r) in inputs.iter().zip(replies) {
            let well_formed = input.len() == 19
                && input.iter().enumerate().all(|(i, c)| {
                    if i % 5 == 4 {
                        *c == b'-'
                    } else {
                        c.is_ascii_digit() || (b'A'..=b'V').contains(c)
                    }
                });
            match r {
                Ok(Value::ServerError(e)) => {
                    assert!(!well_formed, "{input:?} refused: {e:?}");
                    assert_eq!(e.code(), "ERR");
                }
                Ok(Value::Array(_)) => assert!(well_formed, "{input:?} accepted"),
                other => panic!("{input:?}: {other:?}"),
            }
        }
        sent += 1000;
    }
    let pong: String = cmd(&mut con, &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn generation_is_refused_on_a_replica() {
    let primary = Server::start();
    let replica = Server::with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    let mut con = replica.client();
    let e = cmd::<String>(&mut con, &["MSGID.GEN", "1", "conv"]).unwrap_err();
    assert!(err_text(&e).starts_with("READONLY"), "{e}");
    // read-only commands still work there
    let id: String = cmd(&mut con, &["MSGID.ENCODE", "1", "1", "1", "1"]).unwrap();
    assert_eq!(id, "0000-0000-8024-0001");
}

#[test]
fn module_loadex_with_a_bad_config_leaves_no_module_behind() {
    // The module has a data type, so Redis could not unload a half-loaded one: a refused
    // config must fail the load itself.
    let (s, module) = Server::loadable("yes");
    let mut con = s.client();
    for (name, bad) in [("imid.msgid-hash", "murmur"), ("imid.seq-gap", "-1")] {
        let e = loadex(&mut con, &module, &[(name, bad)]).unwrap_err();
        assert!(e.starts_with("ERR"), "{e}");
        let e = cmd::<String>(&mut con, &["MSGID.ENCODE", "0", "0", "0", "0"]).unwrap_err();
        assert!(
            err_text(&e).contains("unknown command"),
            "{name} {bad}: module left loaded: {e}"
        );
    }
    loadex(&mut con, &module, &[("imid.msgid-hash", "slot")]).unwrap();
    let v: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.msgid-hash"]).unwrap();
    assert_eq!(v[1], "slot");
}
