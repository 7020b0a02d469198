//! ACL categories: where the server has them (Redis 7.2+, Valkey) every imid command is in
//! `@write` or `@read`, `@fast` and `@imid` (MSGID.FLOOR, UID.FLOOR, SEQ.IDMPCLOCK, SEQ.GAP and MSGID.PROMISE also `@dangerous`), so a
//! user denied `@write` cannot move a sequence or an ID floor by any path (directly, in MULTI, in EVAL, in
//! FCALL), and a `+@read` user runs the readers. On Redis 7.0, which has no categories for module
//! commands, the deny-by-name recipe of docs/access-control.md does the same.
use crate::common;
use common::*;

const WRITERS: &[&str] = &[
    "msgid.gen",
    "msgid.floor",
    "msgid.promise",
    "uid.gen",
    "uid.floor",
    "seq.next",
    "seq.set",
    "seq.advance",
    "seq.convert",
    "seq.idmpset",
    "seq.hidmpset",
    "seq.hnext",
    "seq.hset",
    "seq.hdel",
    "seq.hadvance",
    "seq.idmpclock",
    "seq.gap",
    "im.send",
    "im.sendset",
    "im.read",
    "im.change",
    "im.changeset",
];
const READERS: &[&str] = &[
    "msgid.encode",
    "msgid.decode",
    "msgid.hash",
    "uid.encode",
    "uid.decode",
    "openid.enc",
    "openid.dec",
    "seq.get",
    "seq.mget",
    "seq.hget",
    "seq.hmget",
    "seq.hgetall",
    "seq.hscan",
    "seq.hlen",
    "im.sync",
    "im.pull",
    "im.unread",
    "im.readby",
    "fence.replicas",
];
/// Operators' commands: `@admin`, `@dangerous`, `@slow`, neither `@write` nor `@read`.
const ADMINS: &[&str] = &["fence.forget", "fence.stale"];

/// Readers that walk a whole map: `@slow`, as HGETALL and HSCAN are.
const SLOW_READERS: &[&str] = &["seq.hgetall", "seq.hscan"];

/// The categories COMMAND INFO must show on a server that has them.
fn expected_categories(name: &str) -> Vec<&'static str> {
    let mut v = if ADMINS.contains(&name) {
        vec!["@admin", "@dangerous", "@slow", "@imid"]
    } else if WRITERS.contains(&name) {
        vec!["@write", "@fast", "@imid"]
    } else if SLOW_READERS.contains(&name) {
        vec!["@read", "@slow", "@imid"]
    } else {
        vec!["@read", "@fast", "@imid"]
    };
    // the floors, and the IDMP clock a primary writes for its replicas: dangerous
    if [
        "msgid.floor",
        "uid.floor",
        "seq.idmpclock",
        "seq.gap",
        "msgid.promise",
    ]
    .contains(&name)
    {
        v.push("@dangerous");
    }
    // the internal replicated form of SEQ.NEXT ... IDMP: not fast, and dangerous
    if name == "seq.idmpset" || name == "seq.hidmpset" {
        v.retain(|c| *c != "@fast");
        v.push("@dangerous");
    }
    // The IM family works on sorted sets (inboxes, change logs), in time proportional to its
    // recipients or its page; the replicated forms are internal too
    // IM.READBY reads one map, a lookup per member named: a fast reader, as SEQ.HMGET
    if name.starts_with("im.") && name != "im.readby" {
        v.retain(|c| *c != "@fast");
        v.extend(["@sortedset", "@slow"]);
        if name == "im.sendset" || name == "im.changeset" {
            v.push("@dangerous");
        }
    }
    v.sort_unstable();
    v
}

