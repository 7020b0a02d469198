//! Whether anything listens at a replica's address (`FENCE.FORGET`): one TCP connection from a
//! thread of its own, never from Redis's main thread (a connection that gets no answer takes
//! the whole timeout). It sends nothing and closes at once.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// What a connection to an address found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Something accepted the connection: a server runs there.
    Listening,
    /// Refused (nothing listens on that port) or the host said it is unreachable: nothing
    /// runs there now.
    Nothing,
    /// No answer within the timeout, or another error (the text): a partition looks like
    /// this, with the server still running behind it.
    NoAnswer(String),
}

/// Connects to `addr` (`ip:port`, or `host:port` as a replica may announce itself), waiting at
/// most `timeout` for each address it resolves to.
pub(crate) fn probe(addr: &str, timeout: Duration) -> Probe {
    let addrs = match addr.to_socket_addrs() {
        Ok(a) => a.collect::<Vec<_>>(),
        Err(e) => return Probe::NoAnswer(format!("cannot resolve it: {e}")),
    };
    if addrs.is_empty() {
        return Probe::NoAnswer("it resolves to no address".to_owned());
    }
    let mut found = Probe::Nothing;
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(_) => return Probe::Listening,
            Err(e) => match e.kind() {
                std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::HostUnreachable
                | std::io::ErrorKind::NetworkUnreachable => {}
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                    found = Probe::NoAnswer(format!("no answer within {} ms", timeout.as_millis()));
                }
                _ => found = Probe::NoAnswer(e.to_string()),
            },
        }
    }
    found
}

/// Runs [`probe`] on a thread of its own and hands its finding to `done` there. `false` when
/// the thread could not start (`done` did not run).
pub(crate) fn probe_in_background(
    addr: String,
    timeout: Duration,
    done: impl FnOnce(Probe) + Send + 'static,
) -> bool {
    std::thread::Builder::new()
        .name("imid-probe".to_owned())
        .spawn(move || done(probe(&addr, timeout)))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_a_closed_port_and_a_bad_name() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let at = format!("127.0.0.1:{port}");
        assert_eq!(probe(&at, Duration::from_secs(1)), Probe::Listening);
        drop(l);
        assert_eq!(probe(&at, Duration::from_secs(1)), Probe::Nothing);
        assert!(matches!(
            probe("no-such-host.invalid:6379", Duration::from_secs(1)),
            Probe::NoAnswer(_)
        ));
    }
}
