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
