"""What every script in server-bench/ shares: servers, a RESP client, redis-benchmark, callgrind.

- `Server`: one redis-server (or valkey-server) on a free 127.0.0.1 port, in a temp dir (or the
  one given), persistence off unless asked, modules loaded by ABSOLUTE path (the server changes
  into its --dir before it loads them); ready once its log says so (no command is sent, so
  nothing lands in a callgrind count); stopped by `stop()`, `stop_all()`, at exit and on
  SIGTERM/SIGINT once a script called `stop_on_signal()`.
- `start_replica`: a plain replica of a server, returned once the primary lists it online.
- `Client`: a minimal RESP client (no redis-py needed); `Error`: an error reply.
- `benchmark`: one redis-benchmark run, its requests/s.
- `Callgrind`: a Server under callgrind, counting instructions inside Redis's `call()`
  (`callgrind`, `callgrind_control`, `callgrind_dump`, `callgrind_total` underneath); `count`:
  what a client's calls cost on one;
  `build_floor`: server-bench/floor.c compiled, the floor the counts are held against.
- `find_server`, `each_server`, `MATRIX`: the servers of the test matrix (scripts/servers.sh).
- `module_path`, `need`, `version`, `realtime`, `free_port`, `encode`, `parse_info`, `counters`.

Standard library only. Scripts import it as `import lib` (their own directory is on sys.path).
"""

import atexit
import glob
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_MODULE = os.path.join(ROOT, "target/release/libimid.so")
# A fixed message ID (from the README), and a fixed 128-bit key: the keyed OPENID rows' and the
# one server-bench/floor.c is loaded with.
MSGID = "D1VO-8H8O-0006-D3E6"
BENCH_KEY = "000102030405060708090a0b0c0d0e0f"
# Every server of the test matrix, as scripts/servers.sh names them.
MATRIX = ["redis7", "redis8", "redis8.6", "valkey8", "valkey9"]


def server_bin():
    """The server binary: $REDIS_SERVER, else redis-server on PATH."""
    return os.environ.get("REDIS_SERVER", "redis-server")


def module_path(path):
    """`path` made absolute (the server changes into its --dir before it loads modules); exits
    saying what to do when it is not there."""
    path = os.path.abspath(path)
    if not os.path.exists(path):
        sys.exit(f"{path} missing: run `make build` first")
    return path


def need(*tools):
    """Exits naming the first tool not on PATH."""
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (scripts/deps.sh installs it)")


def version(bin, full=False):
    """`bin --version`, without its ` sha=...` tail unless `full`."""
    out = subprocess.run([bin, "--version"], capture_output=True, text=True).stdout.strip()
    return out if full else out.split(" sha=")[0].strip()


