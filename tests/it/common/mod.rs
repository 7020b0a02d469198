//! The test harness: a real redis-server per test, with the imid module loaded, on a free
//! loopback port and in a directory of its own. Dropping a [`Server`] kills it and waits.
//!
//! Integration tests talk to the server only; they never link the crate.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use redis::{Connection, Value};

pub mod cluster;
pub mod rdb;

/// The module under test: `$IMID_MODULE` as it is, else the release build in this checkout,
/// built first when it is missing or older than its sources ([`fresh`]).
pub fn module_path() -> PathBuf {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    match std::env::var_os("IMID_MODULE") {
        Some(p) => existing(PathBuf::from(p), "IMID_MODULE"),
        None => fresh(&BUILT, "target/release/libimid.so", &["build", "--release"]),
    }
}

/// The module built with the `test-hooks` feature (IMID.TEST-CLOCK, IMID.TEST-PANIC):
/// `$IMID_TEST_MODULE` as it is, else `target/test-hooks/release/libimid.so`, built first when
/// it is missing or older than its sources ([`fresh`]).
pub fn hooks_module_path() -> PathBuf {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    match std::env::var_os("IMID_TEST_MODULE") {
        Some(p) => existing(PathBuf::from(p), "IMID_TEST_MODULE"),
        None => fresh(
            &BUILT,
            "target/test-hooks/release/libimid.so",
            &[
                "build",
                "--release",
                "--features",
                "test-hooks",
                "--target-dir",
                "target/test-hooks",
            ],
        ),
    }
}

fn existing(p: PathBuf, var: &str) -> PathBuf {
    assert!(p.exists(), "{var}={} does not exist", p.display());
    p
}

/// `so` (under this checkout), never stale: the first call in a test process runs `cargo
/// <build>` when the file is missing or older than a file under src/, Cargo.toml or Cargo.lock
/// (`make test` has built it already: then nothing runs); every call fails if it is still
/// older, so a run never mixes a build with sources changed under it.
fn fresh(built: &std::sync::OnceLock<()>, so: &str, build: &[&str]) -> PathBuf {
    let p = root().join(so);
    built.get_or_init(|| {
        if std::fs::metadata(&p).is_ok() && stale_by(&p).is_none() {
            return;
        }
        eprintln!("building {so}: cargo {}", build.join(" "));
        let st = Command::new(env!("CARGO"))
            .args(build)
            .current_dir(root())
            .status()
            .expect("run cargo");
        assert!(st.success(), "cargo {} failed", build.join(" "));
    });
    if let Some(newer) = stale_by(&p) {
        panic!(
            "{} is older than {}: sources changed during the run; run `cargo {}`",
            p.display(),
            newer.display(),
            build.join(" ")
        );
    }
    p
}

/// The newest file under src/, Cargo.toml or Cargo.lock if the module at `so` is older than
/// it (or missing), else `None`.
fn stale_by(so: &Path) -> Option<PathBuf> {
    fn newest(p: &Path, acc: &mut (std::time::SystemTime, PathBuf)) {
        let Ok(meta) = std::fs::metadata(p) else {
            return;
        };
        if meta.is_dir() {
            for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
                newest(&e.path(), acc);
            }
        } else if let Ok(m) = meta.modified() {
            if m > acc.0 {
                *acc = (m, p.to_owned());
            }
        }
    }
    let mut src = (std::time::SystemTime::UNIX_EPOCH, PathBuf::new());
    for p in ["src", "Cargo.toml", "Cargo.lock"] {
        newest(&root().join(p), &mut src);
    }
    match std::fs::metadata(so).and_then(|m| m.modified()) {
        Ok(built) if built >= src.0 => None,
        _ => Some(src.1),
    }
}

/// The redis-server binary: `$REDIS_SERVER`, else `redis-server` on PATH.
pub fn redis_server_bin() -> String {
    binary("REDIS_SERVER", "redis-server")
}

/// A server binary: `$var`, else `default` on PATH (Debian's package of that name, which
/// `make test` installs); fails the test when it does not run.
pub fn binary(var: &str, default: &str) -> String {
    let bin = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    let ok = Command::new(&bin)
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{bin} not found: install {default} (make test does) or set {var}"
    );
    bin
}

