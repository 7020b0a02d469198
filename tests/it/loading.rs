//! Every way into a server that docs/operations.md, "Loading", shows: `--loadmodule`, a `loadmodule`
//! line in redis.conf, `MODULE LOAD` and `MODULE LOADEX ... CONFIG ...` at runtime with
//! `enable-module-command local`, and the refusal a stock server gives without that setting.
//! Each loads the module and runs a command. Run on every server of `make test-matrix`.
use crate::common;
use common::*;

/// MSGID.HASH of `user1` in `java` mode (docs/configuration.md): the standalone default.
const JAVA_HASH_USER1: i64 = 2_526_662;

fn hash_user1(con: &mut Connection) -> i64 {
    cmd(con, &["MSGID.HASH", "user1"]).expect("MSGID.HASH")
}

#[test]
fn loadmodule_argument() {
    let s = Server::with(&["--imid.seq-gap", "5000"]);
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
    let (s, path) = Server::loadable("local");
    let mut con = s.client();
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
    let (s, path) = Server::loadable("local");
    let mut con = s.client();
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

/// Module arguments (`--loadmodule libimid.so <name> <value> ...`): every config by its name
/// with or without `imid.`, each applied (not just shown).
#[test]
fn module_arguments_set_every_config() {
    let key = "000102030405060708090a0b0c0d0e0f";
    let s = Server::with(&[
        "seq-gap",
        "0",
        "imid.msgid-hash",
        "slot",
        "openid-keys",
        key,
        "imid.uid-layout",
        "28,22,13",
        "uid-epoch",
        "1767225600000",
        "IMID.uid-time-unit",
        "s",
        "uid-node",
        "7",
    ]);
    let mut con = s.client();
    for (name, want) in [
        ("imid.seq-gap", "0"),
        ("imid.msgid-hash", "slot"),
        ("imid.openid-keys", key),
        ("imid.uid-layout", "28,22,13"),
        ("imid.uid-epoch", "1767225600000"),
        ("imid.uid-time-unit", "s"),
        ("imid.uid-node", "7"),
    ] {
        assert_eq!(config(&mut con, name), want, "{name}");
    }
    assert_ne!(hash_user1(&mut con), JAVA_HASH_USER1, "slot mode applied");
    let uid: i64 = cmd(&mut con, &["UID.GEN", "t"]).unwrap();
    let fields: Vec<Value> = cmd(&mut con, &["UID.DECODE", &uid.to_string()]).unwrap();
    let node = fields
        .iter()
        .position(|v| *v == Value::BulkString(b"node".to_vec()))
        .expect("node field");
    assert_eq!(fields[node + 1], Value::Int(7), "{fields:?}");
    // The key applies: the keyed example of docs/commands.md.
    let enc: String = cmd(&mut con, &["OPENID.ENC", "CE5H-STK6-0006-D3E6", "1", "2"]).unwrap();
    assert_eq!(enc, "vKOv2ur8pwNQCHoKAzc");
    // seq-gap 0: a key this process did not write skips nothing.
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "k"]), 1);
}

/// A module argument imid does not know, without a value, given twice, or with a value its
/// config refuses stops the server, with a log line naming the argument by its position (and
/// the config, for a known name), never quoting it.
#[test]
fn module_arguments_are_checked_like_configs() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["uid-nod", "7"],
            "module argument 1 of 2 is not a config of imid",
        ),
        (
            &["imid.bogus", "1"],
            "module argument 1 of 2 is not a config of imid",
        ),
        (&["imid.uid-node"], "module argument 1 of 1 (imid.uid-node) has no value"),
        (
            &["seq-gap", "5", "imid.seq-gap", "6"],
            "module argument 3 of 4: imid.seq-gap is given twice",
        ),
        (
            &["seq-gap", "-7"],
            "module argument 2 of 2 (the value of imid.seq-gap) refused: imid.seq-gap must be an integer in 0..1000000000",
        ),
        (
            &["uid-epoch", "-5"],
            "module argument 2 of 2 (the value of imid.uid-epoch) refused: imid.uid-epoch must be auto or Unix ms, an integer in 0..",
        ),
        (
            &["uid-node", "01"],
            "(the value of imid.uid-node) refused: imid.uid-node must be auto or a non-negative integer",
        ),
        (
            &["uid-node", " 5 "],
            "(the value of imid.uid-node) refused: imid.uid-node must be auto",
        ),
        (
            &["uid-layout", "41,10,14"],
            "(the value of imid.uid-layout) refused: imid.uid-layout widths must sum to 63",
        ),
        (
            &["uid-time-unit", "us"],
            "(the value of imid.uid-time-unit) refused: imid.uid-time-unit must be auto, ms, s, or a whole number of them",
        ),
        (
            &["msgid-hash", "crc"],
            "(the value of imid.msgid-hash) refused: imid.msgid-hash must be java, slot or auto",
        ),
        (
            &["openid-keys", "0001secret"],
            "module argument 2 of 2 (the value of imid.openid-keys) refused: imid.openid-keys entry 1",
        ),
        // The same values as configs (`--imid.*`) are refused by the same checks.
        (&["--imid.uid-node", "01"], "imid.uid-node must be auto or"),
        (&["--imid.uid-node", " 5 "], "imid.uid-node must be auto or"),
        (&["--imid.uid-epoch", "-5"], "uid-epoch"),
        (&["--imid.seq-gap", "-7"], "seq-gap"),
    ];
    for (args, want) in cases {
        let log = refused_load(args, want);
        assert!(!log.contains("secret"), "a key list is never logged: {log}");
    }
}

/// Module arguments are where the configs start; `CONFIG SET` moves them, and `CONFIG REWRITE`
/// writes what was set, which wins over the argument on the next start.
#[test]
fn config_rewrite_keeps_module_arguments_and_what_was_set() {
    let conf = format!(
        "loadmodule {} seq-gap 5 imid.msgid-hash slot\n",
        module_path().display()
    );
    let mut s = Server::build().without_module().conf(&conf).start();
    let mut con = s.client();
    assert_eq!(config(&mut con, "imid.seq-gap"), "5");
    let ok: String = cmd(&mut con, &["CONFIG", "REWRITE"]).unwrap();
    assert_eq!(ok, "OK");
    s.restart();
    let mut con = s.client();
    assert_eq!(config(&mut con, "imid.seq-gap"), "5");
    assert_eq!(config(&mut con, "imid.msgid-hash"), "slot");
    let ok: String = cmd(&mut con, &["CONFIG", "SET", "imid.seq-gap", "7"]).unwrap();
    assert_eq!(ok, "OK");
    let ok: String = cmd(&mut con, &["CONFIG", "REWRITE"]).unwrap();
    assert_eq!(ok, "OK");
    let file = std::fs::read_to_string(s.dir.join("redis.conf")).unwrap();
    assert!(file.contains("imid.seq-gap 7"), "{file}");
    s.restart();
    let mut con = s.client();
    assert_eq!(config(&mut con, "imid.seq-gap"), "7");
    assert_eq!(config(&mut con, "imid.msgid-hash"), "slot");
}
