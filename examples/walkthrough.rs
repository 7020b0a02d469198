//! Every imid command once, printing what it shows. Run against a Redis with the module:
//!
//!     IMID_URL=redis://127.0.0.1:6379/ cargo run --release --example walkthrough
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
use redis::{Connection, Value};
use std::process::ExitCode;

fn main() -> ExitCode {
    let url = std::env::var("IMID_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    match run(&url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("walkthrough against {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one command, prints it and its reply, and hands the reply back.
fn show(con: &mut Connection, args: &[&str], note: &str) -> redis::RedisResult<Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    let v: Value = c.query(con)?;
    println!("> {}", args.join(" "));
    println!("  {}", render(&v));
    println!("  # {note}");
    Ok(v)
}

/// A compact one-line rendering of a reply: maps and flat name/value arrays alike.
fn render(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Int(i) => i.to_string(),
        Value::BulkString(b) => format!("\"{}\"", String::from_utf8_lossy(b)),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Array(a) => format!("[{}]", a.iter().map(render).collect::<Vec<_>>().join(", ")),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", render(k), render(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("{other:?}"),
    }
}

fn text(v: Value) -> redis::RedisResult<String> {
    Ok(redis::from_redis_value(v)?)
}

fn run(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut con = redis::Client::open(url)?.get_connection()?;
    let con = &mut con;
    // Keys of their own per run, so repeated runs against one server start from scratch.
    let conv = format!("{{conv:walk-{}}}", std::process::id());
    let seq = format!("{conv}:seq");
    let cursor = format!("{conv}:read:bob");

    println!("## MSGID: time-ordered message IDs");
    let id = text(show(
        con,
        &["MSGID.GEN", "1", &conv],
        "a new ID for a private (type 1) message in the conversation",
    )?)?;
    show(
        con,
        &["MSGID.GEN", "1", &conv],
        "the next one sorts after it, as a string too",
    )?;
    show(
        con,
        &["MSGID.DECODE", &id],
        "time (ms), spin counter, channel_type and target hash",
    )?;
    show(
        con,
        &["MSGID.HASH", &conv],
        "the 22-bit target hash MSGID.GEN embeds for this conversation",
    )?;
    show(
        con,
        &["MSGID.ENCODE", "0", "4094", "1", "2526662"],
        "an ID from explicit fields (pure)",
    )?;
    show(
        con,
        &["MSGID.FLOOR", "0"],
        "raises the generator's time floor, never lowers it (the module writes it itself)",
    )?;

    println!("\n## SEQ: per-conversation sequences (a native type)");
    show(
        con,
        &["SEQ.NEXT", &seq],
        "the first value of a new sequence is 1",
    )?;
    show(
        con,
        &["SEQ.NEXT", &seq, "COUNT", "100"],
        "a block of 100 at once: this is its last value",
    )?;
    show(con, &["SEQ.GET", &seq], "the last value handed out")?;
    show(
        con,
        &["SEQ.MGET", &seq, &cursor],
        "several at once; a missing key reads 0",
    )?;
    show(
        con,
        &["SEQ.ADVANCE", &cursor, "40"],
        "a read cursor moves forward ...",
    )?;
    show(
        con,
        &["SEQ.ADVANCE", &cursor, "35"],
        "... and never back: a late ack changes nothing",
    )?;
    show(
        con,
        &["SEQ.SET", &seq, "5000"],
        "an exact value, e.g. when migrating from an INCR counter",
    )?;
    show(con, &["TYPE", &seq], "the module's data type")?;
    show(
        con,
        &["SEQ.NEXT", &seq, "IDMP", "alice|c1"],
        "at most once per token: [last, duplicate 0] the first time ...",
    )?;
    show(
        con,
        &["SEQ.NEXT", &seq, "IDMP", "alice|c1"],
        "... and [the same last, duplicate 1] on a retry, which reserves nothing",
    )?;
    show(
        con,
        &["SEQ.ADVANCE", &cursor, "999999", "LIMIT", &seq],
        "a cursor clamped to another sequence: never past the conversation's last value",
    )?;

    println!("\n## SEQ.H*: many sequences in one key (a sequence map)");
    let reads = format!("{conv}:read");
    show(
        con,
        &["SEQ.HNEXT", &reads, "bob"],
        "a field is a sequence of its own: 0 when missing, so its first value is 1",
    )?;
    show(
        con,
        &["SEQ.HNEXT", &reads, "bob", "COUNT", "10"],
        "a block of 10 of that field",
    )?;
    show(
        con,
        &["SEQ.HADVANCE", &reads, "carol", "999999", "LIMIT", &seq],
        "a read cursor per member, clamped to the conversation's seq",
    )?;
    show(
        con,
        &["SEQ.HGET", &reads, "carol"],
        "one field (0 when missing)",
    )?;
    show(
        con,
        &["SEQ.HMGET", &reads, "bob", "carol", "dave"],
        "several fields at once",
    )?;
    show(
        con,
        &["SEQ.HSET", &reads, "dave", "7", "erin", "3"],
        "exact values, e.g. an import from an existing hash",
    )?;
    show(con, &["SEQ.HLEN", &reads], "the number of fields")?;
    show(con, &["SEQ.HDEL", &reads, "erin"], "fields removed")?;
    show(con, &["SEQ.HGETALL", &reads], "every field with its value")?;
    show(
        con,
        &["SEQ.HSCAN", &reads, "0", "COUNT", "2"],
        "the same in pages: [next cursor, fields] (0 when done)",
    )?;
    show(con, &["TYPE", &reads], "the sequence map's data type")?;

    println!("\n## OPENID: public message IDs");
    let open = text(show(
        con,
        &["OPENID.ENC", &id, "1", "2"],
        "the ID with msg_type 1 and direction 2, for outside callers",
    )?)?;
    show(
        con,
        &["OPENID.DEC", &open],
        "back to the message ID, type, direction and time",
    )?;

    println!("\n## UID: 64-bit numeric IDs (a BIGINT primary key)");
    let uid = show(
        con,
        &["UID.GEN", "{conv:42}"],
        "a positive signed 64-bit integer: time, node, seq (Snowflake's 41,10,12 by default)",
    )?;
    let uid: i64 = redis::from_redis_value(uid)?;
    show(
        con,
        &["UID.GEN", "{conv:42}", "COUNT", "3"],
        "a batch, strictly increasing (for a client-side cache)",
    )?;
    show(
        con,
        &["UID.GEN", "{conv:42}", "STRING"],
        "the decimal text: for Lua, whose numbers are doubles exact only below 2^53",
    )?;
    show(
        con,
        &["UID.DECODE", &uid.to_string()],
        "time (Unix ms), node (worker or hash slot), seq",
    )?;
    show(
        con,
        &["UID.ENCODE", "1767225600001", "1", "1"],
        "the ID of explicit fields: 1 ms after the epoch, node 1, seq 1",
    )?;
    show(
        con,
        &["UID.FLOOR", "0"],
        "raises the UID time floor only, never lowers it (the module writes it itself)",
    )?;

    println!("\n## INFO imid: the module's counters");
    let info: String = redis::cmd("INFO").arg("imid").query(con)?;
    for line in info.lines().filter(|l| l.starts_with("imid_")) {
        println!("  {line}");
    }
    Ok(())
}
