#!/usr/bin/env python3
"""Turns server-bench/server.py's JSON and criterion's estimates into the results page.

Everything above the ANALYSIS marker is regenerated; the hand-written analysis below it (what
limits a target that is short, profiles) is kept as it is, so a re-run refreshes the numbers
without losing the explanation. Standard library only.
"""

import argparse
import json
import os
import statistics
import sys

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the imports below
# Each script's own table of its JSON, so that the page shows what the script prints.
from instructions import render as render_floor  # noqa: E402  (server-bench/, beside this one)
from maps import render as render_maps  # noqa: E402
from bulk import render as render_bulk  # noqa: E402
from pauses import render as render_pauses  # noqa: E402
from fence import render as render_fence  # noqa: E402

MARKER = "<!-- analysis: hand-written below this line; server-bench/report.py keeps it -->"

# Criterion bench ids (as benches/core.rs names them) in table order, with the target each has.
CRITERION = [
    ("msgid/encode (fields -> text)", 25),
    ("msgid/decode (text -> fields)", 25),
    ("msgid/generate (clock + next + encode)", None),
    ("javahash/hash22 (5-17 byte targets)", None),
    ("openid/plain encode", None),
    ("openid/plain decode", None),
    ("openid/keyed encode", None),
    ("openid/keyed decode", None),
    ("openid/key schedule (per config change)", None),
    # UID: >= 20 million IDs/s in-process is 50 ns per ID (the target).
    ("uid/next (clock reading given)", 50),
    ("uid/generate (clock + next, standalone)", None),
    ("uid/clock read alone (system_now_ms)", None),
    ("uid/generate (clock + slot + next, cluster)", None),
    ("uid/generate batch of 100 (per batch)", 5000),
    ("uid/decode", None),
]

# Throughput targets: (row, pipeline or None for both, reference row, minimum ratio).
TARGETS = [
    ("SEQ.NEXT (random keys)", 16, "INCR (random keys)", 0.9),
    ("MSGID.GEN", None, "PING", 0.9),
    ("UID.GEN", None, "PING", 0.9),
    ("MSGID.DECODE", None, "PING", 0.9),
    ("OPENID.ENC (plain)", None, "PING", 0.9),
    ("OPENID.DEC (plain)", None, "PING", 0.9),
    ("OPENID.ENC (keyed)", None, "PING", 0.9),
    ("OPENID.DEC (keyed)", None, "PING", 0.9),
    ("flow: imid (SEQ.NEXT+MSGID.GEN+ZADD+cap)", None,
     "flow: INCR+Lua ID (INCR+TIME+ZADD+cap)", 0.9),
    ("flow: imid (SEQ.NEXT+MSGID.GEN+ZADD+cap)", None, "flow: INCR only (INCR+ZADD+cap)", 0.9),
]
MEMORY_TARGET = 90


def criterion_dir_name(bench_id):
    # Criterion replaces characters that are awkward in paths ('/' separates group and name).
    group, _, name = bench_id.partition("/")
    clean = "".join("_" if c in '\\:*?"<>|' else c for c in name).replace(">", "_")
    return os.path.join(group + "_" + clean)


def criterion_rows(root):
    rows = []
    for bench_id, target in CRITERION:
        path = os.path.join(root, criterion_dir_name(bench_id), "new", "estimates.json")
        if not os.path.exists(path):
            rows.append((bench_id, None, None, None, target))
            continue
        est = json.load(open(path))["mean"]
        ci = est["confidence_interval"]
        rows.append((bench_id, est["point_estimate"], ci["lower_bound"], ci["upper_bound"],
                     target))
    return rows


