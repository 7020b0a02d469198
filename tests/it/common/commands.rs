//! Calling a server: a command from its arguments ([`cmd`]), the replies tests take apart,
//! CONFIG and MODULE, and the client patterns several tests share.

use super::*;

/// Runs a command from its arguments: strings (`&["SEQ.NEXT", "k"]`) or byte strings
/// (`&[b"SEQ.HNEXT".as_slice(), b"m", field]`, binary-safe).
pub fn cmd<T: redis::FromRedisValue>(
    con: &mut impl redis::ConnectionLike,
    args: &[impl AsRef<[u8]>],
) -> redis::RedisResult<T> {
    let mut c = redis::Cmd::new();
    for a in args {
        c.arg(a.as_ref());
    }
    c.query(con)
}

/// An integer reply, or a panic naming the command that failed.
pub fn int_reply(con: &mut impl redis::ConnectionLike, args: &[&str]) -> i64 {
    cmd(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs a command that must reply `OK`.
pub fn ok(con: &mut Connection, args: &[&str]) {
    let r: String = cmd(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert_eq!(r, "OK", "{args:?}");
}

/// Server arguments written as one line: `words("--imid.seq-gap 0 --appendonly yes")`.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// `DEBUG DIGEST` of the whole dataset.
pub fn digest(s: &Server) -> String {
    cmd(&mut s.client(), &["DEBUG", "DIGEST"]).unwrap()
}

/// Every key, sorted, with its type and contents: sorted sets (inboxes, logs) with their
/// scores, sequences with their values, maps with their fields; other types by name only.
pub fn keyspace(con: &mut Connection) -> Vec<String> {
    let mut keys: Vec<String> = cmd(con, &["KEYS", "*"]).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let t: String = cmd(con, &["TYPE", &k]).unwrap();
            let v = match t.as_str() {
                "zset" => {
                    let m: Vec<(String, String)> =
                        cmd(con, &["ZRANGE", &k, "0", "-1", "WITHSCORES"]).unwrap();
                    format!("{m:?}")
                }
                "imidseq01" => int_reply(con, &["SEQ.GET", &k]).to_string(),
                "imidsmap1" => {
                    // Fields in name order: a map's own order follows its layout.
                    let mut v: Vec<(String, String)> = cmd(con, &["SEQ.HGETALL", &k]).unwrap();
                    v.sort();
                    format!("{v:?}")
                }
                _ => String::new(),
            };
            format!("{k} {t} {v}")
        })
        .collect()
}

/// SEQ.MGET of `keys`.
pub fn mget(con: &mut Connection, keys: &[String]) -> Vec<i64> {
    let mut c = redis::cmd("SEQ.MGET");
    for k in keys {
        c.arg(k);
    }
    c.query(con).unwrap()
}

/// The value of config `name` (CONFIG GET).
pub fn config(con: &mut Connection, name: &str) -> String {
    let v: Vec<String> = cmd(con, &["CONFIG", "GET", name]).unwrap();
    assert_eq!(v.len(), 2, "CONFIG GET {name}: {v:?}");
    v[1].clone()
}

/// CONFIG SET `name` `value`, which must reply OK.
pub fn config_set(con: &mut Connection, name: &str, value: &str) {
    ok(con, &["CONFIG", "SET", name, value]);
}

/// `MODULE LOADEX <module> CONFIG <name> <value> ...`: `Ok` when the module loaded, else the
/// error's text.
pub fn loadex(con: &mut Connection, module: &str, configs: &[(&str, &str)]) -> Result<(), String> {
    let mut c = redis::cmd("MODULE");
    c.arg("LOADEX").arg(module);
    for (name, value) in configs {
        c.arg("CONFIG").arg(*name).arg(*value);
    }
    c.query::<()>(con).map_err(|e| err_text(&e))
}

/// The names MODULE LIST shows.
pub fn modules(con: &mut Connection) -> Vec<String> {
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

/// A RESP2 reply of names and values in turn (a decoder's, CONFIG GET's) as (name, value as
/// text) pairs in order.
pub fn reply_pairs(
    con: &mut Connection,
    args: &[&str],
) -> redis::RedisResult<Vec<(String, String)>> {
    let v: Vec<Value> = cmd(con, args)?;
    Ok(v.chunks(2)
        .map(|p| {
            let name: String = redis::from_redis_value(p[0].clone()).unwrap();
            let val = match &p[1] {
                Value::Int(i) => i.to_string(),
                other => redis::from_redis_value::<String>(other.clone()).unwrap(),
            };
            (name, val)
        })
        .collect())
}

/// A reply that must be a RESP3 map (`con` from [`Server::client_resp3`]), as its pairs in
/// order, each value read as a `T`.
pub fn resp3_map<T: redis::FromRedisValue>(
    con: &mut Connection,
    args: &[&str],
) -> Vec<(String, T)> {
    match cmd(con, args).unwrap() {
        Value::Map(pairs) => pairs
            .into_iter()
            .map(|(k, v)| {
                (
                    redis::from_redis_value(k).unwrap(),
                    redis::from_redis_value(v).unwrap(),
                )
            })
            .collect(),
        other => panic!("{args:?}: expected a map, got {other:?}"),
    }
}

/// The events a subscriber to `__keyspace@0__:<key>` (by a pattern that also matches
/// `marker`) receives for `key`, in order, up to the first on `marker`: a key written last, so
/// every event before it has been delivered and no read waits for one that never comes.
pub fn keyspace_events(ps: &mut redis::PubSub, key: &str, marker: &str) -> Vec<String> {
    let mut events = Vec::new();
    loop {
        let msg = ps.get_message().unwrap();
        let channel = msg.get_channel_name();
        if channel == format!("__keyspace@0__:{marker}") {
            return events;
        }
        assert_eq!(channel, format!("__keyspace@0__:{key}"));
        events.push(msg.get_payload::<String>().unwrap());
    }
}

/// `args` sent on a client of its own, on a thread of its own: its reply to come on the
/// channel (a call that blocks, while the test goes on).
pub fn call_in_background(
    s: &Server,
    args: &[impl AsRef<[u8]>],
) -> std::sync::mpsc::Receiver<redis::RedisResult<Value>> {
    let mut con = s.client();
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd(&mut con, &args));
    });
    rx
}

