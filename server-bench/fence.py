#!/usr/bin/env python3
"""Throughput with one replica attached, imid's fence off against on (its targets since 0.3.0).

Every figure comes from a fresh pair: a primary (`imid.fence-replicas` 0 = off, 1 = on) and one
plain replica, both with the module, each in a fresh directory (a replica's full sync writes an
RDB file even with `--save ''`; a primary started where one lies loads it, is "inherited", and
then every new sequence's first call waits for the fence). After one warm-up call (the fence's
first acknowledgement) and `WAIT 1 1000` (the replica's stream started, fence off too), one load
runs:

- hot: `SEQ.NEXT hot` (one key), redis-benchmark -c 1 -P 16. Target: on >= 0.9 x off.
- idmp c1 P1, c1 P16, c16 P1: `SEQ.NEXT k:__rand_int__ IDMP t__rand_int__` (a new key and token
  per call, keyspace 10^9). Target: on >= 0.5 x off. A blocked client's pipeline stops until it
  is released, so with the fence on a connection gets one replica round trip per IDMP call
  whatever its pipeline depth; several connections share round trips.
- batch plain: 16 such calls pipelined per batch, one connection, raw RESP; batch multi: MULTI,
  the same 16, EXEC, `WAIT 1 1000` per batch (the batch answers without waiting inside the
  transaction, then one round trip for the whole batch: docs/durability.md). Error replies are
  counted, not fatal (the first is kept).

The machine may be shared and noisy: rounds alternate off and on back to back (the order flips
every round), each round reports the ratio on / off of its own pair, and the summary gives the
medians over rounds, the median of the per-round ratios, and the load average before each round.
Every run is bounded in calls and in time.

    server-bench/fence.py [--module target/release/libimid.so] [--rounds 5] [--smoke] [--json out.json]

REDIS_SERVER=<binary> runs another server (the replica is the same binary). Standard library only.
"""

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

IDMP = ["SEQ.NEXT", "k:__rand_int__", "IDMP", "t__rand_int__"]
KEYSPACE = 1_000_000_000
RUN_TIMEOUT_S = 120  # the most any one load may take

# (name, what, kind, clients, pipeline, full calls, smoke calls, target ratio on/off or None)
LOADS = [
    ("hot P16", "`SEQ.NEXT hot`, -c 1 -P 16", "bench", 1, 16, 200_000, 2_000, 0.9),
    ("idmp c1 P1", "IDMP, -c 1 -P 1", "bench", 1, 1, 5_000, 200, 0.5),
    ("idmp c1 P16", "IDMP, -c 1 -P 16", "bench", 1, 16, 10_000, 400, 0.5),
    ("idmp c16 P1", "IDMP, -c 16 -P 1", "bench", 16, 1, 40_000, 800, 0.5),
    ("batch plain", "16 IDMP calls pipelined per batch, 1 connection", "plain", 1, 16, 6_400,
     160, None),
    ("batch multi", "MULTI + 16 IDMP calls + EXEC + `WAIT 1 1000` per batch, 1 connection",
     "multi", 1, 16, 6_400, 160, None),
]


def info_int(text, field):
    m = re.search(rf"^{field}:(\d+)", text, re.M)
    if not m:
        raise RuntimeError(f"INFO has no {field}")
    return int(m.group(1))


def flat_errors(reply):
    """Error replies in a reply (an EXEC's array holds its commands' replies)."""
    if isinstance(reply, lib.Error):
        return [reply]
    if isinstance(reply, list):
        return [e for r in reply for e in flat_errors(r)]
    return []


# ---------------------------------------------------------------------------------------------
# Servers

def server_kw(server, module, d, fence=None):
    """lib.Server's arguments: in directory d, imid.fence-replicas = fence if given."""
    args = ["--repl-diskless-sync-delay", "0"]
    if fence is not None:
        args += ["--imid.fence-replicas", fence]
    return {"bin": server, "modules": [module], "dir": d, "dbfilename": "dump.rdb", "log": "log",
            "args": args, "timeout": 60}


