//! The harness itself: a server starts with the module, restarts from its files, and dies.
mod common;
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