/// A call of each writer: (keys, full command). The floor is within the client lead of a
/// minute, so an admin could set it: only the ACL stops it.
fn write_calls(now_ms: u64) -> Vec<(Vec<String>, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        (s(&["a"]), s(&["SEQ.SET", "a", "9"])),
        (s(&["a"]), s(&["SEQ.NEXT", "a"])),
        (s(&["a"]), s(&["SEQ.NEXT", "a", "COUNT", "5"])),
        (s(&["a"]), s(&["SEQ.ADVANCE", "a", "20"])),
        (s(&["a"]), s(&["SEQ.CONVERT", "a"])),
        (s(&["a"]), s(&["SEQ.NEXT", "a", "IDMP", "t"])),
        (s(&["a"]), s(&["SEQ.IDMPSET", "a", "t", "9", "1", "1", "0"])),
        (s(&["m"]), s(&["SEQ.HNEXT", "m", "f", "IDMP", "t"])),
        (
            s(&["m"]),
            s(&["SEQ.HIDMPSET", "m", "t", "9", "1", "1", "0", "f"]),
        ),
        (s(&["a", "b"]), s(&["SEQ.ADVANCE", "a", "20", "LIMIT", "b"])),
        (s(&["m"]), s(&["SEQ.HNEXT", "m", "f"])),
        (s(&["m"]), s(&["SEQ.HSET", "m", "f", "9", "g", "1"])),
        (s(&["m"]), s(&["SEQ.HDEL", "m", "f"])),
        (s(&["m"]), s(&["SEQ.HADVANCE", "m", "f", "20"])),
        (
            s(&["m", "a"]),
            s(&["SEQ.HADVANCE", "m", "f", "20", "LIMIT", "a"]),
        ),
        (
            s(&["t", "a", "i", "tr"]),
            s(&["IM.SEND", "t", "a", "i", "tr", "1", "s", "c", "b", "5"]),
        ),
        (
            s(&["t", "a", "i", "tr"]),
            s(&[
                "IM.SENDSET",
                "9 0000-0000-7VS6-D3E6 4198401 1 0",
                "t",
                "a",
                "i",
                "tr",
                "1",
                "s",
                "c",
                "b",
                "5",
            ]),
        ),
        (
            s(&["r", "i", "a"]),
            s(&["IM.READ", "r", "i", "a", "u", "1"]),
        ),
        (
            s(&["c", "ct", "cl"]),
            s(&["IM.CHANGE", "c", "ct", "cl", "k", "x", "5"]),
        ),
        (
            s(&["c", "ct", "cl"]),
            s(&["IM.CHANGESET", "9", "c", "ct", "cl", "k", "x", "5"]),
        ),
        (s(&["x"]), s(&["MSGID.GEN", "1", "x"])),
        (s(&["x"]), s(&["UID.GEN", "x"])),
        (s(&["x"]), s(&["UID.GEN", "x", "COUNT", "5", "STRING"])),
        (
            Vec::new(),
            vec!["MSGID.FLOOR".into(), (now_ms + 59_000).to_string()],
        ),
        (
            Vec::new(),
            vec!["UID.FLOOR".into(), (now_ms + 59_000).to_string()],
        ),
    ]
}

fn read_calls() -> Vec<Vec<&'static str>> {
    vec![
        vec!["SEQ.GET", "a"],
        vec!["SEQ.MGET", "a", "b"],
        vec!["SEQ.HGET", "m", "f"],
        vec!["SEQ.HMGET", "m", "f", "g"],
        vec!["SEQ.HGETALL", "m"],
        vec!["SEQ.HSCAN", "m", "0", "COUNT", "5"],
        vec!["SEQ.HLEN", "m"],
        vec!["MSGID.ENCODE", "0", "4094", "1", "2526662"],
        vec!["MSGID.DECODE", "0000-0000-7VS6-D3E6"],
        vec!["MSGID.HASH", "user1"],
        vec!["UID.ENCODE", "1767225600001", "1", "1"],
        vec!["UID.DECODE", "4198401"],
        vec!["OPENID.ENC", "CE5H-STK6-0006-D3E6", "1", "2"],
        vec!["OPENID.DEC", "CRVqnhdjjxUJc4TTCBc"],
        vec!["IM.SYNC", "a", "i", "t", "0", "10"],
        vec!["IM.PULL", "c", "ct", "cl", "k", "0"],
        vec!["IM.UNREAD", "r", "i", "u"],
        vec!["IM.READBY", "r", "3", "u", "v"],
        vec!["FENCE.REPLICAS"],
    ]
}

fn login(s: &Server, user: &str) -> Connection {
    let mut con = s.client();
    let _: String = cmd(&mut con, &["AUTH", user, "pw"]).unwrap();
    con
}

/// The refusal of `name`, directly or relayed by a script. Redis 7.2+ and Valkey name the user
/// and the command everywhere; 7.0 says "this user", and in scripts names neither.
fn assert_denied(e: &redis::RedisError, user: &str, name: &str, how: &str) {
    let text = err_text(e);
    let named = text.contains(&format!(
        "User {user} has no permissions to run the '{name}' command"
    ));
    let redis70 = text.contains(&format!(
        "this user has no permissions to run the '{name}' command"
    )) || text.contains("The user executing the script can't run this command");
    assert!(named || redis70, "{how} {name}: {text}");
}

