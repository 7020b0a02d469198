//! The `imid.*` configs do not leak: CONFIG GET and CONFIG SET (accepted and refused values)
//! in a loop leave `used_memory` flat, on every server the module supports.
//!
//! Before the fix every `CONFIG GET imid.openid-keys` leaked one string the size of the value,
//! every accepted `CONFIG SET` two and every refused one three (measured on 7.0.15, 8.2.3 and
//! Valkey 9.1.2): with a 16-key list, about 5 KB per round of the loop below.

use crate::common;
use common::*;

/// One 32-hex-digit key per entry: `k(0)` .. `k(15)`.
fn k(i: u8) -> String {
    format!(
        "{:032x}",
        u128::from(i) * 0x0101_0101_0101_0101_0101_0101_0101_0101
    )
}

/// Every imid config with values it accepts and values it refuses.
fn cases() -> Vec<(&'static str, Vec<String>, Vec<String>)> {
    let sixteen: Vec<String> = (1..=16).map(k).collect();
    let seventeen: Vec<String> = (1..=17).map(k).collect();
    vec![
        (
            "imid.openid-keys",
            vec![String::new(), format!("{},plain", k(1)), sixteen.join(",")],
            vec![
                "zz".to_owned(),
                format!("{},,{}", k(1), k(2)),
                seventeen.join(","),
            ],
        ),
        (
            "imid.seq-gap",
            vec!["1000".to_owned(), "5".to_owned()],
            vec!["-1".to_owned(), "x".to_owned()],
        ),
        (
            "imid.msgid-hash",
            vec!["java".to_owned(), "slot".to_owned(), "auto".to_owned()],
            vec!["sha1".to_owned()],
        ),
    ]
}