/// A newer server for the tests that must run on it (ACL categories exist from Redis 7.2 on):
/// `redis8` (Redis 8.2.3), `redis8.6` (Redis 8.6.3) or `valkey9` (Valkey 9.1.2). `$IMID_REDIS8`
/// / `$IMID_REDIS86` / `$IMID_VALKEY9` when set, else the binary `scripts/servers.sh` unpacks
/// (or builds) under `target/servers/`. Missing, it fails
/// the test when `IMID_NEWER_SERVERS=require` (`make test` and `make test-matrix` set it), and
/// otherwise is `None` after saying on stderr which test it skips and what runs it: plain
/// `cargo test` runs on a machine without the newer servers. Tests take it through
/// [`newer_server!`].
pub fn find_newer_server(name: &str) -> Option<PathBuf> {
    let (var, file) = match name {
        "redis8" => ("IMID_REDIS8", "redis-server-8.2.3"),
        "redis8.6" => ("IMID_REDIS86", "redis-8.6.3/redis-server"),
        "valkey9" => ("IMID_VALKEY9", "valkey-server-9.1.2"),
        other => panic!("unknown server {other}: redis8, redis8.6 or valkey9"),
    };
    let p = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/servers")
            .join(file)
    });
    if p.exists() {
        return Some(p);
    }
    let how = format!("run `bash scripts/servers.sh {name}` or set {var}; `make test` does both");
    assert!(
        std::env::var("IMID_NEWER_SERVERS").as_deref() != Ok("require"),
        "{} not found: {how}",
        p.display()
    );
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    eprintln!(
        "SKIPPED {test}: needs {file}, not found at {}: {how}",
        p.display()
    );
    None
}

/// `newer_server!("redis8")`: the path [`find_newer_server`] finds, or, when it skips, a
/// return from the calling function (a test: it passes as skipped, said on stderr; a helper
/// returning an `Option`: `None`).
macro_rules! newer_server {
    ($name:expr) => {
        match $crate::common::find_newer_server($name) {
            Some(p) => p,
            None => return Default::default(),
        }
    };
}