/// Sets up a sequence `a` at 5, a Functions library relaying any command, and a user.
fn setup(s: &Server, user: &str, rules: &[&str]) -> Connection {
    let mut admin = s.client();
    let _: () = cmd(&mut admin, &["SEQ.SET", "a", "5"]).unwrap();
    let _: i64 = cmd(&mut admin, &["SEQ.HSET", "m", "f", "5"]).unwrap();
    let lib = "#!lua name=acltest\n\
               redis.register_function('relay', function(keys, args) return redis.call(unpack(args)) end)";
    let _: String = cmd(&mut admin, &["FUNCTION", "LOAD", "REPLACE", lib]).unwrap();
    let mut args = vec!["ACL", "SETUSER", user, "on", ">pw", "~*", "&*"];
    args.extend_from_slice(rules);
    let _: String = cmd(&mut admin, &args).unwrap();
    admin
}

/// Every writer refused for `user` directly, queued in MULTI, in EVAL and in FCALL; nothing
/// changed (the sequence, the ID floor, the number of IDs issued).
fn assert_writers_denied(s: &Server, admin: &mut Connection, user: &str) {
    let hwm = s.imid_stat("msgid_high_water_ms");
    let uid_hwm = s.imid_stat("uid_high_water_ms");
    let generated = s.imid_stat("msgid_generated");
    let uids = s.imid_stat("uid_generated");
    let mut con = login(s, user);
    let now = server_time_ms(admin) as u64;
    for (keys, call) in write_calls(now) {
        let name = call[0].to_ascii_lowercase();
        let args: Vec<&str> = call.iter().map(String::as_str).collect();
        let e = cmd::<Value>(&mut con, &args).unwrap_err();
        assert!(err_text(&e).starts_with("NOPERM"), "{args:?}: {e}");
        assert_denied(&e, user, &name, "direct");

        let _: String = cmd(&mut con, &["MULTI"]).unwrap();
        let e = cmd::<Value>(&mut con, &args).unwrap_err();
        assert_denied(&e, user, &name, "MULTI");
        let e = cmd::<Value>(&mut con, &["EXEC"]).unwrap_err();
        assert!(err_text(&e).starts_with("EXECABORT"), "{args:?}: {e}");

        let numkeys = keys.len().to_string();
        let mut eval = vec!["EVAL", "return redis.call(unpack(ARGV))", numkeys.as_str()];
        eval.extend(keys.iter().map(String::as_str));
        eval.extend_from_slice(&args);
        let e = cmd::<Value>(&mut con, &eval).unwrap_err();
        assert_denied(&e, user, &name, "EVAL");

        let mut fcall = vec!["FCALL", "relay", numkeys.as_str()];
        fcall.extend(keys.iter().map(String::as_str));
        fcall.extend_from_slice(&args);
        let e = cmd::<Value>(&mut con, &fcall).unwrap_err();
        assert_denied(&e, user, &name, "FCALL");
    }
    let v: i64 = cmd(admin, &["SEQ.GET", "a"]).unwrap();
    assert_eq!(v, 5, "the sequence did not move");
    let v: Vec<Value> = cmd(admin, &["SEQ.HGETALL", "m"]).unwrap();
    assert_eq!(v.len(), 2, "the map did not change: {v:?}");
    let v: i64 = cmd(admin, &["SEQ.HGET", "m", "f"]).unwrap();
    assert_eq!(v, 5, "the map's field did not move");
    assert_eq!(
        s.imid_stat("msgid_high_water_ms"),
        hwm,
        "the ID floor did not move"
    );
    assert_eq!(
        s.imid_stat("uid_high_water_ms"),
        uid_hwm,
        "the UID floor did not move"
    );
    assert_eq!(
        s.imid_stat("msgid_generated"),
        generated,
        "no ID was issued"
    );
    assert_eq!(s.imid_stat("uid_generated"), uids, "no UID was issued");
}

fn assert_readers_allowed(s: &Server, user: &str) {
    let mut con = login(s, user);
    for call in read_calls() {
        cmd::<Value>(&mut con, &call).unwrap_or_else(|e| panic!("{user} {call:?}: {e}"));
    }
    let v: i64 = cmd(&mut con, &["SEQ.GET", "a"]).unwrap();
    assert_eq!(v, 5);
}

