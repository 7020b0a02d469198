//! Every way into a server that the README's quick start shows: `--loadmodule`, a `loadmodule`
//! line in redis.conf, `MODULE LOAD` and `MODULE LOADEX ... CONFIG ...` at runtime with
//! `enable-module-command local`, and the refusal a stock server gives without that setting.
//! Each loads the module and runs a command. Run on every server of `make test-matrix`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
mod common;
use common::*;

/// MSGID.HASH of `user1` in `java` mode (README): the standalone default.
const JAVA_HASH_USER1: i64 = 2_526_662;

fn hash_user1(con: &mut Connection) -> i64 {
    cmd(con, &["MSGID.HASH", "user1"]).expect("MSGID.HASH")
}

fn config(con: &mut Connection, name: &str) -> String {
    let v: Vec<String> = cmd(con, &["CONFIG", "GET", name]).unwrap();
    assert_eq!(v.len(), 2, "CONFIG GET {name}: {v:?}");
    v[1].clone()
}

/// The names MODULE LIST shows.
fn modules(con: &mut Connection) -> Vec<String> {
    let list: Vec<Vec<Value>> = cmd(con, &["MODULE", "LIST"]).unwrap();
    list.iter()
        .map(|m| {
            let fields: Vec<String> = m
                .iter()
                .map(|v| redis::from_redis_value::<String>(v.clone()).unwrap_or_default())
                .collect();
            let at = fields.iter().position(|f| f == "name").expect("name field");
            fields[at + 1].clone()
        })
        .collect()
}

#[test]
fn loadmodule_argument() {
    let s = Server::build().args(&["--imid.seq-gap", "5000"]).start();
    let mut con = s.client();
    assert_eq!(hash_user1(&mut con), JAVA_HASH_USER1);
    assert_eq!(config(&mut con, "imid.seq-gap"), "5000");
}

#[test]
fn loadmodule_line_in_redis_conf() {
    // As an operator writes it: the module's line, then its configs on lines of their own.
    let conf = format!(
        "loadmodule {}\nimid.msgid-hash slot\nimid.seq-gap 5000\n",
        module_path().display()
    );
    let s = Server::build().without_module().conf(&conf).start();
    let mut con = s.client();
    assert!(modules(&mut con).iter().any(|m| m == "imid"));
    assert_eq!(config(&mut con, "imid.msgid-hash"), "slot");
    assert_eq!(config(&mut con, "imid.seq-gap"), "5000");
    let h = hash_user1(&mut con);
    assert_ne!(
        h, JAVA_HASH_USER1,
        "slot mode from the file was not applied"
    );
    let id: String = cmd(&mut con, &["MSGID.GEN", "1", "user1"]).unwrap();
    let fields: Vec<Value> = cmd(&mut con, &["MSGID.DECODE", &id]).unwrap();
    assert_eq!(fields[7], Value::Int(h), "{fields:?}");
}

#[test]
fn module_command_is_refused_by_default() {
    // enable-module-command defaults to `no` on every server tested: MODULE LOAD is the way
    // most users try first, and a stock server refuses it.
    let s = Server::build().without_module().args(&[]).start();
    let mut con = s.client();
    assert_eq!(config(&mut con, "enable-module-command"), "no");
    let path = module_path().display().to_string();
    for args in [
        vec!["MODULE", "LOAD", path.as_str()],
        vec![
            "MODULE",
            "LOADEX",
            path.as_str(),
            "CONFIG",
            "imid.seq-gap",
            "5",
        ],
    ] {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let e = expect_err(&mut con, &raw);
        assert!(e.starts_with("ERR MODULE command not allowed"), "{e}");
        assert!(e.contains("enable-module-command"), "{e}");
    }
    assert!(!modules(&mut con).iter().any(|m| m == "imid"));
    let e = expect_err(&mut con, &[b"MSGID.HASH", b"user1"]);
    assert!(e.starts_with("ERR unknown command"), "{e}");
    // ... and a client cannot lift the refusal: the setting is fixed at startup.
    let e = expect_err(
        &mut con,
        &[b"CONFIG", b"SET", b"enable-module-command", b"local"],
    );
    assert!(e.contains("immutable config"), "{e}");
}

#[test]
fn module_load_with_enable_module_command_local() {
    let s = Server::build()
        .without_module()
        .args(&["--enable-module-command", "local"])
        .start();
    let mut con = s.client();
    let path = module_path().display().to_string();
    let ok: String = cmd(&mut con, &["MODULE", "LOAD", &path]).unwrap();
    assert_eq!(ok, "OK");
    assert!(modules(&mut con).iter().any(|m| m == "imid"));
    assert_eq!(hash_user1(&mut con), JAVA_HASH_USER1);
    assert_eq!(config(&mut con, "imid.seq-gap"), "1000");
    // A module with a data type stays once loaded.
    let e = expect_err(&mut con, &[b"MODULE", b"UNLOAD", b"imid"]);
    assert!(e.contains("data types, can't unload"), "{e}");
    assert_eq!(hash_user1(&mut con), JAVA_HASH_USER1);
}

#[test]
fn module_loadex_with_configs() {
    let s = Server::build()
        .without_module()
        .args(&["--enable-module-command", "local"])
        .start();
    let mut con = s.client();
    let path = module_path().display().to_string();
    let ok: String = cmd(
        &mut con,
        &[
            "MODULE",
            "LOADEX",
            &path,
            "CONFIG",
            "imid.msgid-hash",
            "slot",
            "CONFIG",
            "imid.seq-gap",
            "5000",
        ],
    )
    .unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(config(&mut con, "imid.msgid-hash"), "slot");
    assert_eq!(config(&mut con, "imid.seq-gap"), "5000");
    assert_ne!(hash_user1(&mut con), JAVA_HASH_USER1);
    let v: i64 = cmd(&mut con, &["SEQ.NEXT", "k"]).unwrap();
    assert_eq!(v, 1);
}
