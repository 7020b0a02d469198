#!/usr/bin/env python3
"""Sequence maps against Redis hashes: memory per counter and RDB save/load time.

Memory: on a fresh server, `used_memory` before and after loading --counters counters as keys
of N counters each (1,000,000 counters: 10,000 keys of 100, 100 keys of 10,000, one key of
1,000,000), divided by the counters: imid sequence maps (SEQ.HSET) against Redis hashes (HSET)
with the same 10-byte field names (f:00000000 ...) and values (3,000,000,000 + i: below 2^32
and beyond Redis's shared integers, like long-lived sequences), for every N of --sizes. Many
keys for the small sizes: a server's own allocations while it warms up (a few kB) would
otherwise weigh on 100 counters. On every server of the matrix
(Redis 7.0, Redis 8.2, Valkey 8.0, Valkey 9.1; scripts/servers.sh fetches them, a server that
cannot be had is skipped and said so). Redis keeps a hash of up to 128 fields (its default
hash-max-listpack-entries) as a listpack, beyond that as a hashtable.

RDB: with --rdb-fields N (one of --sizes), the server holding the N-counter key then runs SAVE
(timed from the client: Redis's save runs in the command) and is restarted on that file (load
time as the server logs it: "DB loaded from disk: <s> seconds"); --rdb-rounds times each, the
median reported. Timings move with the machine's load; memory figures do not.

Standard library only; servers from server-bench/lib.py.

    server-bench/maps.py --module target/release/libimid.so [--servers redis7,valkey9]
                  [--sizes 100,10000,1000000] [--rdb-fields 1000000] --json out.json
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

VALUE_BASE = 3_000_000_000
BATCH = 1000  # field/value pairs per SEQ.HSET / HSET command
KINDS = [("map", "SEQ.HSET", "SEQ.HLEN"), ("hash", "HSET", "HLEN")]


def fill(srv, command, n, keys):
    """`keys` keys k:<i> of n fields f:<8 digits> = VALUE_BASE + i, BATCH pairs per command."""
    def calls():
        for k in range(keys):
            for start in range(0, n, BATCH):
                argv = [command, f"k:{k}"]
                for i in range(start, min(n, start + BATCH)):
                    argv += [f"f:{i:08d}", str(VALUE_BASE + i)]
                yield argv
    srv.pipe(calls())


def used_memory(srv):
    """used_memory once it holds still: a fresh server's first INFO calls allocate (~25 kB)."""
    last = None
    for _ in range(20):
        now = int(srv.info("memory")["used_memory"])
        if now == last:
            return now
        last = now
    return last


def load_seconds(log):
    """The last "DB loaded from disk: <s> seconds" of a server log."""
    found = re.findall(r"DB loaded from disk: ([0-9.]+) seconds", open(log).read())
    if not found:
        raise RuntimeError(f"no load time in {log}")
    return float(found[-1])


