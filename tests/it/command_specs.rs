//! COMMAND INFO for every command (arity, flags, key positions, key-spec flags), and what
//! the key-spec flags mean to ACLs: readers may read sequences, not move them.
use crate::common;
use common::*;

/// What COMMAND INFO must say of each command: name, arity, flags (without the `module` flag
/// Redis adds to all), legacy key range (first, last, step), key-spec flags ("" when keyless).
#[rustfmt::skip] // one line per command reads as the table it is
const EXPECTED: &[(&str, i64, &str, [i64; 3], &str)] = &[
    ("msgid.gen",     3,   "fast write",                     [2, 2, 1],  "RO"),
    ("msgid.encode",  5,   "fast readonly",                  [0, 0, 0],  ""),
    ("msgid.decode",  2,   "fast readonly",                  [0, 0, 0],  ""),
    ("msgid.hash",    2,   "fast readonly",                  [0, 0, 0],  ""),
    ("msgid.floor",   2,   "fast write",                     [0, 0, 0],  ""),
    ("msgid.promise", 5,   "fast write",                     [1, 1, 1],  "RO"),
    ("seq.idmpclock", 4,   "fast write",                     [0, 0, 0],  ""),
    ("seq.gap",       2,   "fast write",                     [0, 0, 0],  ""),
    ("uid.gen",       -2,  "fast write",                     [1, 1, 1],  "RO"),
    ("uid.decode",    -2,  "fast readonly",                  [0, 0, 0],  ""),
    ("uid.encode",    -4,  "fast readonly",                  [0, 0, 0],  ""),
    ("uid.floor",     2,   "fast write",                     [0, 0, 0],  ""),
    ("openid.enc",    4,   "fast readonly",                  [0, 0, 0],  ""),
    ("openid.dec",    2,   "fast readonly",                  [0, 0, 0],  ""),
    ("seq.next",      -2,  "denyoom fast write",             [1, 1, 1],  "RW access update"),
    ("seq.get",       2,   "fast readonly",                  [1, 1, 1],  "RO access"),
    ("seq.mget",      -2,  "fast readonly",                  [1, -1, 1], "RO access"),
    ("seq.set",       3,   "denyoom fast write",             [1, 1, 1],  "OW update"),
    ("seq.advance",   -3,  "denyoom fast movablekeys write", [1, 1, 1],  "RW access update"),
    ("seq.convert",   2,   "denyoom fast write",             [1, 1, 1],  "RW access update"),
    ("seq.hnext",     -3,  "denyoom fast write",             [1, 1, 1],  "RW access update"),
    ("seq.idmpset",   7,   "denyoom write",                  [1, 1, 1],  "RW access update"),
    ("seq.hidmpset",  -7,  "denyoom write",                  [1, 1, 1],  "RW access update"),
    ("seq.hget",      3,   "fast readonly",                  [1, 1, 1],  "RO access"),
    ("seq.hmget",     -3,  "fast readonly",                  [1, 1, 1],  "RO access"),
    ("seq.hgetall",   2,   "readonly",                       [1, 1, 1],  "RO access"),
    ("seq.hscan",     -3,  "readonly",                       [1, 1, 1],  "RO access"),
    ("seq.hset",      -4,  "denyoom fast write",             [1, 1, 1],  "RW access update"),
    ("seq.hdel",      -3,  "fast write",                     [1, 1, 1],  "RW delete"),
    ("seq.hlen",      2,   "fast readonly",                  [1, 1, 1],  "RO access"),
    ("seq.hadvance",  -4,  "denyoom fast movablekeys write", [1, 1, 1],  "RW access update"),
    // The tag and the sequence make the legacy range; the inbox/trimmed pairs (every second
    // argument) only the key specs and the getkeys API can say (tests/it/im_send.rs).
    // The IM.* commands take any number of arguments and refuse a wrong count themselves,
    // naming their layout (issue 46), where Redis's arity check would only say "wrong number".
    ("im.send",       -2,  "denyoom movablekeys write",      [1, 2, 1],  "RO"),
    ("im.sendset",    -11, "denyoom movablekeys write",      [2, 3, 1],  "RO"),
    // The read side (tests/it/im_read.rs checks every key spec with COMMAND GETKEYS).
    ("im.sync",       -2,  "movablekeys readonly",           [1, 3, 1],  "RO access"),
    ("im.read",       -2,  "denyoom movablekeys write",      [1, 3, 1],  "RW access update"),
    ("im.unread",     -2,  "readonly",                       [1, 2, 1],  "RO access"),
    ("im.readby",     -2,  "fast readonly",                  [1, 1, 1],  "RO access"),
    ("im.pull",       -2,  "movablekeys readonly",           [1, -1, 1], "RO access"),
    ("im.change",     -2,  "denyoom movablekeys write",      [1, 3, 1],  "RW access update"),
    ("im.changeset",  8,   "denyoom movablekeys write",      [2, 4, 1],  "RW access update"),
    ("fence.replicas", 1,  "fast readonly",                  [0, 0, 0],  ""),
    ("fence.forget",  2,   "admin",                          [0, 0, 0],  ""),
    ("fence.stale",   -1,  "admin",                          [0, 0, 0],  ""),
];

