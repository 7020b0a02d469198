//! The private network namespace a run lives in. A network namespace belongs to a thread in
//! Linux, so the test does not switch threads into it: the test process (outside) makes a
//! named namespace (`ip netns add imid-jepsen-<pid>-<n>`), brings its loopback up, and runs the
//! same test binary again inside it (`ip netns exec`), filtered to the one test, with
//! [`INSIDE`] set. Everything that process starts (servers, Sentinels, redis-cli, nft) and
//! every client connection it opens lives in the namespace, where 127.0.0.0/8 is all there is:
//! no traffic can leave it, and the firewall rules the nemeses add exist only there.
//!
//! Cleanup does not depend on the inner process ending well: it dies with the outer test
//! (`PR_SET_PDEATHSIG`), the servers die with it the same way, and the outer test kills
//! whatever still runs in the namespace (`ip netns pids`) and deletes it, also when the inner
//! run failed or timed out. Namespaces an earlier, killed run of this suite left behind (their
//! process is gone) are removed the same way before a new one is made.
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Set (to the namespace's name) in the process that runs inside the namespace.
pub const INSIDE: &str = "IMID_JEPSEN_NETNS";

/// The longest one run may take inside before the outer test kills it.
const LIMIT: Duration = Duration::from_secs(900);

const PREFIX: &str = "imid-jepsen-";

/// Whether this process runs inside a namespace made by [`run_inside`].
pub fn inside() -> bool {
    std::env::var_os(INSIDE).is_some()
}

/// Makes `c` receive SIGKILL when the thread that spawns it ends (the test thread), so nothing
/// a failed or killed run started outlives it.
pub fn die_with_parent(c: &mut Command) -> &mut Command {
    // SAFETY: the closure runs in the forked child before exec and calls only prctl, which is
    // async-signal-safe; it touches no memory of the parent.
    unsafe {
        c.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c
}

fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {args:?}: {e} (install iproute2: scripts/deps.sh test)"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A named network namespace, removed on drop with every process still in it.
pub struct Namespace {
    pub name: String,
}

impl Namespace {
    pub fn create() -> Namespace {
        static N: AtomicU32 = AtomicU32::new(0);
        remove_stale();
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        if let Err(e) = ip(&["netns", "add", &name]) {
            panic!("cannot make a network namespace (needs root: CI runs as root): {e}");
        }
        let ns = Namespace { name };
        if let Err(e) = ip(&["-n", &ns.name, "link", "set", "lo", "up"]) {
            panic!("{e}");
        }
        ns
    }
}

/// Kills every process in the namespace `name` (only processes a run of this suite started
/// live there) and deletes it.
fn remove(name: &str) {
    for _ in 0..50 {
        let pids: Vec<i32> = ip(&["netns", "pids", name])
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // SAFETY: kill(2) on a pid the kernel listed in our namespace; no memory involved.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = ip(&["netns", "del", name]);
}

/// Namespaces of this suite whose test process is gone (a run killed from outside).
fn remove_stale() {
    let list = ip(&["netns", "list"]).unwrap_or_default();
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            remove(name);
        }
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        remove(&self.name);
    }
}

/// Runs the test `test` (its path without the crate, e.g. `jepsen::partition::redis7`) of this
/// test binary inside a new namespace, with `env` added; fails when it fails.
pub fn run_inside(test: &str, env: &[(&str, String)]) {
    assert!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
        "the Jepsen-style runs make a network namespace: run them as root (CI does)"
    );
    for tool in ["ip", "nft"] {
        let ok = Command::new(tool)
            .arg(if tool == "ip" { "-V" } else { "--version" })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "{tool} not found: `bash scripts/deps.sh test` installs it (iproute2, nftables)"
        );
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // A name that matches no test would run nothing inside, and pass.
    let listed = Command::new(&exe)
        .args([test, "--exact", "--ignored", "--list"])
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.ends_with(": test"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(
        listed,
        1,
        "no test {test} in {} to run inside",
        exe.display()
    );
    let ns = Namespace::create();
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &ns.name])
        .arg(&exe)
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(INSIDE, &ns.name)
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = die_with_parent(&mut c)
        .spawn()
        .expect("run the test inside the namespace");
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for the inner run") {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(ns);
    match status {
        Some(st) => assert!(st.success(), "{test} failed inside {}: {st}", INSIDE),
        None => panic!("{test} did not finish within {} s", LIMIT.as_secs()),
    }
}