/// Runs WATCH key on one client, `change` on another, then MULTI/EXEC on the first: whether
/// EXEC ran (a change to the key aborts it).
pub fn exec_survives(s: &Server, key: &str, change: &[&str]) -> bool {
    let mut a = s.client();
    let mut b = s.client();
    let _: () = redis::cmd("WATCH").arg(key).query(&mut a).unwrap();
    let _: Value = cmd(&mut b, change).unwrap();
    let r: Option<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("EXISTS")
        .arg(key)
        .query(&mut a)
        .unwrap();
    r.is_some()
}

/// `f(i, a client of its own)` on `n` threads at once (`i` in 0..n); the results in that order.
pub fn on_clients<T: Send>(
    s: &Server,
    n: usize,
    f: impl Fn(usize, &mut Connection) -> T + Sync,
) -> Vec<T> {
    std::thread::scope(|sc| {
        let f = &f;
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let mut con = s.client();
                sc.spawn(move || f(i, &mut con))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A whole SEQ.HSCAN iteration with pages of `count`: every field seen (a field may come twice)
/// and the number of pages.
pub fn hscan_all(
    con: &mut Connection,
    key: &str,
    count: usize,
) -> (std::collections::HashMap<Vec<u8>, i64>, usize) {
    let mut cursor = "0".to_owned();
    let mut seen = std::collections::HashMap::new();
    let mut pages = 0;
    loop {
        let (next, page): (String, Vec<(Vec<u8>, i64)>) = redis::cmd("SEQ.HSCAN")
            .arg(key)
            .arg(&cursor)
            .arg("COUNT")
            .arg(count)
            .query(con)
            .unwrap();
        seen.extend(page);
        pages += 1;
        if next == "0" {
            return (seen, pages);
        }
        cursor = next;
    }
}