def measure(module, workdir, bin, n, counters, kind, command, length, rdb_rounds):
    """One fresh server: memory per counter in keys of n counters of `kind`; with rdb_rounds,
    SAVE and load times."""
    keys = max(1, counters // n)
    srv = lib.Server(module, workdir=workdir, bin=bin)
    # The command's first call allocates its statistics entry: not part of the counters.
    fill(srv, command, 1, 1)
    srv.cli("DEL", "k:0")
    before = used_memory(srv)
    fill(srv, command, n, keys)
    after = used_memory(srv)
    if int(srv.cli(length, "k:0")) != n or int(srv.cli("DBSIZE")) != keys:
        raise RuntimeError(f"{kind}: not {keys} keys of {n}")
    usage = int(srv.cli("MEMORY", "USAGE", "k:0", "SAMPLES", "0"))
    encoding = srv.cli("OBJECT", "ENCODING", "k:0") if kind == "hash" else "module"
    row = {"kind": kind, "n": n, "keys": keys, "delta": after - before,
           "per": (after - before) / (n * keys), "usage": usage, "encoding": encoding}
    if rdb_rounds:
        saves, loads = [], []
        for _ in range(rdb_rounds):
            t = time.monotonic()
            if srv.cli("SAVE") != "OK":
                raise RuntimeError("SAVE failed")
            saves.append(time.monotonic() - t)
        row["rdb_bytes"] = os.path.getsize(os.path.join(srv.dir, "dump.rdb"))
        srv.stop()
        for _ in range(rdb_rounds):
            srv = lib.Server(module, dir=srv.dir, bin=bin)
            if int(srv.cli(length, "k:0")) != n:
                raise RuntimeError(f"{kind}: {n} counters saved, {srv.cli(length, 'k:0')} loaded")
            loads.append(load_seconds(srv.log))
            srv.stop()
        row["save_s"] = statistics.median(saves)
        row["load_s"] = statistics.median(loads)
    srv.stop()
    return row


def render(data):
    """The results as markdown lines (also used by server-bench/report.py)."""
    out = [
        "| server | counters per key | keys | sequence map: bytes per counter | Redis hash: bytes "
        "per counter | hash encoding | map / hash |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for s in data["servers"]:
        if s.get("skipped"):
            out.append(f"| {s['name']} | skipped: {s['skipped']} | | | | | |")
            continue
        by = {(r["kind"], r["n"]): r for r in s["rows"]}
        for n in data["sizes"]:
            m, h = by[("map", n)], by[("hash", n)]
            out.append(f"| {s['version']} | {n:,} | {m['keys']:,} | {m['per']:.1f} | {h['per']:.1f} | "
                       f"{h['encoding']} | {m['per'] / h['per']:.2f} |")
    targets = [s for s in data["servers"] if not s.get("skipped") and s["name"] in
               ("redis7", "valkey9")]
    lines = []
    for s in targets:
        for r in s["rows"]:
            if r["kind"] == "map" and r["n"] in (10_000, 1_000_000):
                ok = "met" if r["per"] <= data["target"] else "short"
                lines.append(f"- {s['version']}, {r['n']:,} counters per map: {r['per']:.1f}: {ok}")
    if lines:
        out += ["", f"Target: a map ≤ {data['target']} bytes per counter at 10,000 and 1,000,000 "
                "counters on Redis 7.0 and Valkey 9.1:", ""] + lines
    rdb = [(s, r) for s in data["servers"] if not s.get("skipped") for r in s["rows"]
           if "save_s" in r]
    if rdb:
        out += ["", "| server | key | counters | RDB bytes | SAVE (s, median) | load (s, median) |",
                "| --- | --- | ---: | ---: | ---: | ---: |"]
        for s, r in rdb:
            out.append(f"| {s['version']} | {'sequence map' if r['kind'] == 'map' else 'Redis hash'}"
                       f" | {r['n'] * r['keys']:,} | {r['rdb_bytes']:,} | {r['save_s']:.3f} | "
                       f"{r['load_s']:.3f} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", required=True)
    ap.add_argument("--servers", default=",".join(lib.MATRIX),
                    help="names for scripts/servers.sh (default: the whole matrix)")
    ap.add_argument("--sizes", default="100,10000,1000000")
    ap.add_argument("--counters", type=int, default=1_000_000,
                    help="counters per figure, in keys of each size (default 1000000)")
    ap.add_argument("--rdb-fields", type=int, default=1_000_000,
                    help="time SAVE and load for this size (0: not at all)")
    ap.add_argument("--rdb-rounds", type=int, default=3)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    module = lib.module_path(args.module)
    sizes = [int(x) for x in args.sizes.split(",")]
    lib.stop_on_signal()
    servers = []
    with tempfile.TemporaryDirectory(prefix="imid-maps-") as workdir:
        try:
            for name, bin, version in lib.each_server(args.servers, servers):
                rows = []
                for n in sizes:
                    for kind, command, length in KINDS:
                        rounds = args.rdb_rounds if n == args.rdb_fields else 0
                        r = measure(module, workdir, bin, n, args.counters, kind, command,
                                    length, rounds)
                        rows.append(r)
                        extra = (f", SAVE {r['save_s']:.3f} s, load {r['load_s']:.3f} s"
                                 if rounds else "")
                        print(f"  {version}: {r['keys']:,} {kind}(s) of {n:,}: {r['per']:.1f} B "
                              "per counter"
                              f"{extra}", file=sys.stderr, flush=True)
                servers.append({"name": name, "version": version, "rows": rows})
        finally:
            lib.stop_all()
    data = {"sizes": sizes, "counters": args.counters, "value_base": VALUE_BASE, "target": 24,
            "servers": servers}
    print("\n".join(render(data)))
    with open(args.json, "w") as f:
        json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