class Pair:
    """A fresh primary and one replica, each in a fresh directory."""

    def __init__(self, server, module, workdir, fence):
        self.pdir = tempfile.mkdtemp(dir=workdir, prefix="p-")
        self.rdir = tempfile.mkdtemp(dir=workdir, prefix="r-")
        self.primary = lib.Server(**server_kw(server, module, self.pdir, fence))
        self.replica = lib.start_replica(self.primary, online_timeout=60,
                                         **server_kw(server, module, self.rdir))
        self.port, self.rport = self.primary.port, self.replica.port
        c = lib.Client(self.port)
        if c("CONFIG", "GET", "imid.fence-replicas")[1] != fence:
            raise RuntimeError("imid.fence-replicas not as asked")
        # The fence's first acknowledgement (blocks until it comes, fence on). A refusal (no
        # acknowledgement within imid.fence-timeout) is retried twice and counted: seen on a
        # fresh Valkey 9.1 pair with the replica already online.
        self.warmup_refusals = 0
        while True:
            r = c("SEQ.NEXT", "warm", "IDMP", "warm")
            if not isinstance(r, lib.Error):
                break
            self.warmup_refusals += 1
            if self.warmup_refusals == 3:
                raise RuntimeError(f"warm-up refused 3 times: {r}")
        # Streaming starts with the replica's first acknowledgement: after a full sync the
        # primary holds the replication stream back until the replica's first REPLCONF ACK
        # (sent once a second, or at once on a GETACK), although ROLE and INFO already say
        # "online". With the fence on its first wait asks for one; with it off, without this
        # WAIT, the first second of a load would run with nothing sent to the replica.
        deadline = time.monotonic() + 60
        # (WAIT answering 1: the replica has applied everything before it.)
        while c("WAIT", "1", "1000") != 1:
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not acknowledge within 60 s")
        c.close()

    def caught_up(self):
        """Waits until the replica has applied everything the primary propagated so far; the
        seconds it took (None: not within 60 s)."""
        t0 = time.perf_counter()
        c, r = lib.Client(self.port), lib.Client(self.rport)
        try:
            want = info_int(c("INFO", "replication"), "master_repl_offset")
            deadline = time.monotonic() + 60
            while info_int(r("INFO", "replication"), "slave_repl_offset") < want:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.001)
            return time.perf_counter() - t0
        finally:
            c.close()
            r.close()

    def stats(self):
        """The fence's counters (INFO imid), error replies, ROLE and REPLCONF calls."""
        with lib.Client(self.port) as c:
            got = lib.counters(c, "imid", "stats", "commandstats")
        out = {k.removeprefix("imid_"): v for k, v in got.items()
               if k.startswith("imid_fence_") or k == "total_error_replies"}
        out.update({k.removeprefix("cmdstat_"): got[k] for k in ("cmdstat_role",
                                                                 "cmdstat_replconf") if k in got})
        return out

    def cpu(self):
        """CPU time (user + system, in clock ticks) of the primary and of the replica."""
        out = []
        for srv in (self.primary, self.replica):
            with open(f"/proc/{srv.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out.append(int(fields[11]) + int(fields[12]))  # utime, stime (fields 14, 15)
        return out

    def close(self):
        self.primary.stop(120)
        self.replica.stop(120)
        shutil.rmtree(self.pdir, ignore_errors=True)
        shutil.rmtree(self.rdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Loads

def bench(port, clients, pipeline, calls, argv):
    """redis-benchmark: (calls/s, p50 ms or None, first error line or None)."""
    rate, p50, text = lib.benchmark(port, argv, clients, pipeline, calls, KEYSPACE,
                                    timeout=RUN_TIMEOUT_S)
    err = next((ln for ln in text.replace("\r", "\n").splitlines() if "rror" in ln), None)
    return rate, p50, err


def batches(port, mode, calls):
    """16 IDMP calls per batch, plain pipelined or MULTI ... EXEC + WAIT 1 1000: (calls/s,
    error replies, the first error, calls answered before the first error or None)."""
    c = lib.Client(port, timeout=RUN_TIMEOUT_S)
    run = f"{os.getpid()}:{random.randrange(10**9)}"
    errors, first, clean = 0, None, None
    deadline = time.monotonic() + RUN_TIMEOUT_S
    t0 = time.perf_counter()
    done = 0
    for b in range(calls // 16):
        if time.monotonic() > deadline:
            raise RuntimeError(f"batch {mode}: {done} calls in {RUN_TIMEOUT_S} s, stopped")
        cmds = [("SEQ.NEXT", f"k:{random.randrange(KEYSPACE)}", "IDMP", f"t{run}:{b}:{i}")
                for i in range(16)]
        if mode == "multi":
            cmds = [("MULTI",)] + cmds + [("EXEC",), ("WAIT", "1", "1000")]
        c.send(*cmds)
        replies = [c.reply() for _ in cmds]
        if mode == "multi" and replies[-1] != 1 and not isinstance(replies[-1], lib.Error):
            replies.append(lib.Error(f"WAIT 1 1000 replied {replies[-1]} (no replica acknowledged)"))
        for e in flat_errors(replies):
            errors += 1
            if first is None:
                first, clean = e, done
        done += 16
    dt = time.perf_counter() - t0
    c.close()
    return done / dt, errors, first, clean


def measure(server, module, workdir, fence, load, smoke):
    name, _, kind, clients, pipeline, full, small, _ = load
    calls = small if smoke else full
    pair = Pair(server, module, workdir, fence)
    try:
        before = pair.stats()
        cpu0 = pair.cpu()
        t0 = time.perf_counter()
        if kind == "bench":
            argv = ["SEQ.NEXT", "hot"] if name.startswith("hot") else IDMP
            rate, p50, err = bench(pair.port, clients, pipeline, calls, argv)
            errors = clean = None
        else:
            rate, errors, err, clean = batches(pair.port, kind, calls)
            p50 = None
        # The calls/s counted until the replica had applied them all as well (redis-benchmark's
        # own figure stops at the last reply; with the fence off a replica on a busy machine
        # may still be far behind then).
        run_s = time.perf_counter() - t0
        lag = pair.caught_up()
        replicated = calls / (run_s + lag) if lag is not None else None
        cpu1 = pair.cpu()
        after = pair.stats()
    finally:
        pair.close()
    tick = os.sysconf("SC_CLK_TCK")
    cpu = [(b - a) / tick * 1e6 / calls for a, b in zip(cpu0, cpu1)]  # µs per call
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in
             ("fence_waits", "fence_timeouts", "fence_refused", "fence_unfenced_idmp", "role",
              "replconf", "total_error_replies")}
    return {"rate": rate, "replicated_rate": replicated,
            "replica_lag_s": lag, "p50": p50, "calls": calls, "error": err, "clean_calls": clean,
            "warmup_refusals": pair.warmup_refusals,
            "cpu_us_primary": cpu[0], "cpu_us_replica": cpu[1],
            "error_replies": delta["total_error_replies"] if errors is None else errors,
            **{k: v for k, v in delta.items() if k != "total_error_replies"}}


# ---------------------------------------------------------------------------------------------

def summarize(data):
    """Per load: medians over rounds off and on, the median per-round ratio on/off."""
    out = []
    for name, what, _, _, _, _, _, target in LOADS:
        rs = [r for r in data["rounds"] if name in r["loads"]]
        if not rs:
            continue
        off = [r["loads"][name]["off"]["rate"] for r in rs]
        on = [r["loads"][name]["on"]["rate"] for r in rs]
        ratios = [b / a for a, b in zip(off, on) if a]
        rep = {m: [r["loads"][name][m].get("replicated_rate") for r in rs] for m in ("off", "on")}
        rep = {m: statistics.median(v) if v and None not in v else None for m, v in rep.items()}
        lag = [r["loads"][name]["off"].get("replica_lag_s") for r in rs]
        out.append({"load": name, "what": what, "target": target,
                    "replicated": rep,
                    "lag_off_s": max(lag) if lag and None not in lag else None,
                    "off": statistics.median(off), "on": statistics.median(on),
                    "ratio_of_medians": statistics.median(on) / statistics.median(off),
                    "median_ratio": statistics.median(ratios), "ratios": ratios,
                    "waits_on": sum(r["loads"][name]["on"]["fence_waits"] for r in rs),
                    "timeouts_on": sum(r["loads"][name]["on"].get("fence_timeouts", 0)
                                       for r in rs),
                    "warmup_refusals_on": sum(r["loads"][name]["on"].get("warmup_refusals", 0)
                                              for r in rs),
                    "calls_on": sum(r["loads"][name]["on"]["calls"] for r in rs),
                    "errors_off": sum(r["loads"][name]["off"]["error_replies"] or 0 for r in rs),
                    "errors_on": sum(r["loads"][name]["on"]["error_replies"] or 0 for r in rs),
                    "cpu": {m: [statistics.median(r["loads"][name][m][k] for r in rs)
                                for k in ("cpu_us_primary", "cpu_us_replica")]
                            for m in ("off", "on")} if "cpu_us_primary" in rs[0]["loads"][name]["off"]
                    else None,
                    "clean_on": [r["loads"][name]["on"].get("clean_calls") for r in rs
                                 if r["loads"][name]["on"].get("clean_calls") is not None],
                    "first_error": next((r["loads"][name][m]["error"] for r in rs
                                         for m in ("off", "on") if r["loads"][name][m]["error"]),
                                        None)})
    return out


def render(data):
    """The results as markdown lines (also used by server-bench/report.py)."""
    s = {r["load"]: r for r in data["summary"]}
    loads = [r["loadavg"] for r in data["rounds"]]
    out = [
        f"{data['server']}; {len(data['rounds'])} round(s), each a fresh primary + replica pair "
        "per figure, fence off and on back to back (the order flips every round); load average "
        f"(1 min) before the rounds: {', '.join(loads)}. Calls/s: median over the rounds; "
        "ratio: on / off of the medians, and the median of the per-round ratios (the range in "
        "brackets). Waits: calls the fence made wait, over all rounds (fence on).",
        "",
        "| load | fence off, calls/s | fence on, calls/s | on / off (medians) | per-round on / off "
        "| waits / calls (on) | error replies off / on | target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    cpu = [r for r in data["summary"] if r.get("cpu")]
    replicated = [r for r in data["summary"] if r.get("replicated", {}).get("off")]
    for r in data["summary"]:
        t = r["target"]
        status = "" if t is None else (
            f"≥ {t} × off: {'met' if round(r['median_ratio'], 2) >= t else 'short'}")
        if r["errors_on"] or r["errors_off"]:
            status = "error replies: calls/s not comparable"
        rg = f"{min(r['ratios']):.2f}–{max(r['ratios']):.2f}"
        out.append(f"| {r['what']} | {r['off']:,.0f} | {r['on']:,.0f} | "
                   f"{r['ratio_of_medians']:.2f} | {r['median_ratio']:.2f} ({rg}) | "
                   f"{r['waits_on']:,} / {r['calls_on']:,} | {r['errors_off']:,} / "
                   f"{r['errors_on']:,} | {status} |")
    odd = [r for r in data["summary"] if r.get("timeouts_on") or r.get("warmup_refusals_on")]
    if odd:
        out += [""] + [f"- {r['what']}, fence on: {r.get('timeouts_on', 0):,} call(s) timed out "
                       f"(`imid_fence_timeouts`), and the warm-up call on a fresh pair was refused "
                       f"{r.get('warmup_refusals_on', 0)} time(s) (not acknowledged within "
                       "`imid.fence-timeout`), then retried." for r in odd]
    if replicated:
        out += ["", "Counted until the replica has applied every call as well (wall time from the "
                "load's start to the replica's offset reaching the primary's at its end; "
                "redis-benchmark's own figure above stops at the last reply, when a replica on a "
                "busy machine may still be far behind with the fence off). Calls/s, medians over "
                "the rounds; the replica's longest lag behind the last reply with the fence off:",
                "", "| load | fence off | fence on | on / off | replica behind at the end, "
                "fence off |", "| --- | ---: | ---: | ---: | ---: |"]
        for r in replicated:
            o, n = r["replicated"]["off"], r["replicated"]["on"]
            lag = f"{r['lag_off_s']:.3f} s" if r.get("lag_off_s") is not None else "?"
            out.append(f"| {r['what']} | {o:,.0f} | {n:,.0f} | {n / o:.2f} | {lag} |")
    if cpu:
        out += ["", "CPU time per call (user + system, µs, medians over the rounds; the machine's "
                "load moves it less than calls/s), primary and replica, fence off → on:", "",
                "| load | primary off → on | replica off → on |", "| --- | ---: | ---: |"]
        for r in cpu:
            (po, ro), (pn, rn) = r["cpu"]["off"], r["cpu"]["on"]
            out.append(f"| {r['what']} | {po:.1f} → {pn:.1f} | {ro:.1f} → {rn:.1f} |")
    if "batch plain" in s and "batch multi" in s:
        p, m = s["batch plain"], s["batch multi"]
        refused = ""
        if m["errors_on"]:
            refused = (f" Not comparable in this run: {m['errors_on']:,} of {m['calls_on']:,} "
                       "calls in the MULTI batches were refused with the fence on (below), and "
                       "a refusal is quicker than an answer.")
        out += ["", f"Batches: MULTI + 16 IDMP + EXEC + WAIT with the fence on against plain "
                f"pipelined IDMP calls with it off: {m['on'] / p['off']:.2f} × "
                f"({m['on']:,.0f} against {p['off']:,.0f} calls/s); against plain with it on: "
                f"{m['on'] / p['on']:.2f} ×.{refused}"]
    errs = [r for r in data["summary"] if r["first_error"]]
    for r in errs:
        after = ""
        if r["clean_on"]:
            after = (" (fence on: the first error came after "
                     f"{', '.join(f'{c:,}' for c in r['clean_on'])} calls answered, per round)")
        out += ["", f"- {r['what']}: first error reply{after}: `{r['first_error']}`"]
    out += ["", "Per round (calls/s off → on, ratio; the fence's `ROLE` reads and waits "
            "with it on):", "", "| round | load avg | " + " | ".join(
                r["load"] for r in data["summary"]) + " |",
            "| ---: | ---: | " + " | ".join("---" for _ in data["summary"]) + " |"]
    for i, rd in enumerate(data["rounds"]):
        cells = []
        for r in data["summary"]:
            x = rd["loads"][r["load"]]
            cells.append(f"{x['off']['rate']:,.0f} → {x['on']['rate']:,.0f} "
                         f"({x['on']['rate'] / x['off']['rate']:.2f}; ROLE {x['on']['role']:,}, "
                         f"waits {x['on']['fence_waits']:,})")
        out.append(f"| {i + 1} | {rd['loadavg']} | " + " | ".join(cells) + " |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", default=lib.DEFAULT_MODULE)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="1 round, a few hundred calls per load")
    ap.add_argument("--only", help="only the loads whose name contains one of these "
                    "comma-separated texts")
    ap.add_argument("--batch-calls", type=int,
                    help="calls per batch run (a multiple of 16; default 6400, smoke 160)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if args.batch_calls:
        for i, ld in enumerate(LOADS):
            if ld[2] != "bench":
                LOADS[i] = ld[:5] + (args.batch_calls, args.batch_calls) + ld[7:]
    module = lib.module_path(args.module)
    server = lib.server_bin()
    lib.need("redis-benchmark", server)
    lib.stop_on_signal()
    rounds = 1 if args.smoke else args.rounds
    loads = [ld for ld in LOADS
             if not args.only or any(t in ld[0] for t in args.only.split(","))]
    data = {"rounds": [], "smoke": args.smoke}
    with tempfile.TemporaryDirectory(prefix="imid-fence-") as workdir:
        try:
            for i in range(rounds):
                rd = {"loadavg": open("/proc/loadavg").read().split()[0], "loads": {}}
                for ld in loads:
                    order = (("off", "0"), ("on", "1"))
                    if i % 2:
                        order = order[::-1]
                    got = {}
                    for label, fence in order:
                        got[label] = measure(server, module, workdir, fence, ld, args.smoke)
                    rd["loads"][ld[0]] = got
                    print(f"  round {i + 1} {ld[0]:<12} off {got['off']['rate']:>10,.0f}  on "
                          f"{got['on']['rate']:>10,.0f}  ({got['on']['rate'] / got['off']['rate']:.2f};"
                          f" waits {got['on']['fence_waits']}, ROLE {got['on']['role']}, errors "
                          f"{got['off']['error_replies']}/{got['on']['error_replies']})",
                          file=sys.stderr, flush=True)
                data["rounds"].append(rd)
        finally:
            lib.stop_all()
    data["server"] = lib.version(server)
    data["loadavg_after"] = open("/proc/loadavg").read().split()[0]
    data["summary"] = summarize(data)
    print("\n".join(render(data)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