def floor_section(path):
    """Instructions per call of every command against server-bench/floor.c (server-bench/instructions.py)."""
    out = ["## Floor: instructions per command (callgrind)", ""]
    if not path:
        return out + ["Skipped in this run.", ""]
    f = json.load(open(path))
    out += [
        "`server-bench/instructions.py`: redis-server under callgrind, counting only inside Redis's "
        f"`call()`, {f['requests']:,} commands at pipeline {f['pipeline']} from one client, a "
        "fresh server per figure with imid and the floor module both loaded; "
        f"{f['server'].split(' sha=')[0]}. The floor (`server-bench/floor.c`) does each command's work "
        "as plainly as C against `redismodule.h` allows: same arguments, checks, state, reply "
        "and side effects on keys (WATCH, keyspace event, replication; writes replicate as "
        "called). Before measuring, each command line ran once on an ordinary server: no "
        "error replies, and where the reply is deterministic imid's and the floor's are equal. "
        f"Writes use random keys from a keyspace of {f['write_keys']:,} (nearly every call "
        f"creates its key); SEQ.GET and SEQ.MGET read {f['seed_keys']:,} existing keys loaded "
        "from an RDB file. The map rows address random fields of one map of "
        f"{f.get('map_fields', 0):,} fields loaded from the same file (the floor's map, and "
        "Redis's hash of the same fields for HINCRBY and HGET), after one SEQ.HNEXT (HINCRBY) "
        "of every field whose instructions are not counted, except in the \"first call per "
        "field after a load\" row. "
        "Instruction counts do not move with the machine's load; rows on random keys vary by "
        "up to ~2% between runs (redis-benchmark draws other keys, so the keyspace grows "
        "differently).",
        "",
    ]
    out += render_floor(f)
    out.append("")
    if f.get("notes"):
        out += [f"- {n}" for n in f["notes"]] + [""]
    return out


def maps_section(path):
    """Sequence maps against Redis hashes (server-bench/maps.py)."""
    out = ["## Sequence maps: memory per counter, RDB save and load", ""]
    if not path:
        return out + ["Skipped in this run.", ""]
    d = json.load(open(path))
    out += [
        "`server-bench/maps.py`: a fresh server per figure; `used_memory` after loading "
        f"{d['counters']:,} counters as keys of N counters each, minus before, divided by the "
        "counters: imid sequence maps (`SEQ.HSET`) against Redis hashes (`HSET`) with the same "
        "10-byte field names `f:00000000`.. and values "
        f"{d['value_base']:,} + i (below 2^32). The figure includes the keys themselves and the "
        "keyspace table. RDB: `SAVE` timed from the client, load time as the server logs it, "
        "medians of repeated runs; both move with the machine's load.",
        "",
    ]
    return out + render_maps(d) + [""]


def bulk_section(path):
    """A SEQ.HSET of 2,000 new fields against HSET of the same pairs (server-bench/bulk.py)."""
    out = ["## Sequence maps: bulk writes", ""]
    if not path:
        return out + ["Skipped in this run.", ""]
    d = json.load(open(path))
    out += [
        "`server-bench/bulk.py` (since 0.3.0): a fresh server gets a sequence map (`SEQ.HSET`, "
        "1,000 pairs per call) or a Redis hash (`HSET`) of N fields `f:<8 digits>`, then the "
        f"measured calls each set {d['pairs']:,} new fields `b:<8 digits>` (at N = 0 each call "
        "creates its own key); at 2,000,000 fields the calls add a million, a whole growth of "
        "the map's index by half, so the figure is its average, not one phase. Instructions: "
        "inside Redis's `call()` under callgrind, instrumentation on only for the measured "
        "calls. Time: `usec_per_call` from `INFO commandstats`, reset after the loading, "
        f"{d['rounds']} round(s) on fresh servers, map and hash in turns. Target: at most "
        f"{d['target']} x HSET in instructions or in time.",
        "",
    ]
    return out + render_bulk(d) + [""]


def pauses_section(path):
    """The worst single call while a map grows, widens and shrinks (server-bench/pauses.py)."""
    out = ["## Sequence maps: the worst single call", ""]
    if not path:
        return out + ["Skipped in this run.", ""]
    d = json.load(open(path))
    out += [
        "`server-bench/pauses.py`: on a fresh server per kind, one key grows from 0 to "
        f"{d['fields']:,} fields by one call per field (`SEQ.HNEXT m f:<i>`, against `HINCRBY h "
        f"f:<i> 1`), widens every value (`SEQ.HNEXT ... COUNT 1000000`, `HINCRBY ... 1000000`), "
        f"takes {d['bulk']} calls of {d['bulk_pairs']:,} new pairs (`SEQ.HSET`, `HSET`), then "
        "loses every field one call at a time (`SEQ.HDEL`, `HDEL`), pipelined. The worst call "
        "and the calls of 1 ms or more and 5 ms or more, from the slowlog (execution inside the "
        f"server, kept from {d['slower_than_us']} µs). The servers ran "
        + ("at real-time priority (`chrt -f 1`), so that a preemption by other work on the "
           "machine does not count as a slow call." if d.get("realtime") else
           "at normal priority: a call preempted by other work on the machine counts as slow.")
        + " A bulk call does 2,000 inserts: it takes milliseconds for both kinds.",
        "",
    ]
    return out + render_pauses(d) + [""]


