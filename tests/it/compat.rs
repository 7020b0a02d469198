//! What differs between the servers imid supports, one test per difference, each run against
//! whatever `REDIS_SERVER` is (`make test-matrix` runs it on Redis 7.0 and 8.2, Valkey 8.0 and
//! 9.1) and saying which answer each server gives. docs/operations.md, "Compatibility", lists them.
use crate::common;
use common::*;

/// The server's product and version, from INFO server: ("redis", "8.2.3"), ("valkey", "9.1.2").
/// Valkey keeps `redis_version` (7.2.4) for compatibility and adds `server_name` and
/// `valkey_version`.
fn server(s: &Server) -> (String, String) {
    match s.info_field("server", "valkey_version") {
        Some(v) => ("valkey".to_owned(), v),
        None => (
            "redis".to_owned(),
            s.info_field("server", "redis_version")
                .expect("redis_version"),
        ),
    }
}

/// The major version as a number.
fn major(version: &str) -> u32 {
    version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("version {version}"))
}

#[test]
fn version_differences_module_list_and_redis_version() {
    // A version-specific difference: Redis 8 lists its built-in `vectorset` module and Valkey 9
    // its `lua` scripting engine beside imid; Redis 7.0 and Valkey 8.0 list imid alone. Tools
    // that take MODULE LIST's first entry for imid's break on the newer servers; look it up
    // by name (as these tests do).
    let s = Server::start();
    let mut con = s.client();
    let (product, version) = server(&s);
    let major = major(&version);
    let builtin: &[&str] = match (product.as_str(), major) {
        ("redis", 8..) => &["vectorset"],
        ("valkey", 9..) => &["lua"],
        _ => &[],
    };
    let mut want: Vec<String> = builtin.iter().map(|m| m.to_string()).collect();
    want.push("imid".to_owned());
    want.sort();
    let mut got = modules(&mut con);
    got.sort();
    assert_eq!(got, want, "{product} {version}");
    // Another: Valkey keeps reporting redis_version 7.2.4 (the Redis it forked from), so a
    // version check must read valkey_version there.
    if product == "valkey" {
        assert_eq!(
            s.info_field("server", "redis_version").as_deref(),
            Some("7.2.4")
        );
        assert_eq!(
            s.info_field("server", "server_name").as_deref(),
            Some("valkey")
        );
    }
}

/// The ACL categories COMMAND INFO gives `name` (its 7th element).
fn categories(con: &mut Connection, name: &str) -> Vec<String> {
    let info: Vec<Vec<Value>> = cmd(con, &["COMMAND", "INFO", name]).unwrap();
    redis::from_redis_value(info[0][6].clone()).unwrap()
}

#[test]
fn acl_categories_by_server() {
    // Redis 7.0 has no API to put a module command in a category: imid's commands are in none,
    // and `-@write` does not stop them (docs/access-control.md says to name them). Redis 8 and
    // Valkey 8 and 9 put them in @write/@read, @fast and @imid, and enforce that. Valkey 8.0.1
    // alone then leaves them out of `ACL CAT <category>` listings, though COMMAND INFO shows
    // the categories and ACL rules enforce them (measured): audit a Valkey 8.0 user with
    // COMMAND INFO or ACL DRYRUN, not ACL CAT.
    let s = Server::start();
    let mut con = s.client();
    let (product, version) = server(&s);
    let old_redis = product == "redis" && major(&version) < 8;
    let _: () = cmd(
        &mut con,
        &[
            "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-@write",
        ],
    )
    .unwrap();
    let mut app = redis::Client::open(format!("redis://app:pw@127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let next: redis::RedisResult<i64> = cmd(&mut app, &["SEQ.NEXT", "k"]);
    let hash: redis::RedisResult<i64> = cmd(&mut app, &["MSGID.HASH", "k"]);
    assert!(
        hash.is_ok(),
        "{product} {version}: a reader refused: {hash:?}"
    );
    let listed_imid: Vec<String> = cmd(&mut con, &["ACL", "CAT", "imid"]).unwrap_or_default();
    let listed_write: Vec<String> = cmd(&mut con, &["ACL", "CAT", "write"]).unwrap();
    if old_redis {
        assert_eq!(categories(&mut con, "seq.next"), Vec::<String>::new());
        assert_eq!(next.ok(), Some(1), "{version}: -@write stopped SEQ.NEXT");
        assert!(!listed_write.iter().any(|c| c == "seq.next"));
        return;
    }
    assert_eq!(
        categories(&mut con, "seq.next"),
        ["@write", "@fast", "@imid"],
        "{product} {version}"
    );
    assert_eq!(
        categories(&mut con, "seq.get"),
        ["@read", "@fast", "@imid"],
        "{product} {version}"
    );
    let e = next.expect_err("SEQ.NEXT for a -@write user");
    assert!(err_text(&e).starts_with("NOPERM"), "{}", err_text(&e));
    let mut listed_imid = listed_imid;
    listed_imid.sort();
    // Every command the module registered, as the server lists them.
    let mut all: Vec<String> =
        cmd(&mut con, &["COMMAND", "LIST", "FILTERBY", "MODULE", "imid"]).unwrap();
    all.sort();
    assert!(all.len() >= 12, "{all:?}");
    if product == "valkey" && major(&version) == 8 {
        assert!(
            listed_imid.is_empty(),
            "{version}: ACL CAT imid {listed_imid:?}"
        );
        assert!(!listed_write.iter().any(|c| c == "seq.next"), "{version}");
    } else {
        assert_eq!(listed_imid, all, "{product} {version}: ACL CAT imid");
        assert!(
            listed_write.iter().any(|c| c == "seq.next"),
            "{product} {version}"
        );
    }
}
