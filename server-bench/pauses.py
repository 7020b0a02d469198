#!/usr/bin/env python3
"""The longest single call while one sequence map grows, widens and shrinks, beside a Redis hash.

A big map must never stop the server: growth, value widening, deletion and compaction are done a
bounded step at a time (src/core/seqmap.rs). This measures what a user sees: the slowlog of a
fresh server (`slowlog-log-slower-than` 100 µs, so that every call of 0.1 ms or more is kept)
while, pipelined through redis-cli --pipe, one key goes through four phases:

- grow: `SEQ.HNEXT m f:<i>` for i in 0..N (each call adds a field), against `HINCRBY h f:<i> 1`;
- widen: `SEQ.HNEXT m f:<i> COUNT 1000000` for every field (each value outgrows its width, so
  its entry moves), against `HINCRBY h f:<i> 1000000`;
- bulk: --bulk calls of `SEQ.HSET m` with 2,000 new field/value pairs each, against `HSET h`;
- shrink: `SEQ.HDEL m <field>` for every field, one per call, until the key is gone, against
  `HDEL h <field>`.

Per phase: the calls, the worst call (µs, the slowlog's figure: execution inside the server,
not the network), how many calls took 1 ms or more and 5 ms or more. On every server of the
matrix (scripts/servers.sh; a server that cannot be had is skipped, saying so).

Slowlog times are wall-clock: on a loaded machine a call the scheduler preempts counts its wait
too (on this 2-CPU machine shared with other work, a plain HINCRBY then shows up at 10-30 ms).
So the server runs at real-time priority (`chrt -f 1`; the kernel still leaves 5% of each CPU to
everything else, and it holds one CPU at most) where chrt is allowed, else at normal priority,
and the report says which (--no-rt forces normal priority).

Standard library only; servers from server-bench/lib.py.

    server-bench/pauses.py --module target/release/libimid.so [--servers redis7,valkey9]
                  [--fields 2000000] [--bulk 100] --json out.json
"""

import argparse
import json
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

SLOWER_THAN_US = 100
BULK_PAIRS = 2000
WIDEN_BY = 1_000_000
PHASES = ["grow", "widen", "bulk", "shrink"]
# (kind, key, commands per phase: each a function of the field index giving one call's argv)
KINDS = {
    "map": {
        "grow": lambda f: ["SEQ.HNEXT", "m", f],
        "widen": lambda f: ["SEQ.HNEXT", "m", f, "COUNT", str(WIDEN_BY)],
        "bulk": "SEQ.HSET",
        "shrink": lambda f: ["SEQ.HDEL", "m", f],
        "key": "m",
        "len": "SEQ.HLEN",
    },
    "hash": {
        "grow": lambda f: ["HINCRBY", "h", f, "1"],
        "widen": lambda f: ["HINCRBY", "h", f, str(WIDEN_BY)],
        "bulk": "HSET",
        "shrink": lambda f: ["HDEL", "h", f],
        "key": "h",
        "len": "HLEN",
    },
}


def fields(n, prefix="f:"):
    return (f"{prefix}{i:08d}" for i in range(n))


def slowlog(c):
    """Every slowlog entry since the last reset (durations in µs), then a reset."""
    entries = c("SLOWLOG", "GET", "-1")
    c("SLOWLOG", "RESET")
    return [(e[2], e[3][0] if e[3] else "?") for e in entries]


