//! The faults: a partition (nftables DROP rules between addresses, in the namespace's own
//! ruleset), a pause (SIGSTOP/SIGCONT), clock skew (the test-hooks build's `IMID.TEST-CLOCK
//! OFFSET`) and kill -9 (`Node::kill`, in node.rs).
use super::node::Node;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TABLE: &str = "imid_jepsen";

fn nft(args: &str) {
    let out = Command::new("nft")
        .args(args.split_whitespace())
        .stdin(Stdio::null())
        .output()
        .expect("run nft (nftables: scripts/deps.sh test)");
    assert!(
        out.status.success(),
        "nft {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The namespace's firewall: one table with one chain on the output hook (every loopback
/// packet passes it once, before it is delivered), empty until [`Firewall::isolate`].
pub struct Firewall;

impl Firewall {
    pub fn new() -> Firewall {
        assert!(
            super::netns::inside(),
            "firewall rules only inside the test's own namespace"
        );
        nft(&format!("add table ip {TABLE}"));
        nft(&format!(
            "add chain ip {TABLE} out {{ type filter hook output priority 0 ; policy accept ; }}"
        ));
        Firewall
    }

    /// Drops every packet between each address of `one` and each of `other`, both ways:
    /// connections between the two sides hang (no reset, as a real partition), new ones
    /// cannot be made; each side keeps its own links. Clients (127.0.0.1) still reach
    /// everyone.
    pub fn cut(&self, one: &[String], other: &[String]) {
        let (a, b) = (one.join(", "), other.join(", "));
        nft(&format!(
            "add rule ip {TABLE} out ip saddr {{ {a} }} ip daddr {{ {b} }} counter drop"
        ));
        nft(&format!(
            "add rule ip {TABLE} out ip saddr {{ {b} }} ip daddr {{ {a} }} counter drop"
        ));
    }

    pub fn heal(&self) {
        nft(&format!("flush chain ip {TABLE} out"));
    }

    /// [`Firewall::cut`] for `d`, then healed (the rules in force said on stderr).
    pub fn cut_for(&self, one: &[String], other: &[String], d: Duration) {
        self.cut_during(one, other, d, || {});
    }

    /// [`Firewall::cut_for`], with `during` run once the cut is in force (an operator acting
    /// on one side); healed `d` after the cut, or when `during` returns if that is later.
    pub fn cut_during(&self, one: &[String], other: &[String], d: Duration, during: impl FnOnce()) {
        let from = Instant::now();
        self.cut(one, other);
        eprintln!("partition: {}", Firewall::rules());
        during();
        std::thread::sleep(d.saturating_sub(from.elapsed()));
        eprintln!("healed: {}", Firewall::rules());
        self.heal();
    }

    /// The rules in force (for the log).
    pub fn rules() -> String {
        let out = Command::new("nft")
            .args(["list", "table", "ip", TABLE])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.lines()
            .filter(|l| l.contains("drop"))
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Drop for Firewall {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", TABLE])
            .stderr(Stdio::null())
            .status();
    }
}

/// SIGSTOP of `node` for `d`, then SIGCONT.
pub fn pause_for(node: &Node, d: Duration) {
    node.pause();
    std::thread::sleep(d);
    node.resume();
}

/// The module's clock on `node` reads real time + `ms` (negative: behind).
pub fn skew_clock(node: &Node, ms: i64) {
    let reply: String = node
        .query(&["IMID.TEST-CLOCK", "OFFSET", &ms.to_string()])
        .unwrap_or_else(|e| panic!("IMID.TEST-CLOCK on {}: {e}", node.name));
    assert_eq!(reply, "OK");
}

/// The wall-clock time (Unix ms) at which `node` renews its message-ID lease next: under
/// steady load when an issued time comes within 2.5 s of the lease's end
/// (docs/durability.md), i.e. at `imid_msgid_high_water_ms - 2500` on its own clock.
pub fn next_renewal_ms(node: &Node, clock_offset_ms: i64) -> Option<i64> {
    let hw: i64 = node
        .info_field("imid", "imid_msgid_high_water_ms")?
        .parse()
        .ok()?;
    Some(hw - 2500 - clock_offset_ms)
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
