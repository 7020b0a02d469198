//! Whether anything listens at a replica's address (`FENCE.FORGET`): one TCP connection from a
//! thread of its own, never from Redis's main thread (a connection that gets no answer takes
//! the whole timeout). It sends nothing and closes at once.

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
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

/// Connects to `addr` (`ip:port`, or `host:port` as a replica may announce itself) from `from`
/// where given (the server's `bind-source-addr`: the address its replication links leave from,
/// so that the probe takes their path), waiting at most `timeout` for each address it resolves
/// to.
pub(crate) fn probe(addr: &str, from: Option<IpAddr>, timeout: Duration) -> Probe {
    let addrs = match addr.to_socket_addrs() {
        Ok(a) => a.collect::<Vec<_>>(),
        Err(e) => return Probe::NoAnswer(format!("cannot resolve it: {e}")),
    };
    if addrs.is_empty() {
        return Probe::NoAnswer("it resolves to no address".to_owned());
    }
    let mut found = Probe::Nothing;
    for a in addrs {
        match connect(a, from, timeout) {
            Ok(()) => return Probe::Listening,
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

/// One connection to `to`, from `from` when it is of the same family; closed at once.
fn connect(to: SocketAddr, from: Option<IpAddr>, timeout: Duration) -> std::io::Result<()> {
    let socket = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(ip) = from.filter(|ip| ip.is_ipv4() == to.is_ipv4()) {
        socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    }
    socket.connect_timeout(&SockAddr::from(to), timeout)
}

/// Runs [`probe`] on a thread of its own and hands its finding to `done` there. `false` when
/// the thread could not start (`done` did not run).
pub(crate) fn probe_in_background(
    addr: String,
    from: Option<IpAddr>,
    timeout: Duration,
    done: impl FnOnce(Probe) + Send + 'static,
) -> bool {
    std::thread::Builder::new()
        .name("imid-probe".to_owned())
        .spawn(move || done(probe(&addr, from, timeout)))
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
        let s = Duration::from_secs(1);
        assert_eq!(probe(&at, None, s), Probe::Listening);
        let from: IpAddr = "127.0.0.1".parse().expect("ip");
        assert_eq!(probe(&at, Some(from), s), Probe::Listening);
        drop(l);
        assert_eq!(probe(&at, None, s), Probe::Nothing);
        assert!(matches!(
            probe("no-such-host.invalid:6379", None, s),
            Probe::NoAnswer(_)
        ));
    }
}
