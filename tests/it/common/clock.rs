//! Time: the server's wall clock, the test-hooks build's clock, and waiting with a deadline
//! (a guard against a hang, never a measure of speed).

use super::*;
use std::time::{Duration, Instant};

/// The server's wall clock in ms (TIME), an integer as Redis's replies are (`as u64` where a
/// caller computes with unsigned marks).
pub fn server_time_ms(con: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = cmd(con, &["TIME"]).unwrap();
    s * 1000 + us / 1000
}

/// IMID.TEST-CLOCK with `args` (`FREEZE ms`, `OFFSET ms`, `REAL`): the test-hooks build's clock.
pub fn set_clock(con: &mut Connection, args: &[&str]) {
    let mut a = vec!["IMID.TEST-CLOCK"];
    a.extend_from_slice(args);
    let _: String = cmd(con, &a).unwrap();
}

/// The local wall clock in Unix ms (all test servers share this host's clock).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Polls `done` every 20 ms until it holds (`true`) or `secs` s have passed (`false`).
pub fn poll_until(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Polls `done` every 20 ms until it holds; after `secs` s fails naming `what`. A guard against
/// a hang, not a measure of speed. ([`Server::wait_until`] adds the server's log tail.)
pub fn wait_until(what: &str, secs: u64, done: impl FnMut() -> bool) {
    assert!(poll_until(secs, done), "{what}: not within {secs} s");
}
