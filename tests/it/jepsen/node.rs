//! Servers and Sentinels on their own loopback addresses inside the namespace: every process
//! listens on one 127.0.0.x (`bind`) and connects out from it (`bind-source-addr`; Sentinel
//! connects from its first `bind` address and announces `sentinel announce-ip`), so a firewall
//! rule on an address pair cuts exactly the links between two processes (Redis 7.0's Sentinel
//! connects from 127.0.0.1 without `bind-source-addr`, whatever it binds: seen in the first
//! runs, whose partitions then cut the replicas but not the Sentinels). Clients connect from
//! 127.0.0.1, which no node uses and no rule cuts.
use super::netns::die_with_parent;
use redis::{Connection, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The port every data node listens on (each has its own address); the cluster bus is
/// port + 10000.
pub const PORT: u16 = 6379;
/// The port every Sentinel listens on.
pub const SENTINEL_PORT: u16 = 26379;

pub struct Node {
    pub name: String,
    pub ip: String,
    pub port: u16,
    pub dir: PathBuf,
    bin: PathBuf,
    args: Vec<String>,
    sentinel: bool,
    child: Option<Child>,
}

/// A fresh directory for one node's files, kept after a failed run (its log says what the
/// node did), removed with the node otherwise.
fn node_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "imid-jepsen-{}-{name}",
        std::env::var(super::netns::INSIDE).unwrap_or_default()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("node directory");
    d
}

impl Node {
    /// A data node: `bin` with the module `module` on `ip`:[`PORT`], AOF `everysec`, no RDB
    /// snapshots, and `extra` arguments.
    pub fn server(name: &str, bin: &Path, module: &Path, ip: &str, extra: &[String]) -> Node {
        let dir = node_dir(name);
        let mut args: Vec<String> = [
            "--port",
            &PORT.to_string(),
            "--bind",
            ip,
            "--bind-source-addr",
            ip,
            // Protected mode lets in 127.0.0.1 only (by address, not by interface).
            "--protected-mode",
            "no",
            "--dir",
            &dir.display().to_string(),
            "--logfile",
            &dir.join("server.log").display().to_string(),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--loadmodule",
            &module.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend_from_slice(extra);
        let mut n = Node {
            name: name.to_owned(),
            ip: ip.to_owned(),
            port: PORT,
            dir,
            bin: bin.to_owned(),
            args,
            sentinel: false,
            child: None,
        };
        n.spawn();
        n
    }

    /// A Sentinel (`bin --sentinel`, the server's own) on `ip`:[`SENTINEL_PORT`] watching the
    /// primary at `primary_ip`:[`PORT`] under the name `master`, quorum 2; it connects out from
    /// `ip` and announces `ip` to the other Sentinels.
    pub fn sentinel(
        name: &str,
        bin: &Path,
        ip: &str,
        master: &str,
        primary_ip: &str,
        down_after_ms: u32,
    ) -> Node {
        let dir = node_dir(name);
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {SENTINEL_PORT}\nbind {ip}\nbind-source-addr {ip}\nprotected-mode no\n\
                 sentinel announce-ip {ip}\n\
                 dir {d}\nlogfile {d}/sentinel.log\n\
                 sentinel monitor {master} {primary_ip} {PORT} 2\n\
                 sentinel down-after-milliseconds {master} {down_after_ms}\n\
                 sentinel failover-timeout {master} 10000\n\
                 sentinel parallel-syncs {master} 2\n",
                d = dir.display()
            ),
        )
        .expect("sentinel.conf");
        let mut n = Node {
            name: name.to_owned(),
            ip: ip.to_owned(),
            port: SENTINEL_PORT,
            dir,
            bin: bin.to_owned(),
            args: vec![conf.display().to_string(), "--sentinel".to_owned()],
            sentinel: true,
            child: None,
        };
        n.spawn();
        n
    }

    fn spawn(&mut self) {
        let mut c = Command::new(&self.bin);
        c.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(
            die_with_parent(&mut c)
                .spawn()
                .unwrap_or_else(|e| panic!("run {}: {e}", self.bin.display())),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                panic!("{} exited with {st}:\n{}", self.name, self.log_tail());
            }
            if self.query::<String>(&["PING"]).is_ok_and(|p| p == "PONG") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not answer PING within 30 s:\n{}",
                self.name,
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    pub fn url(&self) -> String {
        format!("redis://{}:{}/", self.ip, self.port)
    }

    pub fn connect(&self) -> redis::RedisResult<Connection> {
        let con =
            redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(Duration::from_secs(5)))?;
        Ok(con)
    }

    /// One command on a new connection (Sentinel closes normal clients on a node it
    /// reconfigures, so no connection is kept).
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let mut con = self.connect()?;
        let mut c = redis::cmd(args.first().copied().unwrap_or("PING"));
        for a in args.iter().skip(1) {
            c.arg(*a);
        }
        c.query(&mut con)
    }

    /// The INFO field `field`, if the node answers.
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let text: String = self.query(&["INFO", section]).ok()?;
        text.lines().find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_owned())
        })
    }

    pub fn role(&self) -> Option<String> {
        self.info_field("replication", "role")
    }

    /// A replica of `primary` with its link up.
    pub fn replicates(&self, primary: &Node) -> bool {
        let Ok(text) = self.query::<String>(&["INFO", "replication"]) else {
            return false;
        };
        let field = |f: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{f}:")).map(str::trim))
        };
        field("role") == Some("slave")
            && field("master_host") == Some(primary.ip.as_str())
            && field("master_link_status") == Some("up")
    }

    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().and_then(|c| i32::try_from(c.id()).ok())
    }

    fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) on the pid of a child this node spawned and has not reaped.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// SIGSTOP: the process stops answering, keeps its sockets and state.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// kill -9, reaped.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the process again, same address, arguments and files (its AOF).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn log_tail(&self) -> String {
        let file = if self.sentinel {
            "sentinel.log"
        } else {
            "server.log"
        };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- {} ({}):\n{}",
            self.name,
            self.addr(),
            lines[lines.len().saturating_sub(25)..].join("\n")
        )
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.resume();
        self.kill();
        if !std::thread::panicking() && std::env::var_os("IMID_JEPSEN_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `INFO server` and `INFO replication` of a node in one call: its run id, its replication
/// ID and whether it is a primary.
pub fn identity(con: &mut Connection) -> Option<(bool, String, String)> {
    let text: String = redis::cmd("INFO")
        .arg("server")
        .arg("replication")
        .query(con)
        .ok()?;
    let field = |f: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix(&format!("{f}:"))
                .map(|v| v.trim().to_owned())
        })
    };
    Some((
        field("role")? == "master",
        field("run_id")?,
        field("master_replid")?,
    ))
}

/// A reply's integer, if it is one.
pub fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}
