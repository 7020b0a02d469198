#!/usr/bin/env python3
"""Durable before use (docs/durability.md): what the gate costs on a healthy disk, and what a
client sees while the disk is slow.

1. Healthy disk: `appendonly yes`, `appendfsync everysec`, one fresh server per figure, this
   build against `--baseline` (0.3.0's .so, which hands out without waiting for the AOF),
   alternating back to back every round (the order flips each round); each round gives the
   ratio new / baseline of its own pair, the summary the median over rounds:
   - hot P16: `SEQ.NEXT hot`, redis-benchmark -c 1 -P 16 (one hot key).
   - idmp c1 P1, c1 P16, c16 P1: `SEQ.NEXT k:__rand_int__ IDMP t__rand_int__` (a new token a
     call: each answer carries a record, which must be written before it goes out).
   - send c1 P16: `IM.SEND` into one conversation with one recipient, a new client message id a
     call.
   And for this build, the calls that waited for the AOF per million calls (`INFO imid`
   `imid_durable_waits` over the calls made).
2. Slow disk (this build only): the server under tests/modules/slowdisk.c (LD_PRELOAD: every
   fsync and fdatasync sleeps as its control file says); after a healthy second, every flush
   takes `--slow-ms` (3000) for `--slow-s` (6) seconds while one client pipelines SEQ.NEXT on a
   hot key (16 a batch) and another sends IDMP calls one at a time. Each call's own wait is
   measured (in a pipeline, from the reply before it); the table gives the longest, the error
   replies by their first word, and the calls answered.

Every load is bounded in calls and time. Standard library only, plus redis-benchmark, redis-cli
and gcc (scripts/deps.sh bench).

    server-bench/durable.py [--module target/release/libimid.so] [--baseline old.so]
                            [--rounds 3] [--smoke] [--json out.json]   (markdown on stdout)

REDIS_SERVER=<binary> runs another server.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

RUN_TIMEOUT_S = 120
IDMP = ["SEQ.NEXT", "k:__rand_int__", "IDMP", "t__rand_int__"]
SEND = ["IM.SEND", "{c}", "{c}:seq", "{c}:inbox:u1", "{c}:trimmed:u1", "1", "u0",
        "m__rand_int__", "hello", "100"]

# (name, argv, clients, pipeline, full calls, smoke calls)
LOADS = [
    ("hot P16", ["SEQ.NEXT", "hot"], 1, 16, 300_000, 3_000),
    ("idmp c1 P1", IDMP, 1, 1, 20_000, 300),
    ("idmp c1 P16", IDMP, 1, 16, 100_000, 1_000),
    ("idmp c16 P1", IDMP, 16, 1, 100_000, 1_000),
    ("send c1 P16", SEND, 1, 16, 100_000, 1_000),
]


def server(module, workdir, env=None):
    """A fresh server with the AOF on, `appendfsync everysec`."""
    return lib.Server(module, workdir=workdir, env=env, timeout=30,
                      config={"appendonly": "yes", "appendfsync": "everysec"})


def stat(srv, name):
    """`imid_<name>` of INFO imid, or None."""
    v = srv.info("imid").get(f"imid_{name}")
    return None if v is None else int(v)


def bench(srv, argv, clients, pipeline, n):
    """requests/s of one redis-benchmark run; fails on an error reply or no figure."""
    rps, _, text = lib.benchmark(srv.port, argv, clients, pipeline, n, 1_000_000_000,
                                 timeout=RUN_TIMEOUT_S)
    errors = int(srv.info("stats").get("total_error_replies", "0"))
    if errors:
        raise RuntimeError(f"{argv[0]}: {errors} errors, rps {rps}\n{text[-1500:]}")
    return rps


def healthy(args, workdir):
    modules = [("new", args.module)] + ([("0.3.0", args.baseline)] if args.baseline else [])
    rows = {name: {"new": [], "0.3.0": [], "ratio": [], "waits_per_m": []} for name, *_ in LOADS}
    for rnd in range(args.rounds):
        order = modules if rnd % 2 == 0 else modules[::-1]
        for name, argv, clients, pipeline, full, smoke in LOADS:
            n = smoke if args.smoke else full
            got = {}
            for label, so in order:
                srv = server(so, workdir)
                try:
                    srv.cli("SEQ.NEXT", "warm")
                    before = stat(srv, "durable_waits")
                    got[label] = bench(srv, argv, clients, pipeline, n)
                    after = stat(srv, "durable_waits")
                    if label == "new" and before is not None and after is not None:
                        rows[name]["waits_per_m"].append((after - before) * 1_000_000 / n)
                finally:
                    srv.stop()
            for label, v in got.items():
                rows[name][label].append(v)
            if "0.3.0" in got:
                rows[name]["ratio"].append(got["new"] / got["0.3.0"])
    return rows


def timed(c, cmds):
    """Sends the commands at once; each reply with the time since the one before it (or since
    the send): in a pipeline a call waits behind the one before it, so this is the wait that
    call itself added."""
    c.send(*cmds)
    got, last = [], time.monotonic()
    for _ in cmds:
        r = c.reply()
        now = time.monotonic()
        got.append((r, (now - last) * 1000))
        last = now
    return got


def slow(args, workdir):
    so = os.path.join(workdir, "slowdisk.so")
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-o", so,
                    os.path.join(lib.ROOT, "tests/modules/slowdisk.c"), "-ldl"], check=True)
    ctl = os.path.join(workdir, "ctl")
    open(ctl, "w").write("0")
    srv = server(args.module, workdir, env={"LD_PRELOAD": so, "SLOWDISK_CTL": ctl,
                                            "SLOWDISK_LOG": os.path.join(workdir, "log")})
    out = {}
    try:
        hot, idmp = srv.client(), srv.client()
        seconds = 2 if args.smoke else args.slow_s

        def load(until, record):
            token = 0
            while time.monotonic() < until:
                for r, ms in timed(hot, [["SEQ.NEXT", "hot"]] * 16):
                    record("hot P16", ms, r)
                token += 1
                for r, ms in timed(idmp, [["SEQ.NEXT", f"k{token % 100}", "IDMP", f"t{token}"]]):
                    record("idmp P1", ms, r)

        stats = {}

        def record(name, ms, r):
            s = stats.setdefault(name, {"calls": 0, "answered": 0, "longest_ms": 0.0,
                                        "errors": {}})
            s["calls"] += 1
            s["longest_ms"] = max(s["longest_ms"], ms)
            if isinstance(r, lib.Error):
                code = str(r).split(" ", 1)[0]
                s["errors"][code] = s["errors"].get(code, 0) + 1
            else:
                s["answered"] += 1

        load(time.monotonic() + 1, lambda *a: None)
        open(ctl, "w").write(str(args.slow_ms))
        load(time.monotonic() + seconds, record)
        open(ctl, "w").write("0")
        out = stats
        out["info"] = {k: stat(srv, k) for k in ("durable_waits", "durable_timeouts",
                                                  "durable_fsync_ms")}
    finally:
        srv.stop()
    return out


def markdown(rows, slowdisk, args):
    lines = ["Healthy disk, `appendfsync everysec`: requests/s, medians over "
             f"{args.rounds} round(s) of back-to-back pairs"
             + (" against 0.3.0" if args.baseline else "") + ".", "",
             "| load | this build | 0.3.0 | ratio | AOF waits per million calls |",
             "| --- | ---: | ---: | ---: | ---: |"]
    med = lambda v: statistics.median(v) if v else None  # noqa: E731
    for name, r in rows.items():
        new, old, ratio, waits = med(r["new"]), med(r["0.3.0"]), med(r["ratio"]), \
            med(r["waits_per_m"])
        lines.append(f"| {name} | {new:,.0f} | {'-' if old is None else f'{old:,.0f}'} | "
                     f"{'-' if ratio is None else f'{ratio:.2f}'} | "
                     f"{'-' if waits is None else f'{waits:,.0f}'} |")
    lines += ["", f"Slow disk: every fsync takes {args.slow_ms} ms for "
              f"{2 if args.smoke else args.slow_s} s (this build).", "",
              "| client | calls | answered | longest wait of one call (ms) | errors |",
              "| --- | ---: | ---: | ---: | --- |"]
    for name, s in slowdisk.items():
        if name == "info":
            continue
        errs = ", ".join(f"{k} {v}" for k, v in sorted(s["errors"].items())) or "none"
        lines.append(f"| {name} | {s['calls']:,} | {s['answered']:,} | "
                     f"{s['longest_ms']:,.0f} | {errs} |")
    lines.append("")
    lines.append(f"INFO after the slow run: {slowdisk.get('info')}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=lib.DEFAULT_MODULE)
    ap.add_argument("--baseline")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slow-ms", type=int, default=3000)
    ap.add_argument("--slow-s", type=int, default=6)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.module = lib.module_path(args.module)
    if args.baseline:
        args.baseline = lib.module_path(args.baseline)
    lib.stop_on_signal()
    if args.smoke:
        args.rounds = 1
    workdir = tempfile.mkdtemp(prefix="imid-durable-")
    try:
        rows = healthy(args, workdir)
        slowdisk = slow(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        json.dump({"healthy": rows, "slow": slowdisk}, open(args.json, "w"), indent=1)
    print(markdown(rows, slowdisk, args))


if __name__ == "__main__":
    sys.exit(main())