fn used_memory(con: &mut Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

/// `rounds` times: for every config, CONFIG SET of each accepted value followed by a CONFIG
/// GET, then CONFIG SET of each refused value (which must be refused).
fn churn(con: &mut Connection, rounds: usize) {
    let cases = cases();
    for _ in 0..rounds {
        for (name, good, bad) in &cases {
            for v in good {
                config_set(con, name, v);
                let got: Vec<String> = cmd(con, &["CONFIG", "GET", name]).unwrap();
                assert_eq!(got.len(), 2, "{name}");
            }
            for v in bad {
                assert!(
                    cmd::<()>(con, &["CONFIG", "SET", name, v]).is_err(),
                    "{name} accepted {v:?}"
                );
            }
        }
    }
}

/// `churn` for `warm` rounds (client buffers, allocator size classes), then for `rounds`
/// more, which may grow `used_memory` by at most 64 KiB of noise.
fn assert_churn_flat(
    con: &mut Connection,
    (warm, rounds): (usize, usize),
    mut churn: impl FnMut(&mut Connection, usize),
    what: &str,
) {
    churn(con, warm);
    let before = used_memory(con);
    churn(con, rounds);
    let after = used_memory(con);
    assert!(
        after - before < 64 * 1024,
        "used_memory grew from {before} to {after} over {rounds} rounds of {what}"
    );
}

fn assert_flat(s: &Server) {
    let mut con = s.client();
    // 500 rounds leaked about 2.5 MB before the fix.
    assert_churn_flat(&mut con, (100, 500), churn, "CONFIG GET/SET");
    // The values still work after the churn: the last accepted ones are in force.
    let v: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.openid-keys"]).unwrap();
    let sixteen: Vec<String> = (1..=16).map(k).collect();
    assert_eq!(v, vec!["imid.openid-keys".to_owned(), sixteen.join(",")]);
    let v: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.seq-gap"]).unwrap();
    assert_eq!(v, vec!["imid.seq-gap".to_owned(), "5".to_owned()]);
    let v: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.msgid-hash"]).unwrap();
    assert_eq!(v, vec!["imid.msgid-hash".to_owned(), "auto".to_owned()]);
}

#[test]
fn config_get_set_do_not_leak() {
    assert_flat(&Server::start());
}

on_newer_servers!(config_get_set_do_not_leak_on, |bin| assert_flat(
    &Server::build().bin(bin).start()
));

#[test]
fn openid_keys_get_returns_the_value_set() {
    // The getter now hands out one held string per accepted value: it must follow each SET,
    // keep its value across refused SETs, and show the normalised text.
    let s = Server::start();
    let mut con = s.client();
    let get = |con: &mut Connection| -> String {
        let v: Vec<String> = cmd(con, &["CONFIG", "GET", "imid.openid-keys"]).unwrap();
        v[1].clone()
    };
    assert_eq!(get(&mut con), "");
    let list = format!(" {} , PLAIN ", k(1).to_ascii_uppercase());
    config_set(&mut con, "imid.openid-keys", &list);
    let normalised = format!("{},plain", k(1));
    assert_eq!(get(&mut con), normalised);
    assert!(cmd::<()>(&mut con, &["CONFIG", "SET", "imid.openid-keys", "zz"]).is_err());
    assert_eq!(get(&mut con), normalised);
    config_set(&mut con, "imid.openid-keys", &k(2));
    assert_eq!(get(&mut con), k(2));
    config_set(&mut con, "imid.openid-keys", "");
    assert_eq!(get(&mut con), "");
}

/// The UID configs are load-time only: CONFIG SET refuses them, CONFIG GET shows them, and
/// neither leaks (all four are string configs, on the same held-string getter).
fn assert_uid_configs_flat(s: &Server) {
    let mut con = s.client();
    let churn = |con: &mut Connection, rounds: usize| {
        for _ in 0..rounds {
            for (name, want) in [
                ("imid.uid-layout", "40,11,12"),
                ("imid.uid-node", "1234"),
                ("imid.uid-time-unit", "auto"),
                ("imid.uid-epoch", "auto"),
            ] {
                let got: Vec<String> = cmd(con, &["CONFIG", "GET", name]).unwrap();
                assert_eq!(got, [name, want]);
                let e = cmd::<()>(con, &["CONFIG", "SET", name, want]).unwrap_err();
                assert!(err_text(&e).contains("immutable"), "{name}: {e}");
            }
        }
    };
    assert_churn_flat(&mut con, (200, 2000), churn, "CONFIG GET/SET imid.uid-*");
}

const UID_ARGS: &[&str] = &["--imid.uid-layout", "40,11,12", "--imid.uid-node", "1234"];

#[test]
fn uid_configs_do_not_leak() {
    assert_uid_configs_flat(&Server::with(UID_ARGS));
}

on_newer_servers!(uid_configs_do_not_leak_on, |bin| {
    assert_uid_configs_flat(&Server::build().bin(bin).args(UID_ARGS).start())
});

/// Every config that can change at runtime, each through every kind of value it accepts and
/// back (issue 34: `CONFIG SET imid.fence-replicas auto` after a number crashed the server,
/// whose config apply callback called into Redis from a context without a client).
fn runtime_values() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (
            "imid.fence-replicas",
            vec![
                "1", "2", "auto", "0", "auto", "1", "0", "AUTO", "1000", "auto",
            ],
        ),
        ("imid.fence-timeout", vec!["500", "2000", "1", "1000"]),
        ("imid.seq-gap", vec!["5", "0", "1000000000", "1000"]),
        // Below, at and above imid.seq-gap, 0, the largest, and back (the gate's budget and the
        // next gap record follow it).
        (
            "imid.seq-gap-max",
            vec!["5", "1000", "0", "1000000000", "1000000"],
        ),
        // The fence's next round counts replicas by the other offset.
        (
            "imid.fence-ack",
            vec!["applied", "fsynced", "APPLIED", "fsynced"],
        ),
        ("imid.seq-idmp-ttl", vec!["1", "604800", "300"]),
        ("imid.seq-idmp-max", vec!["1", "50", "100"]),
        ("imid.msgid-hash", vec!["java", "slot", "auto"]),
        (
            "imid.openid-keys",
            vec!["00112233445566778899aabbccddeeff,plain", ""],
        ),
    ]
}

