#!/usr/bin/env python3
"""Bulk writes: one SEQ.HSET of 2,000 new fields against one HSET of the same pairs (since 0.3.0).

For each server and each size N of --sizes: a fresh server gets a sequence map of N fields
(`SEQ.HSET m`, 1,000 pairs per call, as a map grows) or a Redis hash of the same fields (`HSET
h`), then --calls calls (by default max(10, N / 4,000), so that at 2,000,000 fields the calls
add N / 2 fields: a whole growth of the map's index by half, not one phase of it) each setting
2,000 new fields `b:<8 digits>` = i; at N = 0 each call creates its own key. Two figures per
call, each from its own fresh servers:

- instructions inside Redis's `call()` (callgrind, `--toggle-collect=call`; instrumentation
  switched on with `callgrind_control -i on` once the map or hash is loaded, so the loading
  costs nothing and is not counted);
- the server's time per call from `INFO commandstats` (`usec_per_call`, reset once the map or
  hash is loaded), the server at real-time priority (`chrt -f 10`) where allowed so that other
  work on the machine preempts it less; --rounds rounds, the map and the hash in turns (the
  order flips every round). Reported: the median per kind, and the median (and range) of the
  per-round ratios. Times move with the machine; instructions do not.

Target (since 0.3.0): SEQ.HSET at most 1.25 x HSET, in instructions or in server time, at 0,
100,000 and 2,000,000 fields, on Redis 7.0 and Valkey 9.1.

Standard library only; servers from server-bench/lib.py.

    server-bench/bulk.py --module target/release/libimid.so [--servers redis7,valkey9]
                  [--sizes 0,100000,2000000] [--rounds 3] [--calls K] --json out.json
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

PAIRS = 2000  # new field/value pairs per measured call
LOAD_BATCH = 1000  # pairs per loading call
TARGET = 1.25
KINDS = [("map", "SEQ.HSET"), ("hash", "HSET")]


def load(srv, command, n):
    """The key `m` with n fields f:<8 digits> = 3,000,000,000 + i, LOAD_BATCH per call."""
    calls = []
    for start in range(0, n, LOAD_BATCH):
        argv = [command, "m"]
        for i in range(start, min(n, start + LOAD_BATCH)):
            argv += [f"f:{i:08d}", str(3_000_000_000 + i)]
        calls.append(argv)
    if calls:
        srv.pipe(calls)


def bulk_calls(command, n, calls):
    """`calls` calls of PAIRS new pairs each: into `m`, or into a new key each when n is 0."""
    out = []
    for b in range(calls):
        argv = [command, "m" if n else f"e:{b}"]
        for i in range(b * PAIRS, (b + 1) * PAIRS):
            argv += [f"b:{i:08d}", str(i)]
        out.append(argv)
    return out


def instructions(module, workdir, bin, command, n, calls):
    """Instructions per call inside call(), the loading not counted."""
    srv = lib.Callgrind(f"cg-{command}-{n}-{time.monotonic_ns()}", workdir, module, bin=bin,
                        instrument=False)
    try:
        load(srv, command, n)
        srv.instrument("on")
        srv.pipe(bulk_calls(command, n, calls))
        srv.instrument("off")
    finally:
        srv.stop(300)
    total = srv.total()
    os.remove(srv.out)
    return total / calls


def server_time(module, workdir, bin, command, n, calls, prefix):
    """µs per call from INFO commandstats, reset once the key is loaded."""
    srv = lib.Server(module, workdir=workdir, bin=bin, prefix=prefix)
    load(srv, command, n)
    srv.cli("CONFIG", "RESETSTAT")
    srv.pipe(bulk_calls(command, n, calls))
    stats = srv.info("commandstats")
    srv.stop()
    row = stats.get(f"cmdstat_{command.lower()}", "")
    fields = dict(kv.split("=", 1) for kv in row.split(",") if "=" in kv)
    if int(fields.get("calls", -1)) != calls:
        raise RuntimeError(f"{command}: commandstats {row!r}, expected {calls} calls")
    return float(fields["usec_per_call"])


def render(data):
    """The results as markdown lines (also used by server-bench/report.py)."""
    out = [
        "| server | fields before | calls | SEQ.HSET instr/call | HSET instr/call | map / hash "
        "(instr) | SEQ.HSET µs/call | HSET µs/call | map / hash (time) | target ≤ "
        f"{data['target']} |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for s in data["servers"]:
        if s.get("skipped"):
            out.append(f"| {s['name']} | skipped: {s['skipped']} | | | | | | | | |")
            continue
        for r in s["rows"]:
            ri = r["instr"]["map"] / r["instr"]["hash"]
            t = r["time"]
            rt = t["ratio"]
            status = "met" if min(ri, rt) <= data["target"] else "short"
            out.append(
                f"| {s['version']} | {r['n']:,} | {r['calls']} | {r['instr']['map']:,.0f} | "
                f"{r['instr']['hash']:,.0f} | {ri:.2f} | {t['map']:,.0f} | {t['hash']:,.0f} | "
                f"{rt:.2f} ({min(t['ratios']):.2f}–{max(t['ratios']):.2f}) | {status} |")
    out += ["", "Times: medians of the rounds; the time ratio is the median of the per-round "
            "ratios (their range in brackets)" + ("" if data.get("realtime") else
                                                  "; the servers ran at normal priority") + "."]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", required=True)
    ap.add_argument("--servers", default="redis7,valkey9",
                    help="names for scripts/servers.sh (default: redis7,valkey9)")
    ap.add_argument("--sizes", default="0,100000,2000000")
    ap.add_argument("--calls", type=int, default=0,
                    help="measured calls per figure (default: max(10, N / 4000))")
    ap.add_argument("--rounds", type=int, default=3, help="server-time rounds (default 3)")
    ap.add_argument("--no-rt", action="store_true", help="no real-time priority")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    module = lib.module_path(args.module)
    lib.need("valgrind", "callgrind_control", "redis-cli")
    sizes = [int(x) for x in args.sizes.split(",")]
    prefix = [] if args.no_rt else lib.realtime(10)
    lib.stop_on_signal()
    servers = []
    with tempfile.TemporaryDirectory(prefix="imid-bulk-") as workdir:
        try:
            for name, bin, version in lib.each_server(args.servers, servers):
                rows = []
                for n in sizes:
                    calls = args.calls or max(10, n // 4000)
                    instr = {kind: instructions(module, workdir, bin, cmd, n, calls)
                             for kind, cmd in KINDS}
                    times = {"map": [], "hash": []}
                    for r in range(args.rounds):
                        for kind, cmd in (KINDS if r % 2 == 0 else KINDS[::-1]):
                            times[kind].append(server_time(module, workdir, bin, cmd, n, calls,
                                                           prefix))
                    ratios = [m / h for m, h in zip(times["map"], times["hash"])]
                    row = {"n": n, "calls": calls, "instr": instr,
                           "time": {"map": statistics.median(times["map"]),
                                    "hash": statistics.median(times["hash"]),
                                    "maps": times["map"], "hashes": times["hash"],
                                    "ratios": ratios, "ratio": statistics.median(ratios)},
                           "load": os.getloadavg()[0]}
                    rows.append(row)
                    print(f"  {version}, {n:,} fields, {calls} calls: instr {instr['map']:,.0f} / "
                          f"{instr['hash']:,.0f} = {instr['map'] / instr['hash']:.2f}; µs "
                          f"{row['time']['map']:,.0f} / {row['time']['hash']:,.0f} = "
                          f"{row['time']['ratio']:.2f} (load {row['load']:.1f})",
                          file=sys.stderr, flush=True)
                servers.append({"name": name, "version": version, "rows": rows})
        finally:
            lib.stop_all()
    data = {"sizes": sizes, "pairs": PAIRS, "target": TARGET, "rounds": args.rounds,
            "realtime": bool(prefix), "servers": servers}
    print("\n".join(render(data)))
    with open(args.json, "w") as f:
        json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
