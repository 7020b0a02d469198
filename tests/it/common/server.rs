//! A real server process per [`Server`]: started with the module loaded (or not), on a free
//! loopback port and in a directory of its own; restarted on its files, killed, made a replica
//! of; its INFO read. [`Launch`] says how to start one, or runs one that must refuse to start.
//! Dropping a `Server` kills it and removes its directory.

use super::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    /// Extra `--name value` arguments, kept for restarts.
    pub args: Vec<String>,
    /// The module file loaded (the release build, or the test-hooks build), if any.
    pub module: Option<PathBuf>,
    /// A config file given to redis-server before the other arguments, if any.
    pub conf: Option<PathBuf>,
    /// The server binary; `None`: [`redis_server_bin`].
    pub bin: Option<PathBuf>,
    /// Environment variables of the process (a [`SlowDisk`]'s), kept for restarts.
    env: Vec<(String, String)>,
    child: Option<Child>,
    /// The server's log file (`--logfile`); its stdout and stderr (panics too) go to
    /// `stdout.log` beside it.
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
    /// `.dir(..)`, `.bin(newer_server!("redis8"))`, `.without_module()`, ...
    pub fn build() -> Launch {
        Launch {
            dir: None,
            args: Vec::new(),
            module: Some(module_path()),
            bin: None,
            conf: None,
            env: Vec::new(),
        }
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

    /// A replica of this server (`--replicaof`, plus `extra` arguments), returned once its
    /// link to the primary is up.
    pub fn replica(&self, extra: &[&str]) -> Server {
        self.replica_of(Server::build(), extra)
    }

    /// [`Server::replica`] of the test-hooks build (IMID.TEST-CLOCK and the other hooks).
    pub fn hooked_replica(&self, extra: &[&str]) -> Server {
        self.replica_of(Server::build().hooked(), extra)
    }

    /// [`Server::replica`] started as `launch` says (a [`SlowDisk`], another binary).
    pub fn replica_of(&self, launch: Launch, extra: &[&str]) -> Server {
        let port = self.port.to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", port.as_str()];
        args.extend_from_slice(extra);
        let replica = launch.args(&args).start();
        replica.wait_link_up();
        replica
    }

    // ---- The process ----

    /// The server `launch` describes, on a free port, not running yet.
    fn new(launch: Launch) -> Server {
        let dir = launch.dir.unwrap_or_else(|| temp_dir("srv"));
        let conf = launch.conf.map(|text| {
            let file = dir.join("redis.conf");
            std::fs::write(&file, text).expect("write redis.conf");
            file
        });
        Server {
            port: free_port(),
            log: dir.join("redis.log"),
            dir,
            args: launch.args,
            module: launch.module,
            bin: launch.bin,
            conf,
            env: launch.env,
            child: None,
            keep_dir: false,
        }
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

    /// The server's process, to spawn with its output going to `out` (stdout and stderr).
    fn process(&self, out: &Path) -> Result<Command, String> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out)
            .map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let bin = match &self.bin {
            Some(b) => b.clone(),
            None => PathBuf::from(redis_server_bin()),
        };
        let mut c = Command::new(bin);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c.args(self.command_line())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        Ok(c)
    }

    /// Spawns the process and waits until it answers PING with PONG (it answers -LOADING while
    /// the dataset loads).
    fn spawn(&mut self) -> Result<(), String> {
        let child = self
            .process(&self.dir.join("stdout.log"))?
            .spawn()
            .map_err(|e| format!("spawn redis-server: {e}"))?;
        self.child = Some(child);
        let mut exited = None;
        let up = poll_until(20, || {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    exited = Some(status);
                    return true;
                }
            }
            self.try_client()
                .is_ok_and(|mut con| redis::cmd("PING").query::<String>(&mut con).is_ok())
        });
        match exited {
            Some(status) => {
                self.child = None;
                Err(format!("exited with {status}: {}", self.log_tail()))
            }
            None if up => Ok(()),
            None => {
                self.kill();
                Err(format!("no PONG within 20 s: {}", self.log_tail()))
            }
        }
    }

    /// [`spawn`](Self::spawn), on another port when it fails (the port may have been taken
    /// meanwhile): five tries.
    fn spawn_retrying(&mut self) {
        let mut last = String::new();
        for _ in 0..5 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => {
                    last = e;
                    self.port = free_port();
                }
            }
        }
        panic!("redis-server did not start: {last}");
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
            if !poll_until(30, || matches!(c.try_wait(), Ok(Some(_)))) {
                let _ = c.kill();
                let _ = c.wait();
            }
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
        self.spawn_retrying();
    }

    /// kill -9, a restart on the same files and arguments, and a client of the new process.
    pub fn crash_restart(&mut self) -> Connection {
        self.kill();
        self.restart();
        self.client()
    }

    // ---- Connections and logs ----

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
    ///
    /// The connect itself runs with a timeout, so it can fail the same way ("connect to ...:
    /// Interrupted system call" in `examples::replica_holds_the_primarys_state`, Redis 8.6,
    /// `make test-matrix`): that error alone is tried again, a few times.
    pub fn client(&self) -> Connection {
        let mut interrupted = 0;
        loop {
            match self.try_client() {
                Ok(c) => return c,
                Err(e) if interrupted < 5 && e.to_string().contains("os error 4") => {
                    interrupted += 1;
                }
                Err(e) => panic!("connect to {}: {e}\n{}", self.port, self.log_tail()),
            }
        }
    }

    /// Runs a command on a new connection that must reply `OK` (`common::ok`).
    pub fn ok(&self, args: &[&str]) {
        super::ok(&mut self.client(), args)
    }

    /// A connection speaking RESP3 (`HELLO 3`), for replies that are maps there.
    pub fn client_resp3(&self) -> Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .and_then(|c| c.get_connection())
            .unwrap_or_else(|e| panic!("RESP3 connect to {}: {e}", self.port))
    }

    /// The last 15 lines of the log and of the process's output.
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

    // ---- INFO ----

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

    // ---- Waiting for the server ----

    /// [`wait_until`], failing with this server's log tail.
    pub fn wait_until(&self, what: &str, secs: u64, done: impl FnMut() -> bool) {
        assert!(
            poll_until(secs, done),
            "{what}: not within {secs} s\n{}",
            self.log_tail()
        );
    }

    /// Waits until this replica's link to its primary is up.
    pub fn wait_link_up(&self) {
        self.wait_until("the replica's link up", 30, || {
            self.info_field("replication", "master_link_status")
                .as_deref()
                == Some("up")
        });
    }

    /// Waits until `replica` has acknowledged and applied everything this primary sent.
    pub fn wait_replica(&self, replica: &Server) {
        let acked: i64 = cmd(&mut self.client(), &["WAIT", "1", "5000"]).unwrap();
        assert_eq!(acked, 1, "replica did not acknowledge");
        self.wait_until("the replica at the primary's offset", 10, || {
            let p = self.info_field("replication", "master_repl_offset");
            p.is_some() && p == replica.info_field("replication", "master_repl_offset")
        });
    }

    /// Waits until this primary's `ROLE` lists `n` replicas (those online: a replica's link is
    /// up before the primary counts it).
    pub fn wait_replicas_online(&self, n: usize) {
        let mut con = self.client();
        self.wait_until(&format!("{n} replica(s) online"), 30, || {
            let role: Vec<Value> = cmd(&mut con, &["ROLE"]).unwrap();
            matches!(role.get(2), Some(Value::Array(r)) if r.len() == n)
        });
    }

    /// BGREWRITEAOF, then [`Server::wait_for_aof_rewrite`].
    pub fn rewrite_aof(&self) {
        let _: String = cmd(&mut self.client(), &["BGREWRITEAOF"]).unwrap();
        self.wait_for_aof_rewrite();
    }

    /// Waits until no AOF rewrite is running or scheduled (after BGREWRITEAOF). Both fields
    /// come from one INFO reply: read by two, a scheduled rewrite that the cron starts between
    /// them shows neither, and the test reads the AOF before the rewrite (the likely cause of a
    /// failure seen on Redis 8.2, whose replica's RDB child had the rewrite scheduled).
    pub fn wait_for_aof_rewrite(&self) {
        self.wait_until("the AOF rewrite finished", 30, || {
            let mut con = self.client();
            let Ok(info) = redis::cmd("INFO")
                .arg("persistence")
                .query::<String>(&mut con)
            else {
                return false;
            };
            let field = |name: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                    .map(str::trim)
            };
            field("aof_rewrite_in_progress") == Some("0")
                && field("aof_rewrite_scheduled") == Some("0")
        });
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

