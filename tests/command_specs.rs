//! Key-spec flags as Redis and its ACLs see them: readers may read sequences, not move them.
mod common;
use common::*;

#[test]
fn key_spec_flags_are_true() {
    let s = Server::start();
    let mut con = s.client();
    let cases: &[(&str, &str)] = &[
        ("seq.get", "RO access"),
        ("seq.mget", "RO access"),
        ("seq.next", "RW access update"),
        ("seq.advance", "RW access update"),
        ("seq.set", "OW update"),
        ("msgid.gen", "RO"),
    ];
    for (name, want) in cases {
        let info: Vec<Vec<Value>> = cmd(&mut con, &["COMMAND", "INFO", name]).unwrap();
        let specs = &info[0][8];
        let text = format!("{specs:?}");
        let flags: Vec<String> = match specs {
            Value::Array(v) => match &v[0] {
                Value::Array(kv) => redis::from_redis_value(kv[1].clone()).unwrap(),
                other => panic!("{name}: {other:?}"),
            },
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(flags.join(" "), *want, "{name}: {text}");
    }
}

#[test]
fn acl_read_only_key_permission_allows_reads_only() {
    let s = Server::start();
    let mut admin = s.client();
    let _: i64 = cmd(&mut admin, &["SEQ.NEXT", "conv"]).unwrap();
    let _: String = cmd(
        &mut admin,
        &["ACL", "SETUSER", "reader", "on", "nopass", "%R~*", "+@all"],
    )
    .unwrap();
    let mut reader = s.client();
    let _: String = cmd(&mut reader, &["AUTH", "reader", "x"]).unwrap();
    let v: i64 = cmd(&mut reader, &["SEQ.GET", "conv"]).unwrap();
    assert_eq!(v, 1);
    let v: Vec<i64> = cmd(&mut reader, &["SEQ.MGET", "conv", "other"]).unwrap();
    assert_eq!(v, [1, 0]);
    for args in [
        &["SEQ.NEXT", "conv"][..],
        &["SEQ.SET", "conv", "5"],
        &["SEQ.ADVANCE", "conv", "9"],
    ] {
        let e = cmd::<Value>(&mut reader, args).unwrap_err();
        assert!(err_text(&e).starts_with("NOPERM"), "{args:?}: {e}");
    }
    let v: i64 = cmd(&mut admin, &["SEQ.GET", "conv"]).unwrap();
    assert_eq!(v, 1, "nothing changed");
}
