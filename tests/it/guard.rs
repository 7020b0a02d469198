//! The one panic guard on every entry from Redis other than a command (commands: tests/it/clock.rs):
//! the data type's callbacks, a config setter, the cron event, the cluster lease timer, the
//! cluster bus receiver and the command filter. The test-hooks build's IMID.TEST-PANIC-NEXT
//! makes the next call into a named entry panic; each test checks that the server lives, logs
//! the entry, answers with the entry's safe fallback, and that the entry works again after.
use crate::common;
use common::*;
use redis::{Connection, Value};
use std::time::{Duration, Instant};

fn arm(con: &mut Connection, entry: &str) {
    let ok: String = cmd(con, &["IMID.TEST-PANIC-NEXT", entry]).unwrap();
    assert_eq!(ok, "OK");
}

fn caught(entry: &str) -> String {
    format!("imid: internal error in {entry}: IMID.TEST-PANIC-NEXT armed for {entry}")
}

/// How often the server log holds `line`.
fn count(s: &Server, line: &str) -> usize {
    s.log_text().matches(line).count()
}

/// Waits until the server log holds `line` at least `n` times (for entries Redis calls on its
/// own schedule: cron, timer, bus). Not a timing assertion: the bound only stops a hung test.
fn wait_for_log(s: &Server, line: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while count(s, line) < n {
        assert!(
            Instant::now() < deadline,
            "no '{line}' x{n}: {}",
            s.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_panic_in_a_type_callback_is_caught_and_the_server_lives() {
    let s = Server::build().hooked().start();
    let mut con = s.client();
    let ok: String = cmd(&mut con, &["SEQ.SET", "k", "5"]).unwrap();
    assert_eq!(ok, "OK");
    let good_digest: Vec<String> = cmd(&mut con, &["DEBUG", "DIGEST-VALUE", "k"]).unwrap();
    let good_usage = int_reply(&mut con, &["MEMORY", "USAGE", "k"]);

    // digest: the value is left out of the digest (nothing added), the command still answers.
    arm(&mut con, "digest");
    let d: Vec<String> = cmd(&mut con, &["DEBUG", "DIGEST-VALUE", "k"]).unwrap();
    assert_ne!(d, good_digest, "the panicked digest added nothing");
    assert_eq!(count(&s, &caught("digest")), 1, "{}", s.log_tail());
    let d: Vec<String> = cmd(&mut con, &["DEBUG", "DIGEST-VALUE", "k"]).unwrap();
    assert_eq!(d, good_digest, "once only");

    // mem_usage: the fallback is 0 bytes for the value.
    arm(&mut con, "mem_usage");
    let u = int_reply(&mut con, &["MEMORY", "USAGE", "k"]);
    assert!(u < good_usage, "{u} < {good_usage}");
    assert_eq!(count(&s, &caught("mem_usage")), 1, "{}", s.log_tail());
    assert_eq!(int_reply(&mut con, &["MEMORY", "USAGE", "k"]), good_usage);

    // rdb_load: the fallback refuses the payload, as a corrupt one is refused.
    let payload: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut con).unwrap();
    arm(&mut con, "rdb_load");
    let e = redis::cmd("RESTORE")
        .arg("dst")
        .arg(0)
        .arg(&payload)
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err_text(&e).starts_with("ERR "), "{e}");
    assert_eq!(count(&s, &caught("rdb_load")), 1, "{}", s.log_tail());
    assert_eq!(
        int_reply(&mut con, &["EXISTS", "dst"]),
        0,
        "nothing restored"
    );
    let r: String = redis::cmd("RESTORE")
        .arg("dst")
        .arg(0)
        .arg(&payload)
        .query(&mut con)
        .unwrap();
    assert_eq!(r, "OK");
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "dst"]), 5);

    // copy: the fallback (no value) makes COPY fail and copy nothing.
    arm(&mut con, "copy");
    let r = cmd::<Value>(&mut con, &["COPY", "k", "k2"]);
    assert!(r.is_err(), "{r:?}");
    assert_eq!(count(&s, &caught("copy")), 1, "{}", s.log_tail());
    assert_eq!(int_reply(&mut con, &["EXISTS", "k2"]), 0);
    assert_eq!(int_reply(&mut con, &["COPY", "k", "k2"]), 1);
    assert_eq!(int_reply(&mut con, &["SEQ.GET", "k2"]), 5);

    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "k"]),
        6,
        "the dataset survives"
    );

    // The sequence map's callbacks are the same code (src/entry/data_type.rs), named for the type.
    assert_eq!(int_reply(&mut con, &["SEQ.HSET", "m", "a", "5"]), 1);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("m").query(&mut con).unwrap();
    arm(&mut con, "rdb_load (sequence map)");
    let mut r = redis::cmd("RESTORE");
    r.arg("m2").arg(0).arg(&payload);
    assert!(r.query::<Value>(&mut con).is_err());
    let entry = "rdb_load (sequence map)";
    assert_eq!(count(&s, &caught(entry)), 1, "{}", s.log_tail());
    assert_eq!(
        int_reply(&mut con, &["EXISTS", "m2"]),
        0,
        "nothing restored"
    );
    let ok: String = r.query(&mut con).unwrap();
    assert_eq!(
        (ok.as_str(), int_reply(&mut con, &["SEQ.HGET", "m2", "a"])),
        ("OK", 5)
    );
}