/// How to start a [`Server`], for what the `start_*` shortcuts do not cover. Defaults: the
/// release module, `redis_server_bin()`, a fresh temp directory, no extra arguments.
pub struct Launch {
    dir: Option<PathBuf>,
    args: Vec<String>,
    module: Option<PathBuf>,
    bin: Option<PathBuf>,
    conf: Option<String>,
    env: Vec<(String, String)>,
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

    /// The server's directory (with the data files it is to load); it is removed when the
    /// server drops.
    pub fn dir(mut self, dir: PathBuf) -> Launch {
        self.dir = Some(dir);
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

    /// The server's fsync and fdatasync go through `disk` (its slowness, its power-loss log).
    pub fn slow_disk(mut self, disk: &SlowDisk) -> Launch {
        self.env.extend(disk.env());
        self
    }

    /// Starts the server as `redis-server <dir>/redis.conf --port ...`, the file holding `text`
    /// (combine with `without_module` to let the file say what to load).
    pub fn conf(mut self, text: &str) -> Launch {
        self.conf = Some(text.to_owned());
        self
    }

    pub fn start(self) -> Server {
        let mut s = Server::new(self);
        s.spawn_retrying();
        s
    }

    /// Runs the server expecting it to refuse to start: asserts that the process exits within
    /// ten seconds and that its log says `expect` (so a refusal for an unrelated reason, such
    /// as a port taken, cannot pass for this one: that one is tried again, five times in all).
    ///
    /// Without [`dir`](Self::dir) (a refused argument, config or module: `"Can't load
    /// module"`), in a temp directory removed afterwards, the process must exit with a failure.
    /// With one (refused data files there; the directory is left as it is but for the
    /// `refused-*` files of each try) any exit will do: Redis 7.0.15 exits with status 0 after
    /// "Unrecoverable error, aborting now".
    pub fn refused(self, expect: &str) -> Refusal {
        let data = self.dir.is_some();
        let mut s = Server::new(self);
        s.keep_dir = data;
        let mut last = String::new();
        for attempt in 0..5 {
            s.port = free_port();
            s.log = s.dir.join(format!("refused-{attempt}.log"));
            let out = s.dir.join(format!("refused-{attempt}.out"));
            let mut child = s
                .process(&out)
                .and_then(|mut c| c.spawn().map_err(|e| e.to_string()))
                .unwrap_or_else(|e| panic!("run redis-server: {e}"));
            let mut status = None;
            if !poll_until(10, || {
                status = child.try_wait().expect("wait for redis-server");
                status.is_some()
            }) {
                let _ = child.kill();
                let _ = child.wait();
            }
            let log = s.log_text();
            let output = std::fs::read_to_string(&out).unwrap_or_default();
            let started = format!("redis-server {:?}: {status:?}\n{log}", s.command_line());
            match status {
                None => panic!("kept running: {started}"),
                Some(st) => assert!(data || !st.success(), "exited 0: {started}"),
            }
            if log.contains(expect) {
                return Refusal { log, output };
            }
            last = log; // refused for another reason (a port taken meanwhile): once more
        }
        panic!(
            "redis-server exited without logging {expect:?} for {:?} in {}:\n{last}",
            s.args,
            s.dir.display()
        );
    }
}

/// What a server that refused to start ([`Launch::refused`]) left: its log, and what it
/// wrote to stdout and stderr.
pub struct Refusal {
    pub log: String,
    pub output: String,
}

/// Starts a server with `args` that must refuse to load the module and say `want` in its log;
/// returns the log.
pub fn refused_load(args: &[&str], want: &str) -> String {
    let log = Server::build().args(args).refused("Can't load module").log;
    assert!(log.contains(want), "{args:?}: expected {want:?} in\n{log}");
    log
}

/// The AOF with fsync every second, as `make run` and docs/durability.md recommend.
pub const AOF_EVERYSEC: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "everysec"];

/// The AOF fsynced on every write.
pub const AOF_ALWAYS: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

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

/// A server's process stopped (SIGSTOP) until dropped or resumed: it neither serves, applies
/// nor acknowledges anything meanwhile, and its peers still count its links up.
pub struct Paused(i32);

impl Paused {
    pub fn of(s: &Server) -> Paused {
        let pid: i32 = s
            .info_field("server", "process_id")
            .and_then(|p| p.parse().ok())
            .expect("process_id");
        // SAFETY: a plain signal to a child process of this test.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        Paused(pid)
    }

    pub fn resume(self) {}
}

impl Drop for Paused {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}