def find_server(name):
    """(the binary scripts/servers.sh gives for `name`, None), or (None, why) when it cannot."""
    res = subprocess.run(["bash", os.path.join(ROOT, "scripts", "servers.sh"), name],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return None, (res.stderr.strip().splitlines() or ["unavailable"])[-1]
    return res.stdout.strip().splitlines()[-1], None


def each_server(names, skipped):
    """(name, binary, version) for each comma-separated name scripts/servers.sh can give; one it
    cannot is said on stderr and appended to `skipped` as {"name": ..., "skipped": why}."""
    for name in names.split(","):
        bin, why = find_server(name)
        if not bin:
            print(f"{name}: skipped ({why})", file=sys.stderr)
            skipped.append({"name": name, "skipped": why})
            continue
        yield name, bin, version(bin)


def realtime(priority):
    """`chrt -f <priority>` when this process may use it, else nothing."""
    words = ["chrt", "-f", str(priority)]
    try:
        ok = subprocess.run(words + ["true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        ok = False
    return words if ok else []


def free_port():
    """A free loopback port below the kernel's ephemeral range (32768+), where no outgoing
    connection can be handed it between this check and the server's bind."""
    for _ in range(1000):
        port = random.randrange(10000, 30000)
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port in 10000..30000")


# ---------------------------------------------------------------------------------------------
# RESP

def encode(*args):
    """One command in RESP (str arguments as UTF-8)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Error(str):
    """An error reply."""


class Client:
    """A minimal RESP client: `c(*args)` sends one command and returns its reply; `send` many
    commands, then as many `reply()`s; `pipelined` runs a list of commands `depth` at a time."""

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return Error(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError(f"unexpected reply {line!r}")

    def send(self, *commands):
        self.sock.sendall(b"".join(encode(*c) for c in commands))

    def __call__(self, *args):
        self.send(args)
        return self.reply()

    def pipelined(self, commands, depth=16):
        """Sends the commands `depth` at a time; every reply must not be an error."""
        for i in range(0, len(commands), depth):
            batch = commands[i:i + depth]
            self.send(*batch)
            for a in batch:
                r = self.reply()
                if isinstance(r, Error):
                    raise RuntimeError(f"{a[:3]}...: {r}")


def parse_info(text):
    """INFO's `field:value` lines as a dict of strings."""
    fields = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            fields[k] = v.strip()
    return fields


def counters(c, *sections):
    """The whole-number fields of these INFO sections (one INFO each, through client `c`), and
    each `cmdstat_<command>` as its calls."""
    out = {}
    for section in sections:
        for k, v in parse_info(c("INFO", section)).items():
            if k.startswith("cmdstat_"):
                m = re.search(r"calls=(\d+)", v)
                out[k] = int(m.group(1)) if m else 0
            elif v.isdigit():
                out[k] = int(v)
    return out


# ---------------------------------------------------------------------------------------------
# Servers

RUNNING = []


class Server:
    """One server with `modules` loaded ((path, *words) or a path), on a free loopback port.

    dir: its --dir (default: a fresh temp dir under `workdir`, or the system's); several servers
    may share one with other `dbfilename`s and `log`s. log: its logfile (a name in `dir` or a
    path). config: options over the defaults `save ""` and `appendonly no` (a dict); args: more
    words of its command line. prefix: words to start it under (taskset, chrt, valgrind). env:
    added to the environment. bin: another server binary. Ready once its log says "Ready to
    accept connections" (also after loading a big RDB file); a server that exits at once (its
    port was taken) is started again on another port."""

    def __init__(self, modules=(), *, workdir=None, dir=None, log="redis.log", dbfilename=None,
                 config=None, args=(), prefix=(), env=None, bin=None, timeout=120):
        self.bin = bin or server_bin()
        self.dir = dir or tempfile.mkdtemp(prefix="srv-", dir=workdir)
        self.log = os.path.join(self.dir, log)
        self.proc = None
        conf = {"save": "", "appendonly": "no", **(config or {})}
        if dbfilename:
            conf["dbfilename"] = dbfilename
        words = [w for k, v in conf.items() for w in (f"--{k}", v)] + list(args)
        for m in [modules] if isinstance(modules, str) else modules:
            path, *margs = [m] if isinstance(m, str) else m
            words += ["--loadmodule", os.path.abspath(path), *margs]
        for attempt in range(5):
            self.port = free_port()
            self.argv = [*prefix, self.bin, "--port", str(self.port), "--bind", HOST,
                         "--dir", self.dir, "--logfile", self.log, *words]
            if self._start(env, timeout):
                return
            taken = self.proc.poll() in (0, 1)  # exited by itself: most likely the port
            tail = open(self.log).read()[-2000:] if os.path.exists(self.log) else "(no log)"
            self.stop()
            if not taken or attempt == 4:
                raise RuntimeError(f"{self.bin} did not start:\n{tail}")

    def _start(self, env, timeout):
        """Starts it; True once it is ready, False when it exited or `timeout` s passed."""
        if os.path.exists(self.log):  # a restart on an earlier server's dir: its own log only
            os.remove(self.log)
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL,
                                     env={**os.environ, **env} if env else None)
        RUNNING.append(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with open(self.log) as f:
                    if "Ready to accept connections" in f.read():
                        return True
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        return False

    def client(self, timeout=30):
        return Client(self.port, timeout)

    def call(self, *args):
        """One command on a connection of its own."""
        with self.client() as c:
            return c(*args)

    def cli(self, *args, stdin=None, timeout=600):
        """redis-cli with these arguments (`--pipe` with stdin); its output, stripped."""
        return subprocess.run(["redis-cli", "-h", HOST, "-p", str(self.port), *args],
                              input=stdin, capture_output=True, check=True,
                              timeout=timeout).stdout.decode().strip()

    def info(self, section):
        return parse_info(self.cli("INFO", section))

    def pipe(self, commands, chunk=10_000):
        """Streams the commands (an iterable of argv) through redis-cli --pipe; the number sent.
        Fails on an error reply."""
        p = subprocess.Popen(["redis-cli", "-h", HOST, "-p", str(self.port), "--pipe"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        n, buf = 0, []
        for argv in commands:
            buf.append(encode(*argv))
            n += 1
            if len(buf) >= chunk:
                p.stdin.write(b"".join(buf))
                buf = []
        p.stdin.write(b"".join(buf))
        p.stdin.close()
        out = p.stdout.read().decode()
        if p.wait() != 0 or "errors: 0," not in out or f"replies: {n}" not in out:
            raise RuntimeError(f"redis-cli --pipe of {n} commands: {out.strip()[-500:]}")
        return n

    def stop(self, timeout=10):
        """SIGTERM, then SIGKILL after `timeout` s. Under callgrind give it time: the server shuts
        down from its cron, outside call(), and callgrind then writes its file."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self in RUNNING:
            RUNNING.remove(self)


def stop_all():
    while RUNNING:
        RUNNING[-1].stop()


def stop_on_signal():
    """Every server this process started is stopped at exit and on SIGTERM/SIGINT."""
    def on_signal(signum, _frame):
        stop_all()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    atexit.register(stop_all)


def start_replica(primary, online_timeout=120, **kw):
    """A plain replica of `primary` (Server's arguments), once the primary lists it online."""
    replica = Server(args=list(kw.pop("args", ())) + ["--replicaof", HOST, str(primary.port)],
                     **kw)
    with primary.client() as c:
        deadline = time.monotonic() + online_timeout
        while "state=online" not in c("INFO", "replication"):
            if time.monotonic() > deadline:
                replica.stop()
                raise RuntimeError(f"the replica did not come online within {online_timeout} s")
            time.sleep(0.05)
    return replica


# ---------------------------------------------------------------------------------------------
# redis-benchmark

def benchmark(port, argv, clients=50, pipeline=1, requests=100_000, keyspace=None, prefix=(),
              timeout=600):
    """One redis-benchmark run (--csv): (requests/s, p50 ms or None, its output). Fails when it
    exits non-zero or prints no figure; error replies are for the caller to count."""
    cmd = [*prefix, "redis-benchmark", "-h", HOST, "-p", str(port), "-c", str(clients),
           "-n", str(requests), "-P", str(pipeline), "--csv"]
    if keyspace:
        cmd += ["-r", str(keyspace)]
    res = subprocess.run(cmd + list(argv), capture_output=True, text=True, timeout=timeout)
    text = res.stdout + res.stderr
    rps = p50 = None
    header = []
    for line in res.stdout.splitlines():
        cells = [c.strip('"') for c in line.split('","')]
        if cells[0] == "test":
            header = cells
        elif len(cells) >= 2:
            try:
                rps = float(cells[1])
                if "p50_latency_ms" in header:
                    p50 = float(cells[header.index("p50_latency_ms")])
            except (ValueError, IndexError):
                pass
    if res.returncode != 0 or rps is None:
        raise RuntimeError(f"redis-benchmark {' '.join(argv)}: exit {res.returncode}, "
                           f"throughput {'missing' if rps is None else rps}\n{text[-1500:]}")
    return rps, p50, text


# ---------------------------------------------------------------------------------------------
# Callgrind: instructions inside Redis's call() (the command's own execution, replies and
# propagation; not the network or the request parsing). Counts do not move with the machine.

def callgrind(out, instrument=True):
    """Words to start a server under callgrind, counting inside call() only, into `out`.
    instrument=False: instrumentation off until `callgrind_control -i on` (loading is then not
    even slowed down)."""
    return ["valgrind", "--tool=callgrind", *([] if instrument else ["--instr-atstart=no"]),
            "--collect-atstart=no", "--toggle-collect=call", f"--callgrind-out-file={out}"]


def callgrind_control(server, *flags):
    """callgrind_control with these flags (-z: zero the counts, -d: dump, -i on|off) on a server
    started under `callgrind`."""
    res = subprocess.run(["callgrind_control", *flags, str(server.proc.pid)],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0 or "OK" not in res.stdout:
        raise RuntimeError(f"callgrind_control {' '.join(flags)}: {res.stdout}{res.stderr}")


def callgrind_dump(server, out):
    """Dumps the counts now (callgrind_control -d: into <out>.1), so that what follows is not
    counted; the dump's path once written."""
    callgrind_control(server, "-d")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for path in (out + ".1", out):
            if os.path.exists(path):
                with open(path) as f:
                    if any(ln.startswith(("summary:", "totals:")) for ln in f):
                        return path
        time.sleep(0.1)
    raise RuntimeError(f"no callgrind dump at {out}.1")


def callgrind_total(path, lines=("summary:", "totals:")):
    """The instructions a callgrind file counted: its first line starting with one of `lines`.
    `summary:` comes first and is what instructions.py and send.py read (it differs from
    `totals:` by some 90 instructions a run); a server whose instrumentation was off at start
    (`callgrind(out, instrument=False)`) writes `summary: 0`, and bulk.py reads `totals:`."""
    with open(path) as f:
        for line in f:
            if line.startswith(lines):
                return int(line.split()[1])
    raise RuntimeError(f"no {' or '.join(lines)} in {path}")


class Callgrind(Server):
    """A Server under callgrind, counting inside call() into <workdir>/<label>.cg (Server's
    arguments besides). instrument=False: instrumentation off until `instrument("on")`."""

    def __init__(self, label, workdir, modules=(), instrument=True, **kw):
        self.out = os.path.join(workdir, f"{label}.cg")
        self.instrumented = instrument
        super().__init__(modules, workdir=workdir, prefix=callgrind(self.out, instrument), **kw)

    def zero(self):
        """Forgets what was counted so far (a warm-up)."""
        callgrind_control(self, "-z")

    def instrument(self, state):
        callgrind_control(self, "-i", state)

    def dump(self):
        """Ends the count here: what the server does after it is not counted."""
        self.out = callgrind_dump(self, self.out)

    def total(self):
        """The instructions counted (once stopped, or after `dump`)."""
        return callgrind_total(self.out, ("summary:", "totals:") if self.instrumented
                               else ("totals:",))

    def stop(self, timeout=120):
        super().stop(timeout)


def build_floor(workdir):
    """server-bench/floor.c compiled against the redismodule.h of the redis-module version in
    Cargo.lock (the cargo registry holds it once the project was built); the .so's path."""
    lock = open(os.path.join(ROOT, "Cargo.lock")).read()
    m = re.search(r'name = "redis-module"\nversion = "([^"]+)"', lock)
    if not m:
        sys.exit("redis-module not found in Cargo.lock")
    cargo_home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    headers = glob.glob(os.path.join(cargo_home, "registry", "src", "*",
                                     f"redis-module-{m.group(1)}", "src", "include",
                                     "redismodule.h"))
    if not headers:
        sys.exit(f"redismodule.h of redis-module {m.group(1)} not found: build the project "
                 "once (cargo build) first")
    out = os.path.join(workdir, "floor.so")
    subprocess.run(["gcc", "-O2", "-Wall", "-fPIC", "-shared",
                    "-I", os.path.dirname(headers[0]), "-o", out,
                    os.path.join(HERE, "floor.c")], check=True)
    return out


def count(label, workdir, warm, drive, client_timeout=1200, **kw):
    """Instructions inside call() while `drive(client)` runs, on a fresh server under callgrind
    (Server's arguments), after `warm(client)` (not counted)."""
    srv = Callgrind(label, workdir, **kw)
    try:
        with srv.client(client_timeout) as c:
            warm(c)
            srv.zero()
            drive(c)
    finally:
        srv.stop()
    return srv.total()