#[test]
fn a_panic_in_a_config_setter_refuses_the_value_and_changes_nothing() {
    let key = "000102030405060708090a0b0c0d0e0f";
    let s = Server::build().hooked().start();
    let mut con = s.client();
    arm(&mut con, "a config setter");
    let e = cmd::<Value>(&mut con, &["CONFIG", "SET", "imid.openid-keys", key]).unwrap_err();
    assert!(
        err_text(&e).contains("imid.openid-keys: internal error"),
        "{e}"
    );
    assert_eq!(count(&s, &caught("a config setter")), 1, "{}", s.log_tail());
    let v: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.openid-keys"]).unwrap();
    assert_eq!(v, vec!["imid.openid-keys".to_owned(), String::new()]);
    let ok: String = cmd(&mut con, &["CONFIG", "SET", "imid.openid-keys", key]).unwrap();
    assert_eq!(ok, "OK");
    let v: Vec<String> = cmd(&mut con, &["CONFIG", "GET", "imid.openid-keys"]).unwrap();
    assert_ne!(v[1], "", "taken the second time");
}

#[test]
fn a_panic_in_a_server_event_is_caught_and_the_next_one_runs() {
    let s = Server::build().hooked().start();
    let mut con = s.client();
    arm(&mut con, "the cron event");
    wait_for_log(&s, &caught("the cron event"), 1);
    arm(&mut con, "the cron event");
    wait_for_log(&s, &caught("the cron event"), 2);
    assert_eq!(
        int_reply(&mut con, &["SEQ.NEXT", "k"]),
        1,
        "the server lives"
    );
}

fn cluster_node() -> Server {
    Server::build()
        .hooked()
        .args(&[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ])
        .start()
}

#[test]
fn a_panic_in_the_timer_bus_receiver_or_filter_is_caught() {
    let a = cluster_node();
    let b = cluster_node();
    let mut ca = a.client();
    let mut cb = b.client();

    // The command filter (CLUSTER commands): the command itself still runs.
    arm(&mut ca, "the command filter");
    let ok: String = cmd(&mut ca, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(
        count(&a, &caught("the command filter")),
        1,
        "{}",
        a.log_tail()
    );

    // The lease timer: caught, and armed again after the panic (a second one is caught too).
    arm(&mut ca, "the lease timer");
    wait_for_log(&a, &caught("the lease timer"), 1);
    arm(&mut ca, "the lease timer");
    wait_for_log(&a, &caught("the lease timer"), 2);

    // The bus receiver: b hears a's lease once a second once a has issued an ID.
    arm(&mut cb, "the cluster bus receiver");
    let ok: String = cmd(
        &mut cb,
        &["CLUSTER", "MEET", "127.0.0.1", &a.port.to_string()],
    )
    .unwrap();
    assert_eq!(ok, "OK");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let info: String = cmd(&mut ca, &["CLUSTER", "INFO"]).unwrap();
        if info.contains("cluster_state:ok") {
            break;
        }
        assert!(Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _: String = cmd(&mut ca, &["MSGID.GEN", "1", "t"]).unwrap();
    wait_for_log(&b, &caught("the cluster bus receiver"), 1);
    // And b keeps hearing it: its INFO shows a's lease once the next message arrives.
    let deadline = Instant::now() + Duration::from_secs(120);
    while b.imid_stat("cluster_peer_lease_ms") == 0 {
        assert!(Instant::now() < deadline, "{}", b.log_tail());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(int_reply(&mut cb, &["DBSIZE"]), 0, "b lives");
}

#[test]
fn a_panic_in_the_info_section_leaves_it_empty_once() {
    let s = Server::build().hooked().start();
    let mut con = s.client();
    assert_eq!(int_reply(&mut con, &["SEQ.NEXT", "k"]), 1);
    arm(&mut con, "the INFO section");
    let info: String = cmd(&mut con, &["INFO", "imid"]).unwrap();
    assert!(!info.contains("imid_seq_issued"), "{info}");
    assert_eq!(
        count(&s, &caught("the INFO section")),
        1,
        "{}",
        s.log_tail()
    );
    assert_eq!(s.imid_stat("seq_issued"), 1, "the next INFO has its fields");
}