def fence_section(path):
    """Throughput with one replica attached, the fence off against on (server-bench/fence.py)."""
    out = ["## The fence: throughput with one replica attached", ""]
    if not path:
        return out + ["Skipped in this run.", ""]
    d = json.load(open(path))
    out += [
        "`server-bench/fence.py` (since 0.3.0): a fresh primary and one plain replica per figure, "
        "each in a fresh directory, `imid.fence-replicas` 0 (off) against 1 (on); "
        "redis-benchmark on loopback, not pinned, or raw RESP for the batches. IDMP: "
        "`SEQ.NEXT k:__rand_int__ IDMP t__rand_int__`, a new key and token per call. With the "
        "fence on, each IDMP answer waits for the replica's acknowledgement, and a blocked "
        "client's pipeline stops until it is released: per connection one replica round trip "
        "per IDMP call whatever the pipeline depth; several connections share round trips, and "
        "a MULTI batch answers at once and waits once, in `WAIT`. These figures move with the "
        "machine's load.",
        "",
    ]
    return out + render_fence(d) + [""]


def fmt_rps(v):
    return f"{v:,.0f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-json", required=True)
    ap.add_argument("--criterion", help="criterion output dir (target/criterion); omit to skip")
    ap.add_argument("--floor-json", help="server-bench/instructions.py's JSON; omit to skip")
    ap.add_argument("--maps-json", help="server-bench/maps.py's JSON; omit to skip")
    ap.add_argument("--pauses-json", help="server-bench/pauses.py's JSON; omit to skip")
    ap.add_argument("--bulk-json", help="server-bench/bulk.py's JSON; omit to skip")
    ap.add_argument("--fence-json", help="server-bench/fence.py's JSON; omit to skip")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="imid benchmark results")
    args = ap.parse_args()

    d = json.load(open(args.server_json))
    m = d["machine"]
    tp = {}
    for k, v in d["throughput"].items():
        name, p = k.rsplit("|", 1)
        tp[(name, int(p))] = v
    med = {k: statistics.median(v) for k, v in tp.items()}
    names = d["names"]

    out = [f"# {args.title}", ""]
    out += [
        "Produced by `make bench` (`server-bench/run.sh`); numbers from one machine, one run. "
        "Re-run to compare on yours.",
        "",
        "## Machine and versions",
        "",
        f"- CPUs: {m['nproc']} × {m['cpu']}",
        f"- kernel: {m['kernel']}",
        f"- {m['redis']}",
        f"- {m['rustc']}",
        f"- module: git commit `{m['commit']}`" + (" (with uncommitted changes)" if m["dirty"]
                                                  else ""),
        f"- load average (1/5/15 min) before the server-level run: {' / '.join(m['load_before'])}"
        f", after: {' / '.join(m['load_after'])}",
        "- server and client " + ("pinned to CPU 0 and CPU 1 (`taskset`)" if d["pinned"]
                                  else "not pinned (fewer than 2 CPUs or no taskset)"),
        "",
    ]
    out += floor_section(args.floor_json)
    out += maps_section(args.maps_json)
    out += bulk_section(args.bulk_json)
    out += pauses_section(args.pauses_json)
    out += fence_section(args.fence_json)
    out += [
        "## Throughput (redis-benchmark, loopback, 50 clients)",
        "",
        f"{d['rounds']} interleaved rounds (each round runs every command once, at pipeline 1 "
        f"then 16); {d['requests']:,} requests per run at pipeline 1, {5 * d['requests']:,} at "
        f"pipeline 16; random keys from a keyspace of {d['keyspace']:,} (`-r`). Requests/s: "
        "median of the rounds, and the spread (min–max). Ratios compare medians at the same "
        "pipeline depth.",
        "",
    ]
    for p in (1, 16):
        out += [
            f"### Pipeline {p}",
            "",
            "| command | req/s (median) | spread (min–max) | × PING | × INCR |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        ping = med[("PING", p)]
        incr = med[("INCR (random keys)", p)]
        for name in names:
            v = tp[(name, p)]
            out.append(
                f"| {name} | {fmt_rps(med[(name, p)])} | {fmt_rps(min(v))}–{fmt_rps(max(v))} "
                f"| {med[(name, p)] / ping:.2f} | {med[(name, p)] / incr:.2f} |"
            )
        out.append("")

    out += ["### Targets", "", "| target | pipeline | ratio (medians) | status |",
            "| --- | ---: | ---: | --- |"]
    for row, pipe, ref, minimum in TARGETS:
        for p in ([pipe] if pipe else [1, 16]):
            r = med[(row, p)] / med[(ref, p)]
            out.append(f"| {row} ≥ {minimum} × {ref} | {p} | {r:.2f} | "
                       f"{'met' if r >= minimum else 'short'} |")
    out.append("")

    out += [
        "### The send-flow scripts",
        "",
        "Each is run as `EVALSHA <sha> 2 {c:<rand>}:<seq key> {c:<rand>}:inbox:<flow> 1 "
        f"{d['cap']}` (KEYS: sequence key, inbox ZSET; ARGV: channel type, inbox cap). "
        "redis-benchmark draws each `__rand_int__` independently, so the sequence key and the "
        "inbox of one call belong to two random conversations: the same work as one "
        "conversation's pair. Inboxes reach the cap quickly, so most calls trim one member.",
        "",
    ]
    for label, key in (("imid", "imid"), ("INCR + Lua-built ID", "incr_id"),
                       ("INCR only", "incr")):
        out += [f"{label}:", "", "```lua", d["scripts"][key].strip(), "```", ""]

    out += [
        "## Memory per key",
        "",
        "A fresh server per row; `used_memory` after loading N keys `k:00000000`.. minus before, "
        "divided by N. Values 3,000,000,000 + i (beyond Redis's shared integers, like a "
        "long-lived sequence). The sequence keys are written with `SEQ.SET`, the string keys "
        "with `INCRBY` (an int-encoded string, the cheapest way plain Redis holds a counter). "
        "The per-key figure includes the keyspace hash table's bucket array. `MEMORY USAGE` "
        "of one key is shown for comparison: it leaves out allocator rounding and the table.",
        "",
        "| keys | N | used_memory delta (bytes) | bytes per key | MEMORY USAGE of one key |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, n, delta, per, usage in d["memory"]:
        out.append(f"| {label} | {n:,} | {delta:,} | {per:.1f} | {usage} |")
    seq_per = d["memory"][0][3]
    out += ["", f"Target: a sequence key ≤ {MEMORY_TARGET} bytes: "
            f"{'met' if seq_per <= MEMORY_TARGET else 'short'} ({seq_per:.1f}).", ""]

    out += ["## In-process (criterion)", ""]
    if args.criterion:
        out += [
            "`cargo bench --features system-alloc --bench core`: the core alone, without "
            "Redis's request handling. Mean time per operation and its 95% confidence interval.",
            "",
            "| bench | ns per op | 95% CI | target |",
            "| --- | ---: | ---: | --- |",
        ]
        for bench_id, mean, lo, hi, target in criterion_rows(args.criterion):
            if mean is None:
                out.append(f"| {bench_id} | not run | | |")
                continue
            t = ""
            if target:
                t = f"< {target} ns: {'met' if mean < target else 'short'}"
            out.append(f"| {bench_id} | {mean:.1f} | {lo:.1f}–{hi:.1f} | {t} |")
    else:
        out.append("Skipped in this run.")
    out.append("")

    analysis = ""
    if os.path.exists(args.out):
        text = open(args.out).read()
        if MARKER in text:
            analysis = text.split(MARKER, 1)[1]
    out.append(MARKER)
    page = "\n".join(out) + (analysis if analysis else "\n")
    with open(args.out, "w") as f:
        f.write(page)
    # The tables (not the kept analysis) also go to stdout for whoever ran `make bench`.
    sys.stdout.write("\n".join(out[:-1]) + "\n")


if __name__ == "__main__":
    main()