/// CONFIG SET of each value of [`runtime_values`] on `s`, with CONFIG GET answering what was
/// set (`auto` in lower case), the server still answering a fenced call after each, and the
/// fence's `auto` following `min-replicas-to-write` set in the same CONFIG SET and apart.
fn cycle_runtime_configs(s: &Server, replica: Option<&Server>) {
    let mut con = s.client();
    let fenced = |con: &mut Connection| {
        // Answers (a value, or the fence's NOREPLICAS): never a dropped connection.
        match cmd::<i64>(con, &["SEQ.NEXT", "{cfg}:seq"]) {
            Ok(v) => assert!(v > 0),
            Err(e) => assert!(
                err_text(&e).starts_with("NOREPLICAS") || err_text(&e).starts_with("NOTDURABLE"),
                "{e}"
            ),
        }
    };
    // Redis's own AOF settings, which the durable gate follows (their config events): on, each
    // fsync policy, fsync off during a rewrite, off again; a call answered after each.
    for (name, v) in [
        ("appendonly", "yes"),
        ("appendfsync", "always"),
        ("no-appendfsync-on-rewrite", "yes"),
        ("appendfsync", "no"),
        ("appendfsync", "everysec"),
        ("no-appendfsync-on-rewrite", "no"),
        ("appendonly", "no"),
    ] {
        config_set(&mut con, name, v);
        fenced(&mut con);
    }
    for round in 0..2 {
        for (name, values) in runtime_values() {
            for v in values {
                config_set(&mut con, name, v);
                let got: Vec<String> =
                    cmd(&mut con, &["CONFIG", "GET", name]).unwrap_or_else(|e| {
                        panic!("CONFIG GET {name} after {v:?}: {e}\n{}", s.log_tail())
                    });
                assert_eq!(
                    got,
                    [name.to_owned(), v.to_ascii_lowercase()],
                    "round {round}"
                );
                fenced(&mut con);
                if let Some(r) = replica {
                    let mut rc = r.client();
                    config_set(&mut rc, name, v);
                    let got: Vec<String> = cmd(&mut rc, &["CONFIG", "GET", name]).unwrap();
                    assert_eq!(got[1], v.to_ascii_lowercase());
                }
            }
        }
        // `auto` together with the server's own setting, in one CONFIG SET and in two.
        for (min, fence) in [("1", "auto"), ("0", "2"), ("2", "auto"), ("0", "auto")] {
            ok(
                &mut con,
                &[
                    "CONFIG",
                    "SET",
                    "min-replicas-to-write",
                    min,
                    "imid.fence-replicas",
                    fence,
                ],
            );
            fenced(&mut con);
            config_set(&mut con, "imid.fence-replicas", "1");
            config_set(&mut con, "imid.fence-replicas", fence);
            fenced(&mut con);
        }
    }
    assert_eq!(
        cmd::<String>(&mut con, &["PING"]).unwrap(),
        "PONG",
        "{}",
        s.log_tail()
    );
}

#[test]
fn every_runtime_config_through_every_value_keeps_the_server_up() {
    let s = Server::start();
    cycle_runtime_configs(&s, None);
    // The fence still works: on with one replica required and none online, it refuses at once.
    let mut con = s.client();
    config_set(&mut con, "imid.fence-replicas", "auto");
    config_set(&mut con, "min-replicas-to-write", "0");
    config_set(&mut con, "imid.fence-replicas", "1");
    let e = cmd::<i64>(&mut con, &["SEQ.NEXT", "{cfg}:after"]).unwrap_err();
    assert!(err_text(&e).contains("0 replica(s) online"), "{e}");
}

#[test]
fn every_runtime_config_through_every_value_keeps_a_primary_and_replica_up() {
    let s = Server::start();
    let r = s.replica(&[]);
    cycle_runtime_configs(&s, Some(&r));
    // The pair still serves fenced calls: one replica required, one online.
    let mut con = s.client();
    config_set(&mut con, "min-replicas-to-write", "0");
    config_set(&mut con, "imid.fence-replicas", "1");
    // (Once the replica is online: its first sync may still be under way, after the diskless
    // sync's delay.)
    s.wait_until("the replica online", 30, || {
        let role: Vec<Value> = cmd(&mut con, &["ROLE"]).unwrap();
        matches!(role.get(2), Some(Value::Array(r)) if r.len() == 1)
    });
    let v: i64 = cmd(&mut con, &["SEQ.NEXT", "{cfg}:after"]).unwrap();
    assert!(v > 0);
    let mut rc = r.client();
    assert_eq!(cmd::<String>(&mut rc, &["PING"]).unwrap(), "PONG");
}
