//! Paused writes (`CLIENT PAUSE ... WRITE`, and the pause of every manual or automatic
//! failover): Redis aborts when anything is propagated during them, and imid writes its time
//! mark (`MSGID.FLOOR`) when a forked child exits. A BGSAVE (a save point, a replica's full
//! sync) ending inside a pause took the server down with an assertion on every server of the
//! matrix (found by `make test-matrix`: a Redis 8.2 node crashed in the cluster failover test).
use crate::common;
use common::*;

/// `MSGID.FLOOR` lines in the AOF directory's files (base and incremental).
fn floors_in_aof(s: &Server) -> usize {
    let dir = s.dir.join("appendonlydir");
    std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| std::fs::read(e.path()).ok())
                .map(|b| {
                    b.windows(b"MSGID.FLOOR".len())
                        .filter(|w| w == b"MSGID.FLOOR")
                        .count()
                })
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn fork_child_exiting_during_paused_writes_defers_the_mark() {
    let mut s = Server::with(&["--appendonly", "yes"]);
    let mut con = s.client();
    let _: String = cmd(&mut con, &["MSGID.GEN", "1", "conv"]).unwrap();
    let before = floors_in_aof(&s);
    assert!(before >= 1, "the first ID's lease is in the AOF");

    let _: String = cmd(&mut con, &["CLIENT", "PAUSE", "3000", "WRITE"]).unwrap();
    let _: String = cmd(&mut con, &["BGSAVE"]).unwrap();
    // The child exits while writes are still paused.
    wait_until("BGSAVE done", 10, || {
        s.info_field("persistence", "rdb_bgsave_in_progress")
            .as_deref()
            == Some("0")
    });
    let pong: String = cmd(&mut con, &["PING"]).unwrap();
    assert_eq!(pong, "PONG");
    assert!(s.alive(), "the server died: {}", s.log_tail());
    // Nothing was propagated during the pause ...
    assert_eq!(floors_in_aof(&s), before, "propagated during the pause");
    // ... and the mark is written once the pause is over.
    let _: String = cmd(&mut con, &["CLIENT", "UNPAUSE"]).unwrap();
    wait_until("the deferred MSGID.FLOOR", 10, || {
        floors_in_aof(&s) > before
    });
    assert!(s.alive(), "{}", s.log_tail());
    let id: String = cmd(&mut con, &["MSGID.GEN", "1", "conv"]).unwrap();
    assert_eq!(id.len(), 19);
}