def run_phase(srv, c, kind, phase, n, bulk):
    k = KINDS[kind]
    slowlog(c)
    t = time.monotonic()
    if phase == "bulk":
        def calls():
            for b in range(bulk):
                argv = [k["bulk"], k["key"]]
                for i in range(b * BULK_PAIRS, (b + 1) * BULK_PAIRS):
                    argv += [f"b:{i:08d}", str(i)]
                yield argv
        sent = srv.pipe(calls())
    elif phase == "shrink":
        sent = srv.pipe(k["shrink"](f) for f in
                        list(fields(n)) + list(fields(bulk * BULK_PAIRS, "b:")))
    else:
        sent = srv.pipe(k[phase](f) for f in fields(n))
    seconds = time.monotonic() - t
    log = slowlog(c)
    durations = [d for d, _ in log]
    return {
        "phase": phase, "calls": sent, "seconds": seconds,
        "worst_us": max(durations, default=0),
        "over_1ms": sum(1 for d in durations if d >= 1000),
        "over_5ms": sum(1 for d in durations if d >= 5000),
        "logged": len(durations),
        # Every call logged (each took 0.1 ms or more, as the bulk calls): the typical one.
        "median_us": (sorted(durations)[len(durations) // 2]
                      if durations and len(durations) == sent else None),
    }


def measure(module, workdir, bin, kind, n, bulk, prefix):
    srv = lib.Server(module, workdir=workdir, bin=bin, prefix=prefix, args=[
        "--slowlog-log-slower-than", str(SLOWER_THAN_US), "--slowlog-max-len", "1000000",
        # Deletes free in the foreground as a map's own deletes do (Valkey's default is lazy).
        "--lazyfree-lazy-user-del", "no"])
    c = srv.client()
    k = KINDS[kind]
    rows = []
    try:
        for phase in PHASES:
            r = run_phase(srv, c, kind, phase, n, bulk)
            length = int(c(k["len"], k["key"]))
            want = {"grow": n, "widen": n, "bulk": n + bulk * BULK_PAIRS, "shrink": 0}[phase]
            if length != want:
                raise RuntimeError(f"{kind} after {phase}: {length} fields, not {want}")
            rows.append(r)
            print(f"    {kind} {phase}: {r['calls']:,} calls in {r['seconds']:.1f} s, worst "
                  f"{r['worst_us'] / 1000:.2f} ms, {r['over_1ms']} >= 1 ms, {r['over_5ms']} "
                  ">= 5 ms", file=sys.stderr, flush=True)
    finally:
        c.close()
        srv.stop()
    return rows


def ms(us):
    return f"{us / 1000:.2f}" if us >= SLOWER_THAN_US else f"< {SLOWER_THAN_US / 1000:.1f}"


def worst(r):
    """The worst call, and the median one where every call was logged (the bulk calls)."""
    out = ms(r["worst_us"])
    if r.get("median_us") is not None:
        out += f" (median {ms(r['median_us'])})"
    return out


def render(data):
    """The results as markdown lines (also used by server-bench/report.py)."""
    out = [
        "| server | phase | calls | sequence map: worst (ms) | ≥ 1 ms | ≥ 5 ms | Redis hash: "
        "worst (ms) | ≥ 1 ms | ≥ 5 ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in data["servers"]:
        if s.get("skipped"):
            out.append(f"| {s['name']} | skipped: {s['skipped']} | | | | | | | |")
            continue
        for m, h in zip(s["map"], s["hash"]):
            out.append(f"| {s['version']} | {m['phase']} | {m['calls']:,} | {worst(m)} | "
                       f"{m['over_1ms']} | {m['over_5ms']} | {worst(h)} | "
                       f"{h['over_1ms']} | {h['over_5ms']} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", required=True)
    ap.add_argument("--servers", default=",".join(lib.MATRIX),
                    help="names for scripts/servers.sh (default: the whole matrix)")
    ap.add_argument("--fields", type=int, default=2_000_000)
    ap.add_argument("--bulk", type=int, default=100, help="SEQ.HSET calls of 2,000 new pairs")
    ap.add_argument("--kinds", default="map,hash")
    ap.add_argument("--no-rt", action="store_true", help="run the servers at normal priority")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    module = lib.module_path(args.module)
    lib.stop_on_signal()
    prefix = [] if args.no_rt else lib.realtime(1)
    print(f"servers at {'real-time priority (chrt -f 1)' if prefix else 'normal priority'}",
          file=sys.stderr)
    servers = []
    with tempfile.TemporaryDirectory(prefix="imid-pauses-") as workdir:
        try:
            for name, bin, version in lib.each_server(args.servers, servers):
                print(f"  {version}:", file=sys.stderr, flush=True)
                s = {"name": name, "version": version}
                for kind in args.kinds.split(","):
                    s[kind] = measure(module, workdir, bin, kind, args.fields, args.bulk,
                                      prefix)
                servers.append(s)
        finally:
            lib.stop_all()
    data = {"fields": args.fields, "bulk": args.bulk, "bulk_pairs": BULK_PAIRS,
            "slower_than_us": SLOWER_THAN_US, "realtime": bool(prefix), "servers": servers}
    if all(k in s for s in servers if not s.get("skipped") for k in ("map", "hash")):
        print("\n".join(render(data)))
    with open(args.json, "w") as f:
        json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
