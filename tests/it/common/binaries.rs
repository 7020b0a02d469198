//! What a test runs: the module under test (the release build or the test-hooks build, built
//! first when missing or stale), the server binaries (Redis 7.0 from Debian, the newer servers
//! `scripts/servers.sh` fetches), the interpreters of the examples, and any other program.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// This checkout's root (examples, scripts and test data are found from it).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The module under test: `$IMID_MODULE` as it is, else the release build in this checkout,
/// built first when it is missing or older than its sources ([`fresh`]).
pub fn module_path() -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    match std::env::var_os("IMID_MODULE") {
        Some(p) => existing(PathBuf::from(p), "IMID_MODULE"),
        None => fresh(&BUILT, "target/release/libimid.so", &["build", "--release"]),
    }
}

/// The module built with the `test-hooks` feature (IMID.TEST-CLOCK, IMID.TEST-PANIC):
/// `$IMID_TEST_MODULE` as it is, else `target/test-hooks/release/libimid.so`, built first when
/// it is missing or older than its sources ([`fresh`]).
pub fn hooks_module_path() -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
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
fn fresh(built: &OnceLock<()>, so: &str, build: &[&str]) -> PathBuf {
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
/// `cargo test` runs on a machine without the newer servers. `IMID_NEWER_SERVERS=skip` skips
/// these tests, saying so: they do not depend on `$REDIS_SERVER`, so a matrix that already ran
/// them once (`scripts/test-matrix.sh`) need not run them again per server. Tests take it through
/// [`newer_server!`].
pub fn find_newer_server(name: &str) -> Option<PathBuf> {
    let (var, file) = match name {
        "redis8" => ("IMID_REDIS8", "redis-server-8.2.3"),
        "redis8.6" => ("IMID_REDIS86", "redis-8.6.3/redis-server"),
        "valkey9" => ("IMID_VALKEY9", "valkey-server-9.1.2"),
        other => panic!("unknown server {other}: redis8, redis8.6 or valkey9"),
    };
    let test = std::thread::current().name().unwrap_or("?").to_owned();
    if std::env::var("IMID_NEWER_SERVERS").as_deref() == Ok("skip") {
        // These tests do not depend on `$REDIS_SERVER`: a matrix runs them once, not per server.
        eprintln!(
            "SKIPPED {test}: pinned to {file}, run once per matrix (IMID_NEWER_SERVERS=skip)"
        );
        return None;
    }
    let p = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/servers").join(file));
    if p.exists() {
        return Some(p);
    }
    let how = format!("run `bash scripts/servers.sh {name}` or set {var}; `make test` does both");
    assert!(
        std::env::var("IMID_NEWER_SERVERS").as_deref() != Ok("require"),
        "{} not found: {how}",
        p.display()
    );
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
    let dir = root().join("examples/node");
    assert!(
        dir.join("node_modules/ioredis").is_dir(),
        "node is installed but {}/node_modules lacks ioredis: run `npm ci` there \
         (scripts/deps.sh does)",
        dir.display()
    );
    Some("node".to_owned())
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