/// `on_newer_servers!(name, |bin| body)`: a module `name` of three tests, `redis8`, `redis86`
/// and `valkey9`, each running `body` with `bin` the path of that server ([`newer_server!`]: a
/// missing one skips its test, saying so, unless the run requires it).
macro_rules! on_newer_servers {
    ($name:ident, |$bin:ident| $body:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn redis8() {
                let $bin = newer_server!("redis8");
                $body;
            }

            #[test]
            fn redis86() {
                let $bin = newer_server!("redis8.6");
                $body;
            }

            #[test]
            fn valkey9() {
                let $bin = newer_server!("valkey9");
                $body;
            }
        }
    };
}

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

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh directory under the system temp dir, removed when the owning server drops.
pub fn temp_dir(tag: &str) -> PathBuf {
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("imid-test-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// Runs redis-server with the module loaded and `args` (after the module), expecting startup
/// to be refused: asserts the process exits with a failure and that Redis logged "Can't load
/// module" (so a refusal for an unrelated reason, such as a port taken, cannot pass for one).
/// Returns the log and the process's output, for the caller's own checks.
pub fn refused_startup(args: &[&str]) -> (String, String) {
    refused_startup_on(Path::new(&redis_server_bin()), args, "Can't load module")
}

/// [`refused_startup`] on the server binary `bin`, expecting `expect` in its log instead.
pub fn refused_startup_on(bin: &Path, args: &[&str], expect: &str) -> (String, String) {
    let mut last = String::new();
    for _ in 0..5 {
        let dir = temp_dir("refused");
        let log = dir.join("redis.log");
        let stdout = std::fs::File::create(dir.join("stdout.log")).expect("stdout file");
        let mut child = Command::new(bin)
            .args(["--port", &free_port().to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(&log)
            .arg("--loadmodule")
            .arg(module_path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .expect("run redis-server");
        // A server that accepted the arguments keeps running: give it ten seconds to exit.
        let status = exit_within(&mut child, Duration::from_secs(10));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let output = std::fs::read_to_string(dir.join("stdout.log")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            status.is_some_and(|st| !st.success()),
            "redis-server started with {args:?}: {status:?}\n{text}"
        );
        if text.contains(expect) {
            return (text, output);
        }
        last = text; // refused for another reason (a port taken meanwhile): once more
    }
    panic!("redis-server exited without logging {expect:?} for {args:?}:\n{last}");
}

/// Waits up to `limit` for `child` to exit; kills it and says `None` if it does not.
pub fn exit_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("wait for redis-server") {
            return Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs redis-server with the release module on the data files in `dir`, expecting it to
/// refuse them: asserts the process exits within ten seconds (Redis 7.0.15 exits with status 0
/// after "Unrecoverable error, aborting now") and that its log contains `expect` (so an exit
/// for an unrelated reason, such as a port taken, cannot pass for it). Returns the log.
pub fn refused_data_startup(dir: &Path, expect: &str) -> String {
    let module = module_path();
    refused_data_startup_with(Path::new(&redis_server_bin()), Some(&module), dir, expect)
}

/// [`refused_data_startup`] on the server binary `bin`, with `module` loaded or none.
pub fn refused_data_startup_with(
    bin: &Path,
    module: Option<&Path>,
    dir: &Path,
    expect: &str,
) -> String {
    let mut last = String::new();
    for attempt in 0..5 {
        let log = dir.join(format!("refused-{attempt}.log"));
        let load: Vec<&std::ffi::OsStr> = match module {
            Some(m) => vec!["--loadmodule".as_ref(), m.as_os_str()],
            None => Vec::new(),
        };
        let mut child = Command::new(bin)
            .args(["--port", &free_port().to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(&log)
            .args(load)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run redis-server");
        let status = exit_within(&mut child, Duration::from_secs(10));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            status.is_some(),
            "redis-server kept running on the files in {}\n{text}",
            dir.display()
        );
        if text.contains(expect) {
            return text;
        }
        last = text; // refused for another reason (a port taken meanwhile): once more
    }
    panic!("redis-server exited without logging {expect:?}:\n{last}");
}

pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    /// Extra `--name value` arguments, kept for restarts.
    pub args: Vec<String>,
    /// Extra environment for the process, kept for restarts.
    pub env: Vec<(String, String)>,
    /// The module file loaded (the release build, or the test-hooks build), if any.
    pub module: Option<PathBuf>,
    /// A config file given to redis-server before the other arguments, if any.
    pub conf: Option<PathBuf>,
    /// The server binary; `None`: [`redis_server_bin`].
    pub bin: Option<PathBuf>,
    child: Option<Child>,
    /// Where stdout/stderr of the process go (also holds panics).
    log: PathBuf,
    keep_dir: bool,
}

impl Server {
    /// A server with persistence off and the module's defaults: the one shortcut; every other
    /// start goes through [`Server::build`].
    pub fn start() -> Server {
        Server::build().start()
    }

    /// A server with the release module and `args` (after the module).
    pub fn with(args: &[&str]) -> Server {
        Server::build().args(args).start()
    }

    /// A server to start: `Server::build().hooked().args(&["--appendonly", "yes"]).start()`,
    /// `.dir(..)`, `.env(..)`, `.bin(newer_server!("redis8"))`, `.without_module()`, ...
    pub fn build() -> Launch {
        Launch {
            dir: None,
            args: Vec::new(),
            env: Vec::new(),
            module: Some(module_path()),
            bin: None,
            conf: None,
        }
    }

    fn start_full(launch: Launch) -> Server {
        let dir = launch.dir.unwrap_or_else(|| temp_dir("srv"));
        let conf = launch.conf.map(|text| {
            let file = dir.join("redis.conf");
            std::fs::write(&file, text).expect("write redis.conf");
            file
        });
        let mut last_err = String::new();
        for _ in 0..5 {
            let mut s = Server {
                port: free_port(),
                log: dir.join("redis.log"),
                dir: dir.clone(),
                args: launch.args.clone(),
                env: launch.env.clone(),
                module: launch.module.clone(),
                bin: launch.bin.clone(),
                conf: conf.clone(),
                child: None,
                keep_dir: false,
            };
            match s.spawn() {
                Ok(()) => return s,
                Err(e) => {
                    s.keep_dir = true; // the next attempt reuses it
                    last_err = e;
                }
            }
        }
        panic!("redis-server did not start: {last_err}");
    }

    fn command_line(&self) -> Vec<String> {
        let mut v: Vec<String> = vec![
            "--port".into(),
            self.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            self.dir.display().to_string(),
            "--logfile".into(),
            self.log.display().to_string(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--enable-debug-command".into(),
            "yes".into(),
        ];
        // A config file must come first on redis-server's command line.
        if let Some(c) = &self.conf {
            v.insert(0, c.display().to_string());
        }
        if let Some(m) = &self.module {
            v.push("--loadmodule".into());
            v.push(m.display().to_string());
        }
        v.extend(self.args.iter().cloned());
        v
    }

    fn spawn(&mut self) -> Result<(), String> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stdout.log"))
            .map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let bin = match &self.bin {
            Some(b) => b.clone(),
            None => PathBuf::from(redis_server_bin()),
        };
        let child = Command::new(bin)
            .args(self.command_line())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn redis-server: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Err(format!("exited with {status}: {}", self.log_tail()));
                }
            }
            if let Ok(mut con) = self.try_client() {
                // PING answers with -LOADING while the dataset loads; wait for PONG.
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!("no PONG within 20 s: {}", self.log_tail()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_tail(&self) -> String {
        let mut s = String::new();
        for f in [&self.log, &self.dir.join("stdout.log")] {
            if let Ok(file) = std::fs::File::open(f) {
                let lines: Vec<String> =
                    BufReader::new(file).lines().map_while(Result::ok).collect();
                let start = lines.len().saturating_sub(15);
                s.push_str(&lines[start..].join("\n"));
                s.push('\n');
            }
        }
        s
    }

    /// The whole server log.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn try_client(&self) -> redis::RedisResult<Connection> {
        let client = redis::Client::open(self.url())?;
        client.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// A new connection; panics with the server's log when it cannot connect.
    ///
    /// No read timeout: a socket with one (SO_RCVTIMEO) makes Linux fail a read blocked on it
    /// with EINTR, instead of resuming it, when the test process is stopped and continued or
    /// frozen and thawed (a cgroup freezer, a debugger, a paused sandbox); redis-rs passes that
    /// on as "Interrupted system call" and the command's reply is lost (a flaky
    /// `examples::sync_pages_through_10000_messages` on Valkey 9.1.2, in `make test-matrix`).
    /// Without one the kernel resumes the read (`harness::
    /// a_client_read_survives_the_test_process_being_stopped`). A server that dies closes the
    /// socket, so a read fails then; only a live server that never answers hangs the test.
    pub fn client(&self) -> Connection {
        self.try_client()
            .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", self.port, self.log_tail()))
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Whether the process is still running (false after a crash).
    pub fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL, as in a crash or power loss of the process: nothing is flushed.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A clean `SHUTDOWN` (saving if a save point or AOF is configured), then wait.
    pub fn shutdown(&mut self, save: bool) {
        if let Ok(mut con) = self.try_client() {
            let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN")
                .arg(if save { "SAVE" } else { "NOSAVE" })
                .query(&mut con);
        }
        if let Some(mut c) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the process again on the same port, directory and arguments (so it loads
    /// whatever RDB/AOF files are there). Call after `kill` or `shutdown`.
    pub fn restart(&mut self) {
        self.restart_with(&[]);
    }

    /// Like `restart`, with arguments replaced when `args` is not empty.
    pub fn restart_with(&mut self, args: &[&str]) {
        self.kill();
        if !args.is_empty() {
            self.args = args.iter().map(|s| s.to_string()).collect();
        }
        let mut last = String::new();
        for _ in 0..5 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => {
                    last = e;
                    // The old port may be taken meanwhile: move to another.
                    self.port = free_port();
                }
            }
        }
        panic!("restart failed: {last}");
    }

    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let mut con = self.client();
        let info: String = redis::cmd("INFO").arg(section).query(&mut con).ok()?;
        info.lines().find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_owned())
        })
    }

    /// How many times the server ran `name` (`INFO commandstats`; 0 when never).
    pub fn calls(&self, name: &str) -> i64 {
        self.info_field("commandstats", &format!("cmdstat_{name}"))
            .and_then(|v| {
                v.split(',')
                    .find_map(|kv| kv.strip_prefix("calls="))
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    }

    /// An `imid_<name>` counter from `INFO imid`.
    pub fn imid_stat(&self, name: &str) -> i64 {
        self.info_field("imid", &format!("imid_{name}"))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("INFO imid has no imid_{name}"))
    }
}

impl Server {
    /// A replica of this server (`--replicaof`, plus `extra` arguments), returned once its
    /// link to the primary is up.
    pub fn replica(&self, extra: &[&str]) -> Server {
        self.replica_of(Server::build(), extra)
    }

    /// [`Server::replica`] of the test-hooks build (IMID.TEST-CLOCK and the other hooks).
    pub fn hooked_replica(&self, extra: &[&str]) -> Server {
        self.replica_of(Server::build().hooked(), extra)
    }

    fn replica_of(&self, launch: Launch, extra: &[&str]) -> Server {
        let port = self.port.to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", port.as_str()];
        args.extend_from_slice(extra);
        let replica = launch.args(&args).start();
        replica.wait_link_up();
        replica
    }

    /// A server started without imid whose clients may load it (`enable-module-command`
    /// `allow`: `yes` or `local`), and the module's path as text for MODULE LOAD/LOADEX.
    pub fn loadable(allow: &str) -> (Server, String) {
        let s = Server::build()
            .without_module()
            .args(&["--enable-module-command", allow])
            .start();
        (s, module_path().display().to_string())
    }

    /// [`wait_until`], failing with this server's log tail.
    pub fn wait_until(&self, what: &str, secs: u64, done: impl FnMut() -> bool) {
        wait_until_or(secs, done, || {
            format!("{what}: not within {secs} s\n{}", self.log_tail())
        });
    }

    /// Waits until this replica's link to its primary is up.
    pub fn wait_link_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self
            .info_field("replication", "master_link_status")
            .as_deref()
            != Some("up")
        {
            assert!(
                Instant::now() < deadline,
                "replica link not up: {}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// BGREWRITEAOF, then [`Server::wait_for_aof_rewrite`].
    pub fn rewrite_aof(&self) {
        let _: String = cmd(&mut self.client(), &["BGREWRITEAOF"]).unwrap();
        self.wait_for_aof_rewrite();
    }

    /// kill -9, a restart on the same files and arguments, and a client of the new process.
    pub fn crash_restart(&mut self) -> Connection {
        self.kill();
        self.restart();
        self.client()
    }

    /// Waits until no AOF rewrite is running or scheduled (after BGREWRITEAOF).
    pub fn wait_for_aof_rewrite(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let busy = self.info_field("persistence", "aof_rewrite_in_progress");
            let queued = self.info_field("persistence", "aof_rewrite_scheduled");
            if busy.as_deref() == Some("0") && queued.as_deref() == Some("0") {
                return;
            }
            assert!(Instant::now() < deadline, "AOF rewrite did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A connection speaking RESP3 (`HELLO 3`), for replies that are maps there.
    pub fn client_resp3(&self) -> Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .and_then(|c| c.get_connection())
            .unwrap_or_else(|e| panic!("RESP3 connect to {}: {e}", self.port))
    }

    /// Waits until `replica` has acknowledged and applied everything this primary sent.
    pub fn wait_replica(&self, replica: &Server) {
        let acked: i64 = cmd(&mut self.client(), &["WAIT", "1", "5000"]).unwrap();
        assert_eq!(acked, 1, "replica did not acknowledge");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let p = self.info_field("replication", "master_repl_offset");
            let r = replica.info_field("replication", "master_repl_offset");
            if p.is_some() && p == r {
                return;
            }
            assert!(Instant::now() < deadline, "offsets {p:?} vs {r:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `DEBUG DIGEST` of the whole dataset.
pub fn digest(s: &Server) -> String {
    cmd(&mut s.client(), &["DEBUG", "DIGEST"]).unwrap()
}

/// How to start a [`Server`], for what the `start_*` shortcuts do not cover. Defaults: the
/// release module, `redis_server_bin()`, a fresh temp directory, no extra arguments.
pub struct Launch {
    dir: Option<PathBuf>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    module: Option<PathBuf>,
    bin: Option<PathBuf>,
    conf: Option<String>,
}

impl Launch {
    /// Another server binary (e.g. [`newer_server!`]).
    pub fn bin(mut self, bin: impl Into<PathBuf>) -> Launch {
        self.bin = Some(bin.into());
        self
    }

    /// Extra `--name value` arguments after the module.
    pub fn args(mut self, args: &[&str]) -> Launch {
        self.args = args.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn dir(mut self, dir: PathBuf) -> Launch {
        self.dir = Some(dir);
        self
    }

    pub fn env(mut self, env: Vec<(String, String)>) -> Launch {
        self.env = env;
        self
    }

    /// The test-hooks build of the module instead of the release build.
    pub fn hooked(mut self) -> Launch {
        self.module = Some(hooks_module_path());
        self
    }

    pub fn without_module(mut self) -> Launch {
        self.module = None;
        self
    }

    /// Another module file (e.g. one unpacked from a release tarball).
    pub fn module(mut self, module: &Path) -> Launch {
        self.module = Some(module.to_path_buf());
        self
    }

    /// Starts the server as `redis-server <dir>/redis.conf --port ...`, the file holding `text`
    /// (combine with `without_module` to let the file say what to load).
    pub fn conf(mut self, text: &str) -> Launch {
        self.conf = Some(text.to_owned());
        self
    }

    pub fn start(self) -> Server {
        Server::start_full(self)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if !self.keep_dir && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A python3 that can `import redis`: `python3` on PATH, else Debian's (python3-redis
/// installs into /usr/bin/python3's path, which a pyenv or venv python3 on PATH does not see).
pub fn python_with_redis() -> Option<String> {
    ["python3", "/usr/bin/python3"].into_iter().find_map(|p| {
        Command::new(p)
            .args(["-c", "import redis"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|_| p.to_owned())
    })
}

/// `node` for the Node.js example, or None when node is not installed (the caller skips).
/// With node installed the example's dependencies must be there too (`npm ci` in
/// examples/node, which scripts/deps.sh runs): a missing one fails the test, not skips it.
pub fn node_for_example() -> Option<String> {
    let runs = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        return None;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/node");
    assert!(
        dir.join("node_modules/ioredis").is_dir(),
        "node is installed but {}/node_modules lacks ioredis: run `npm ci` there \
         (scripts/deps.sh does)",
        dir.display()
    );
    Some("node".to_owned())
}

/// The server's error reply as Redis sent it, `CODE detail` (e.g. `ERR invalid ...`).
pub fn err_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => e.to_string(),
    }
}

/// Runs a command built from byte-string arguments (binary-safe names).
pub fn bcmd<T: redis::FromRedisValue>(
    con: &mut Connection,
    args: &[&[u8]],
) -> redis::RedisResult<T> {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).unwrap_or("?"));
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

/// Runs a command that must fail and returns its error text.
pub fn expect_err(con: &mut Connection, args: &[&[u8]]) -> String {
    match bcmd::<Value>(con, args) {
        Ok(v) => panic!(
            "expected an error for {:?}, got {v:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        ),
        Err(e) => err_text(&e),
    }
}

/// The start of every arity error.
pub const ARITY: &str = "ERR wrong number of arguments";
/// An unknown option, or one without its value.
pub const SYNTAX: &str = "ERR syntax error";
/// SEQ.NEXT's and SEQ.HNEXT's COUNT out of range.
pub const COUNT: &str = "ERR COUNT must be an integer in 1..1000000";
/// A sequence value out of range.
pub const VALUE: &str = "ERR value must be an integer in 0..9223372036854775807";
/// The error of a command on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A row of an error table: a call (its arguments split at spaces), run once per value with
/// its `_` replaced by the value (once as it is when there are no values), and the start of the
/// error every run must get.
pub type Refused<'a> = (&'a str, &'a [&'a str], &'a str);

/// The calls of an error table ([`Refused`] rows), each with the error it must get.
pub fn refusals<'a>(rows: &[Refused<'a>]) -> Vec<(Vec<&'a str>, &'a str)> {
    let mut calls = Vec::new();
    for &(call, values, want) in rows {
        if values.is_empty() {
            calls.push((call.split(' ').collect(), want));
        }
        for &v in values {
            let args = call.split(' ').map(|a| if a == "_" { v } else { a });
            calls.push((args.collect(), want));
        }
    }
    calls
}

/// Runs an error table ([`Refused`] rows): every call must fail with an error that starts with
/// its row's text; `after` runs after each call (to check that it changed nothing).
pub fn assert_refusals(
    con: &mut Connection,
    rows: &[Refused],
    mut after: impl FnMut(&mut Connection, &[&str]),
) {
    for (args, want) in refusals(rows) {
        let got = expect_err(con, &bytes(&args));
        assert!(
            got.starts_with(want),
            "{args:?}: got {got:?}, want {want:?}"
        );
        after(con, &args);
    }
}

/// String arguments as the byte strings [`expect_err`] takes.
pub fn bytes<'a>(args: &[&'a str]) -> Vec<&'a [u8]> {
    args.iter().map(|a| a.as_bytes()).collect()
}

/// `MODULE LOADEX <module> CONFIG <name> <value> ...`: `Ok` when the module loaded, else the
/// error's text.
pub fn loadex(con: &mut Connection, module: &str, configs: &[(&str, &str)]) -> Result<(), String> {
    let mut c = redis::cmd("MODULE");
    c.arg("LOADEX").arg(module);
    for (name, value) in configs {
        c.arg("CONFIG").arg(*name).arg(*value);
    }
    c.query::<()>(con).map_err(|e| err_text(&e))
}

/// Server arguments written as one line: `words("--imid.seq-gap 0 --appendonly yes")`.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs a command built from string arguments.
pub fn cmd<T: redis::FromRedisValue>(
    con: &mut impl redis::ConnectionLike,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

/// Runs the calls in order (arguments split at spaces), each of which must reply the integer
/// beside it.
pub fn assert_int_replies(con: &mut Connection, steps: &[(&str, i64)]) {
    for &(call, want) in steps {
        let args: Vec<&str> = call.split(' ').collect();
        assert_eq!(int(con, &args), want, "{call}");
    }
}

/// Runs WATCH key on one client, `change` on another, then MULTI/EXEC on the first: whether
/// EXEC ran (a change to the key aborts it).
pub fn exec_survives(s: &Server, key: &str, change: &[&str]) -> bool {
    let mut a = s.client();
    let mut b = s.client();
    let _: () = redis::cmd("WATCH").arg(key).query(&mut a).unwrap();
    let _: Value = cmd(&mut b, change).unwrap();
    let r: Option<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("EXISTS")
        .arg(key)
        .query(&mut a)
        .unwrap();
    r.is_some()
}

/// The value of config `name` (CONFIG GET).
pub fn config(con: &mut Connection, name: &str) -> String {
    let v: Vec<String> = cmd(con, &["CONFIG", "GET", name]).unwrap();
    assert_eq!(v.len(), 2, "CONFIG GET {name}: {v:?}");
    v[1].clone()
}

/// CONFIG SET `name` `value`, which must succeed.
pub fn config_set(con: &mut Connection, name: &str, value: &str) {
    let _: () = cmd(con, &["CONFIG", "SET", name, value])
        .unwrap_or_else(|e| panic!("CONFIG SET {name} {value}: {e}"));
}

/// The reference vectors: `tests/vectors/<name>`, or `$IMID_VECTORS/<name>`. Returns the rows
/// as maps from header to (unescaped) value.
pub fn vectors(name: &str) -> Vec<std::collections::HashMap<String, String>> {
    let dir = std::env::var_os("IMID_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("tests/vectors"));
    let path = dir.join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split('\t').collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            header
                .iter()
                .zip(l.split('\t').chain(std::iter::repeat("")))
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// Undoes the vectors' escaping: `\\`, `\t`, `\n`, `\r`, `\xHH`.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // (the byte, how many input bytes it took)
        let (byte, took) = match (b[i], b.get(i + 1)) {
            (b'\\', Some(b'\\')) => (b'\\', 2),
            (b'\\', Some(b't')) => (b'\t', 2),
            (b'\\', Some(b'n')) => (b'\n', 2),
            (b'\\', Some(b'r')) => (b'\r', 2),
            (b'\\', Some(b'x')) => b
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .map_or((b[i], 1), |v| (v, 4)),
            (c, _) => (c, 1),
        };
        out.push(byte);
        i += took;
    }
    out
}

pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// The names MODULE LIST shows.
pub fn modules(con: &mut Connection) -> Vec<String> {
    let list: Vec<Vec<Value>> = cmd(con, &["MODULE", "LIST"]).unwrap();
    list.iter()
        .map(|m| {
            let fields: Vec<String> = m
                .iter()
                .map(|v| redis::from_redis_value::<String>(v.clone()).unwrap_or_default())
                .collect();
            let at = fields.iter().position(|f| f == "name").expect("name field");
            fields[at + 1].clone()
        })
        .collect()
}

/// An integer reply, or a panic naming the command that failed.
pub fn int(con: &mut impl redis::ConnectionLike, args: &[&str]) -> i64 {
    cmd(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// SEQ.MGET of `keys`.
pub fn mget(con: &mut Connection, keys: &[String]) -> Vec<i64> {
    let mut c = redis::cmd("SEQ.MGET");
    for k in keys {
        c.arg(k);
    }
    c.query(con).unwrap()
}

/// Redis Cluster's key slot (CRC16-XMODEM with hash-tag rules), computed independently of the
/// module.
pub fn slot(key: &str) -> u16 {
    const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    let k = key.as_bytes();
    let tagged = k
        .iter()
        .position(|&b| b == b'{')
        .and_then(|o| {
            let rest = &k[o + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&c| c > 0)
                .map(|c| &rest[..c])
        })
        .unwrap_or(k);
    CRC16.checksum(tagged) & 0x3FFF
}

/// The 22-bit hash field of a message ID (in slot mode: the slot in its top 14 bits).
pub fn hash_of(id: &str) -> u32 {
    let b = data_encoding::BASE32HEX_NOPAD
        .decode(id.replace('-', "").as_bytes())
        .unwrap();
    let v = b.iter().fold(0u128, |acc, x| (acc << 8) | u128::from(*x));
    (v & 0x3F_FFFF) as u32
}

/// This checkout's root (examples, scripts and test data are found from it).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `n` replies of one ID-issuing command (`["MSGID.GEN", "1", "t"]`, `["UID.GEN", "t"]`),
/// called `n` times, pipelined 1,000 at a time.
pub fn gen_many<T: redis::FromRedisValue>(con: &mut Connection, n: usize, args: &[&str]) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut p = redis::pipe();
        for _ in 0..(n - out.len()).min(1000) {
            p.cmd(args[0]).arg(&args[1..]);
        }
        out.extend(p.query::<Vec<T>>(con).unwrap());
    }
    out
}

/// `n` message IDs for `target`, one MSGID.GEN (channel type 1) each.
pub fn msgids(con: &mut Connection, n: usize, target: &str) -> Vec<String> {
    gen_many(con, n, &["MSGID.GEN", "1", target])
}

/// `n` UIDs for `target`, one UID.GEN each.
pub fn uids(con: &mut Connection, n: usize, target: &str) -> Vec<i64> {
    gen_many(con, n, &["UID.GEN", target])
}

/// Fails unless `ids` strictly increase, naming the first pair that does not.
pub fn assert_increasing<T: PartialOrd + std::fmt::Display>(ids: &[T]) {
    assert_increasing_in("", ids);
}

/// [`assert_increasing`], saying where (`what`: a connection, a slot) when it fails.
pub fn assert_increasing_in<T: PartialOrd + std::fmt::Display>(
    what: impl std::fmt::Display,
    ids: &[T],
) {
    for w in ids.windows(2) {
        assert!(w[0] < w[1], "{what}: {} then {}", w[0], w[1]);
    }
}

/// IMID.TEST-CLOCK with `args` (`FREEZE ms`, `OFFSET ms`, `REAL`): the test-hooks build's clock.
pub fn set_clock(con: &mut Connection, args: &[&str]) {
    let mut a = vec!["IMID.TEST-CLOCK"];
    a.extend_from_slice(args);
    let _: String = cmd(con, &a).unwrap();
}

/// The server's wall clock in ms (TIME).
pub fn server_time_ms(con: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = cmd(con, &["TIME"]).unwrap();
    s * 1000 + us / 1000
}

/// [`server_time_ms`] as a `u64`.
pub fn server_time_ms_u64(con: &mut Connection) -> u64 {
    u64::try_from(server_time_ms(con)).unwrap()
}

/// Polls `done` every 20 ms until it holds; after `secs` s fails naming `what`. A guard against
/// a hang, not a measure of speed.
pub fn wait_until(what: &str, secs: u64, done: impl FnMut() -> bool) {
    wait_until_or(secs, done, || format!("{what}: not within {secs} s"));
}

/// [`wait_until`] with the failure's message made when it fails (`what()`, e.g. with a log tail).
pub fn wait_until_or(secs: u64, mut done: impl FnMut() -> bool, what: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "{}", what());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One pipelined batch of the IM load: `n` conversations drawn from `0..keys` by a cheap LCG
/// (`x`, advanced), each with SEQ.NEXT on `{conv:<i>}:seq`, then MSGID.GEN and UID.GEN for it.
/// Returns the pipeline and the keys in order (three replies per key).
pub fn load_batch(x: &mut u64, keys: usize, n: usize) -> (redis::Pipeline, Vec<String>) {
    let mut p = redis::pipe();
    let mut batch = Vec::with_capacity(n);
    for _ in 0..n {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let key = format!("{{conv:{}}}:seq", (*x >> 33) as usize % keys);
        p.cmd("SEQ.NEXT").arg(&key);
        p.cmd("MSGID.GEN").arg(1).arg(&key);
        p.cmd("UID.GEN").arg(&key);
        batch.push(key);
    }
    (p, batch)
}

/// A reply that must be a RESP3 map (`con` from [`Server::client_resp3`]), as its pairs in
/// order, each value read as a `T`.
pub fn resp3_map<T: redis::FromRedisValue>(
    con: &mut Connection,
    args: &[&str],
) -> Vec<(String, T)> {
    match cmd(con, args).unwrap() {
        Value::Map(pairs) => pairs
            .into_iter()
            .map(|(k, v)| {
                (
                    redis::from_redis_value(k).unwrap(),
                    redis::from_redis_value(v).unwrap(),
                )
            })
            .collect(),
        other => panic!("{args:?}: expected a map, got {other:?}"),
    }
}

/// Runs `c` to its end; fails unless it exits 0, showing its output. Returns its stdout.
pub fn run(c: &mut Command) -> String {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{c:?} exited with {}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Every sequence write on `key` (SEQ.NEXT, SEQ.SET, SEQ.ADVANCE) is refused with an error
/// starting with `code` (NOPERM for a read-only user, READONLY on a replica).
pub fn assert_seq_writes_refused(con: &mut Connection, key: &str, code: &str) {
    for args in [
        &["SEQ.NEXT", key][..],
        &["SEQ.SET", key, "5"],
        &["SEQ.ADVANCE", key, "9"],
    ] {
        let e = cmd::<Value>(con, args).unwrap_err();
        assert!(err_text(&e).starts_with(code), "{args:?}: {e}");
    }
}

/// The events a subscriber to `__keyspace@0__:<key>` (by a pattern that also matches
/// `marker`) receives for `key`, in order, up to the first on `marker`: a key written last, so
/// every event before it has been delivered and no read waits for one that never comes.
pub fn keyspace_events(ps: &mut redis::PubSub, key: &str, marker: &str) -> Vec<String> {
    let mut events = Vec::new();
    loop {
        let msg = ps.get_message().unwrap();
        let channel = msg.get_channel_name();
        if channel == format!("__keyspace@0__:{marker}") {
            return events;
        }
        assert_eq!(channel, format!("__keyspace@0__:{key}"));
        events.push(msg.get_payload::<String>().unwrap());
    }
}

/// `f(i, a client of its own)` on `n` threads at once (`i` in 0..n); the results in that order.
pub fn on_clients<T: Send>(
    s: &Server,
    n: usize,
    f: impl Fn(usize, &mut Connection) -> T + Sync,
) -> Vec<T> {
    std::thread::scope(|sc| {
        let f = &f;
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let mut con = s.client();
                sc.spawn(move || f(i, &mut con))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The AOF with fsync every second, as `make run` and docs/durability.md recommend.
pub const AOF_EVERYSEC: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "everysec"];

/// The server arguments of an AOF fsynced on every write, with the RDB preamble `preamble`
/// (`yes`, or `no` so that the AOF rewrite callbacks run).
pub fn aof_always(preamble: &str) -> [&str; 6] {
    [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        preamble,
    ]
}
