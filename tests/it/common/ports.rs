//! Loopback ports for servers: blocks of consecutive ports below the kernel's ephemeral range,
//! each with its cluster-bus twin (port + 10000) free too.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The first port above the test range: the kernel's ephemeral range starts here (or higher).
const EPHEMERAL_FLOOR: u16 = 32_768;
/// Test ports are taken from `10000..20000`; each one's cluster-bus twin (port + 10000, Redis's
/// default) then lies in `20000..30000`: apart from every test port, and below the ephemeral range.
const PORT_BASE: u16 = 10_000;
const PORT_SPAN: u16 = 10_000;
const BUS_OFFSET: u16 = 10_000;

/// `n` consecutive loopback ports, each checked free together with its cluster-bus twin
/// (port + 10000). They come from below the kernel's ephemeral range, so no outgoing
/// connection (this test's, another test's, or a cluster bus link) can be handed one between
/// this check and Redis's bind: a CI run failed when a bus port picked from that range was
/// taken meanwhile. Within a process blocks are handed out once (an atomic cursor starting at a
/// pid-derived offset); a port held by anything else fails the bind check and is skipped.
pub fn free_ports(n: u16) -> u16 {
    static CURSOR: AtomicU32 = AtomicU32::new(u32::MAX);
    assert!(
        ephemeral_floor() >= PORT_BASE + PORT_SPAN + BUS_OFFSET,
        "net.ipv4.ip_local_port_range starts below {}: the test port range would overlap it",
        PORT_BASE + PORT_SPAN + BUS_OFFSET
    );
    let _ = CURSOR.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(2_654_435_761) % u32::from(PORT_SPAN),
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
    for _ in 0..PORT_SPAN {
        let at = CURSOR.fetch_add(u32::from(n), Ordering::SeqCst) % u32::from(PORT_SPAN);
        let Ok(at) = u16::try_from(at) else { continue };
        if at + n > PORT_SPAN {
            continue; // a block does not wrap around the end of the range
        }
        let base = PORT_BASE + at;
        if (base..base + n).all(|p| free(p) && free(p + BUS_OFFSET)) {
            return base;
        }
    }
    panic!(
        "no {n} free loopback ports (with their bus ports) in {PORT_BASE}..{}",
        PORT_BASE + PORT_SPAN
    );
}

/// One free loopback port whose cluster-bus twin (port + 10000) is free too; see [`free_ports`].
pub fn free_port() -> u16 {
    free_ports(1)
}

/// The low end of the kernel's ephemeral port range (Linux default 32768).
pub fn ephemeral_floor() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(EPHEMERAL_FLOOR)
}