fn categories_are_set(bin: std::path::PathBuf) {
    let s = Server::build().bin(bin).start();
    let mut con = s.client();
    for name in WRITERS.iter().chain(READERS).chain(ADMINS) {
        let info: Vec<Vec<Value>> = cmd(&mut con, &["COMMAND", "INFO", name]).unwrap();
        let mut got: Vec<String> = redis::from_redis_value(info[0][6].clone()).unwrap();
        got.sort_unstable();
        assert_eq!(got, expected_categories(name), "{name}");
    }
    let mut imid: Vec<String> = cmd(&mut con, &["ACL", "CAT", "imid"]).unwrap();
    imid.sort_unstable();
    let mut all: Vec<&str> = WRITERS
        .iter()
        .chain(READERS)
        .chain(ADMINS)
        .copied()
        .collect();
    all.sort_unstable();
    assert_eq!(imid, all, "ACL CAT imid");
    for (cat, want) in [("write", WRITERS), ("read", READERS)] {
        let listed: Vec<String> = cmd(&mut con, &["ACL", "CAT", cat]).unwrap();
        let mut ours: Vec<String> = listed
            .into_iter()
            .filter(|c| all.contains(&c.as_str()))
            .collect();
        ours.sort_unstable();
        let mut want = want.to_vec();
        want.sort_unstable();
        assert_eq!(ours, want, "ACL CAT {cat}");
    }
}

fn write_denied_user_is_refused(bin: std::path::PathBuf) {
    let s = Server::build().bin(bin).start();
    let mut admin = setup(&s, "ro", &["+@all", "-@write"]);
    assert_writers_denied(&s, &mut admin, "ro");
    assert_readers_allowed(&s, "ro");
}

fn read_user_runs_readers_only(bin: std::path::PathBuf) {
    let s = Server::build().bin(bin).start();
    let mut admin = setup(&s, "reader", &["-@all", "+@read"]);
    assert_readers_allowed(&s, "reader");
    let mut con = login(&s, "reader");
    for (_, call) in write_calls(server_time_ms(&mut admin) as u64) {
        let args: Vec<&str> = call.iter().map(String::as_str).collect();
        let e = cmd::<Value>(&mut con, &args).unwrap_err();
        assert_denied(&e, "reader", &call[0].to_ascii_lowercase(), "direct");
    }
    // The operators' command is @admin, not @read.
    let e = cmd::<Value>(&mut con, &["FENCE.FORGET", "127.0.0.1:1"]).unwrap_err();
    assert_denied(&e, "reader", "fence.forget", "direct");
}

fn module_category_denies_everything(bin: std::path::PathBuf) {
    let s = Server::build().bin(bin).start();
    let _admin = setup(&s, "noimid", &["+@all", "-@imid"]);
    let mut con = login(&s, "noimid");
    for call in read_calls() {
        let e = cmd::<Value>(&mut con, &call).unwrap_err();
        assert_denied(&e, "noimid", &call[0].to_ascii_lowercase(), "direct");
    }
    // Everything else is still allowed.
    let _: String = cmd(&mut con, &["SET", "k", "v"]).unwrap();
}

on_newer_servers!(categories, |bin| categories_are_set(bin));

on_newer_servers!(write_denied_user, |bin| write_denied_user_is_refused(bin));

on_newer_servers!(read_user, |bin| read_user_runs_readers_only(bin));

on_newer_servers!(module_category, |bin| module_category_denies_everything(
    bin
));

