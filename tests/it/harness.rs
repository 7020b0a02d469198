//! The harness itself: a server starts with the module, restarts from its files, and dies.
use crate::common;
use common::*;

#[test]
fn server_starts_with_module_and_restarts() {
    let mut s = Server::start();
    let mut con = s.client();
    let modules: Vec<Vec<redis::Value>> = cmd(&mut con, &["MODULE", "LIST"]).unwrap();
    assert!(format!("{modules:?}").contains("imid"));
    s.kill();
    assert!(!s.alive());
    s.restart();
    assert!(s.alive());
    let pong: String = cmd(&mut s.client(), &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn ports_come_from_below_the_ephemeral_range_with_free_bus_twins() {
    let floor = ephemeral_floor();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let p = free_port();
        assert!(
            p + 10_000 < floor,
            "port {p} or its bus twin is in the ephemeral range"
        );
        assert!(
            (10_000..20_000).contains(&p),
            "port {p} could be another test port's bus twin"
        );
        assert!(seen.insert(p), "port {p} handed out twice");
    }
    // (Not re-checked free here: while another test thread forks a child, the child holds a
    // copy of any socket open in this process until it execs, so a port just checked can
    // briefly look taken. Server starts retry on another port for the same reason.)
    let b = free_ports(6);
    assert!(
        (b..b + 6).all(|p| !seen.contains(&p)),
        "a block overlaps single ports"
    );
    // A cluster node on the default bus port starts on what the harness hands out.
    let s = Server::with(&["--cluster-enabled", "yes"]);
    let bus = std::net::TcpListener::bind(("127.0.0.1", s.port + 10_000));
    assert!(
        bus.is_err(),
        "the node should hold its bus port {}",
        s.port + 10_000
    );
}

/// A client blocked on a reply gets it although the test process is stopped and continued
/// meanwhile (as a cgroup freezer, a debugger or a paused sandbox does to it): with a read
/// timeout on the socket, Linux would fail the read with EINTR instead (see `Server::client`).
#[test]
fn a_client_read_survives_the_test_process_being_stopped() {
    let s = Server::start();
    let mut blocked = s.client();
    let mut con = s.client();
    std::thread::scope(|sc| {
        let reader = sc.spawn(move || cmd::<Vec<String>>(&mut blocked, &["BLPOP", "k", "0"]));
        s.wait_until("BLPOP blocks", 10, || {
            s.info_field("clients", "blocked_clients").as_deref() == Some("1")
        });
        // Another process stops this one (every thread, the reader blocked in read(2) among
        // them) and continues it.
        let me = std::process::id().to_string();
        let st = std::process::Command::new("sh")
            .args(["-c", "kill -STOP $0; sleep 0.2; kill -CONT $0", &me])
            .status()
            .unwrap();
        assert!(st.success());
        let _: i64 = cmd(&mut con, &["LPUSH", "k", "v"]).unwrap();
        let got = reader.join().unwrap();
        assert_eq!(got.unwrap(), ["k", "v"]);
    });
}