/// The LIMIT key of SEQ.ADVANCE and SEQ.HADVANCE: a second key spec, read-only, found after
/// the keyword LIMIT (so COMMAND GETKEYS, Cluster and ACL key patterns see it); a field or
/// value spelled "LIMIT" before it is not taken for the keyword.
#[test]
fn limit_key_is_a_second_read_only_key() {
    let s = Server::start();
    let mut con = s.client();
    for (name, from) in [("seq.advance", 3), ("seq.hadvance", 4)] {
        let info: Vec<Vec<Value>> = cmd(&mut con, &["COMMAND", "INFO", name]).unwrap();
        let specs = match &info[0][8] {
            Value::Array(v) => v.clone(),
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(specs.len(), 2, "{name}: {specs:?}");
        let Value::Array(kv) = &specs[1] else {
            panic!("{name}: {specs:?}")
        };
        assert_eq!(strings(&kv[1]), ["RO", "access"], "{name}");
        let text = format!("{kv:?}");
        assert!(text.contains("LIMIT"), "{name}: {text}");
        let Value::Array(bs) = &kv[3] else {
            panic!("{name}: {kv:?}")
        };
        let Value::Array(spec) = &bs[3] else {
            panic!("{name}: {bs:?}")
        };
        assert_eq!(as_i64(&spec[3]), from, "{name} startfrom");
    }
    #[rustfmt::skip]
    let cases: &[(&[&str], &[&str])] = &[
        (&["SEQ.ADVANCE", "k", "5"], &["k"]),
        (&["SEQ.ADVANCE", "k", "5", "LIMIT", "max"], &["k", "max"]),
        (&["SEQ.ADVANCE", "k", "5", "limit", "max"], &["k", "max"]),
        (&["SEQ.HADVANCE", "m", "f", "5"], &["m"]),
        (&["SEQ.HADVANCE", "m", "f", "5", "LIMIT", "max"], &["m", "max"]),
        (&["SEQ.HADVANCE", "m", "LIMIT", "5", "LIMIT", "max"], &["m", "max"]),
        (&["SEQ.HADVANCE", "m", "LIMIT", "5"], &["m"]),
        (&["SEQ.HNEXT", "m", "f", "COUNT", "3"], &["m"]),
        (&["SEQ.HMGET", "m", "a", "b"], &["m"]),
        (&["SEQ.HSET", "m", "a", "1", "b", "2"], &["m"]),
        (&["SEQ.HDEL", "m", "a", "b"], &["m"]),
        (&["SEQ.HSCAN", "m", "0", "COUNT", "5"], &["m"]),
    ];
    assert_getkeys(&mut con, cases);
}

fn strings(v: &Value) -> Vec<String> {
    redis::from_redis_value(v.clone()).unwrap()
}

fn as_i64(v: &Value) -> i64 {
    redis::from_redis_value(v.clone()).unwrap()
}

#[test]
fn command_info_tells_the_truth_for_every_command() {
    let s = Server::start();
    let mut con = s.client();
    let all: Vec<Value> =
        cmd(&mut con, &["COMMAND", "LIST", "FILTERBY", "MODULE", "imid"]).unwrap();
    let mut listed: Vec<String> = all
        .iter()
        .map(|v| redis::from_redis_value(v.clone()).unwrap())
        .collect();
    listed.sort();
    let mut expected: Vec<&str> = EXPECTED.iter().map(|e| e.0).collect();
    expected.sort();
    assert_eq!(listed, expected, "every registered command is checked here");
    for (name, arity, flags, range, spec_flags) in EXPECTED {
        let info: Vec<Vec<Value>> = cmd(&mut con, &["COMMAND", "INFO", name]).unwrap();
        let e = &info[0];
        assert_eq!(
            redis::from_redis_value::<String>(e[0].clone()).unwrap(),
            *name
        );
        assert_eq!(as_i64(&e[1]), *arity, "{name} arity");
        let mut got: Vec<String> = strings(&e[2])
            .into_iter()
            .filter(|f| f != "module")
            .collect();
        got.sort();
        assert_eq!(got.join(" "), *flags, "{name} flags");
        assert_eq!(
            [as_i64(&e[3]), as_i64(&e[4]), as_i64(&e[5])],
            *range,
            "{name} key range"
        );
        let specs = match &e[8] {
            Value::Array(v) => v.clone(),
            other => panic!("{name}: {other:?}"),
        };
        let got_spec_flags = match specs.first() {
            None => String::new(),
            Some(Value::Array(kv)) => strings(&kv[1]).join(" "),
            Some(other) => panic!("{name}: {other:?}"),
        };
        assert_eq!(got_spec_flags, *spec_flags, "{name} key-spec flags");
    }
}

#[test]
fn acl_read_only_key_permission_allows_reads_only_and_ids() {
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
    assert_seq_writes_refused(&mut reader, "conv", "NOPERM");
    let v: i64 = cmd(&mut admin, &["SEQ.GET", "conv"]).unwrap();
    assert_eq!(v, 1, "nothing changed");
    // MSGID.GEN's target is declared read-only (it is neither read nor written), so a
    // read-only key permission lets its holder issue IDs: deny MSGID.GEN by command or
    // category (docs/access-control.md).
    let id: String = cmd(&mut reader, &["MSGID.GEN", "1", "conv"]).unwrap();
    assert_eq!(id.len(), 19);
}

#[test]
fn decoders_reply_maps_under_resp3() {
    let s = Server::start();
    let mut con = s.client_resp3();
    let msgid: Vec<(String, i64)> = resp3_map(&mut con, &["MSGID.DECODE", "0000-0000-7VS6-D3E6"]);
    let want = [
        ("time", 0),
        ("seq", 4094),
        ("channel_type", 1),
        ("hash", 2526662),
    ];
    assert_eq!(msgid, want.map(|(k, v)| (k.to_owned(), v)));
    // The largest UID under the default layout (41,10,12 from 2026-01-01).
    let uid: Vec<(String, i64)> = resp3_map(&mut con, &["UID.DECODE", &i64::MAX.to_string()]);
    let want = [
        ("time", 1_767_225_600_000 + (1 << 41) - 1),
        ("node", 1023),
        ("seq", 4095),
    ];
    assert_eq!(uid, want.map(|(k, v)| (k.to_owned(), v)));
    let openid: Vec<(String, String)> = resp3_map(&mut con, &["OPENID.DEC", "SY62cbZxtnG2cbZxSIw"]);
    // tests/vectors/openid.tsv, the row of this public ID (from the reference Java).
    let want = [
        ("msgid", "VVVV-VVVV-VVVV-VVVV"),
        ("msg_type", "1"),
        ("direction", "2"),
        ("time", "4398046511103"),
    ];
    assert_eq!(openid, want.map(|(k, v)| (k.to_owned(), v.to_owned())));
}

#[test]
fn getkeys_tell_the_truth() {
    let s = Server::start();
    let mut con = s.client();
    // (a call, the keys COMMAND GETKEYS finds in it; none: the command has no key)
    let cases: &[(&[&str], &[&str])] = &[
        (&["MSGID.GEN", "1", "{conv:42}"], &["{conv:42}"]),
        (&["UID.GEN", "{conv:42}"], &["{conv:42}"]),
        (&["UID.GEN", "{conv:42}", "COUNT", "5"], &["{conv:42}"]),
        (&["SEQ.NEXT", "{c}:seq"], &["{c}:seq"]),
        (&["SEQ.NEXT", "{c}:seq", "COUNT", "5"], &["{c}:seq"]),
        (&["SEQ.GET", "a"], &["a"]),
        (&["SEQ.MGET", "a", "b", "c"], &["a", "b", "c"]),
        (&["SEQ.SET", "a", "1"], &["a"]),
        (&["SEQ.ADVANCE", "a", "1"], &["a"]),
        (&["SEQ.CONVERT", "a"], &["a"]),
        (
            &["IM.UNREAD", "{c}:read", "{c}:inbox:u", "u"],
            &["{c}:read", "{c}:inbox:u"],
        ),
        (&["IM.READBY", "{c}:read", "5", "u", "v"], &["{c}:read"]),
        (&["MSGID.DECODE", "0000-0000-0000-0000"], &[]),
        (&["OPENID.DEC", "SY62cbZxtnG2cbZxSIw"], &[]),
    ];
    assert_getkeys(&mut con, cases);
}

/// COMMAND GETKEYS of each call finds exactly its keys; a call with none ("no key" error)
/// is expected with an empty list.
fn assert_getkeys(con: &mut Connection, cases: &[(&[&str], &[&str])]) {
    for (call, keys) in cases {
        let mut args = vec!["COMMAND", "GETKEYS"];
        args.extend_from_slice(call);
        match cmd::<Vec<String>>(con, &args) {
            Ok(got) => assert_eq!(got, *keys, "{call:?}"),
            Err(e) => assert!(
                keys.is_empty() && err_text(&e).contains("no key"),
                "{call:?}: {e}"
            ),
        }
    }
}