/// `redis_version` as (major, minor). Valkey reports the Redis version it forked from (7.2).
fn version(s: &Server) -> (u32, u32) {
    let v = s
        .info_field("server", "redis_version")
        .expect("redis_version");
    let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

#[test]
fn default_server_categories_or_none() {
    // The default server (Debian's 7.0.15 unless REDIS_SERVER says otherwise): the module loads
    // either way; on 7.0 its commands belong to no category (there is no API for it), so
    // `-@write` alone would not stop them, which is what the recipe of docs/access-control.md is for.
    let s = Server::start();
    let mut con = s.client();
    let has_api = version(&s) >= (7, 2);
    for name in WRITERS.iter().chain(READERS).chain(ADMINS) {
        let info: Vec<Vec<Value>> = cmd(&mut con, &["COMMAND", "INFO", name]).unwrap();
        let got: Vec<String> = redis::from_redis_value(info[0][6].clone()).unwrap();
        if has_api {
            assert!(!got.is_empty(), "{name}");
        } else {
            assert!(got.is_empty(), "{name} on Redis 7.0: {got:?}");
        }
    }
    if !has_api {
        let listed: Vec<String> = cmd(&mut con, &["ACL", "CAT", "write"]).unwrap();
        assert!(listed.iter().all(|c| !c.contains('.')), "{listed:?}");
    }
}

#[test]
fn readme_recipe_denies_writers_by_name() {
    // The recipe of docs/access-control.md for Redis 7.0 (it works on every server): deny the writers by name,
    // grant the readers by name.
    let s = Server::start();
    let mut admin = setup(
        &s,
        "ro",
        &[
            "+@all",
            "-@write",
            "-msgid.gen",
            "-msgid.floor",
            "-uid.gen",
            "-uid.floor",
            "-seq.next",
            "-seq.set",
            "-seq.advance",
            "-seq.convert",
            "-seq.idmpset",
            "-seq.hidmpset",
            "-seq.hnext",
            "-seq.hset",
            "-seq.hdel",
            "-seq.hadvance",
            "-im.send",
            "-im.sendset",
            "-im.read",
            "-im.change",
            "-im.changeset",
            "-fence.forget",
        ],
    );
    assert_writers_denied(&s, &mut admin, "ro");
    assert_readers_allowed(&s, "ro");
    let _ = setup(
        &s,
        "reader",
        &[
            "-@all",
            "+@read",
            "+msgid.encode",
            "+msgid.decode",
            "+msgid.hash",
            "+uid.encode",
            "+uid.decode",
            "+openid.enc",
            "+openid.dec",
            "+seq.get",
            "+seq.mget",
            "+seq.hget",
            "+seq.hmget",
            "+seq.hgetall",
            "+seq.hscan",
            "+seq.hlen",
            "+im.sync",
            "+im.pull",
            "+im.unread",
            "+im.readby",
            "+fence.replicas",
        ],
    );
    assert_readers_allowed(&s, "reader");
    let mut ro = login(&s, "ro");
    let e = cmd::<Value>(&mut ro, &["FENCE.FORGET", "127.0.0.1:1"]).unwrap_err();
    assert_denied(&e, "ro", "fence.forget", "direct");
}

/// The LIMIT key is a read-only key: a user may clamp a cursor to a sequence it can read,
/// not to one its key patterns keep from it, and read permission is enough.
#[test]
fn limit_key_follows_acl_key_patterns() {
    let s = Server::start();
    let mut admin = s.client();
    let _: () = cmd(&mut admin, &["SEQ.SET", "max:1", "7"]).unwrap();
    let _: () = cmd(&mut admin, &["SEQ.SET", "secret", "7"]).unwrap();
    let _: String = cmd(
        &mut admin,
        &[
            "ACL", "SETUSER", "cur", "on", ">pw", "+@all", "~cur:*", "%R~max:*",
        ],
    )
    .unwrap();
    let mut con = login(&s, "cur");
    let v: i64 = cmd(&mut con, &["SEQ.ADVANCE", "cur:1", "9", "LIMIT", "max:1"]).unwrap();
    assert_eq!(v, 7);
    let v: i64 = cmd(
        &mut con,
        &["SEQ.HADVANCE", "cur:m", "u", "9", "LIMIT", "max:1"],
    )
    .unwrap();
    assert_eq!(v, 7);
    for call in [
        &["SEQ.ADVANCE", "cur:2", "9", "LIMIT", "secret"][..],
        &["SEQ.HADVANCE", "cur:m", "v", "9", "LIMIT", "secret"],
        // read-only permission does not allow writing max:* itself
        &["SEQ.ADVANCE", "max:1", "9"],
    ] {
        let e = cmd::<Value>(&mut con, call).unwrap_err();
        assert!(err_text(&e).starts_with("NOPERM"), "{call:?}: {e}");
    }
    assert_eq!(
        int_reply(&mut admin, &["EXISTS", "cur:2"]),
        0,
        "nothing written"
    );
    assert_eq!(int_reply(&mut admin, &["SEQ.HGET", "cur:m", "v"]), 0);
}
