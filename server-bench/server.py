#!/usr/bin/env python3
"""Server-level benchmarks of imid: throughput through redis-benchmark, and memory per key.

Standard library only (deps.sh installs python3, redis-server and redis-tools; nothing else is
needed). Starts its own redis-server processes on free loopback ports with persistence off, in
a temp dir, and always stops them (try/finally plus SIGTERM/SIGINT handlers).

Throughput: every command in COMMANDS is run by redis-benchmark with 50 clients at pipeline 1
and 16, in interleaved rounds (round 1 runs every command once, then round 2 ...), so that a
burst of load from elsewhere on the machine spreads over all commands instead of hitting one.
The report gives the median and the min-max of requests/s over the rounds.

Memory: on a fresh server, used_memory before and after loading N keys (SEQ.SET vs INCRBY with
the same names and values), divided by N.

No timing is asserted anywhere: a run fails only when a command errors or prints no throughput.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

CAP = 100  # offline-inbox cap in the send-flow scripts

# The send flow as an IM backend would write it. KEYS[1] = the conversation's sequence key,
# KEYS[2] = its offline inbox (a ZSET scored by sequence), ARGV[1] = channel type, ARGV[2] =
# inbox cap. Each returns {seq, message id}. All three take exactly the same arguments.
#
# imid: SEQ.NEXT + MSGID.GEN (a time-ordered 80-bit ID, target = the conversation key, which is
# declared so that the script stays cluster-correct) + ZADD + cap.
FLOW_IMID = """
local seq = redis.call('SEQ.NEXT', KEYS[1])
local id = redis.call('MSGID.GEN', ARGV[1], KEYS[1])
redis.call('ZADD', KEYS[2], seq, id)
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[2]) + 1))
return {seq, id}
"""
# Without imid, with an ID: INCR + an ID built in Lua from the server clock and the sequence
# ("<unix µs>-<seq>": unique per conversation, time-ordered only to the microsecond and only
# per node) + ZADD + cap. The closest plain-Redis equivalent of the imid flow.
FLOW_INCR_ID = """
local seq = redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local id = t[1] .. string.format('%06d', t[2]) .. '-' .. seq
redis.call('ZADD', KEYS[2], seq, id)
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[2]) + 1))
return {seq, id}
"""
# Without imid, no ID at all: INCR + ZADD (member = the sequence number) + cap. The floor: what
# the flow costs when the message needs no identifier beyond its per-conversation sequence.
FLOW_INCR = """
local seq = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], seq, seq)
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[2]) + 1))
return {seq, tostring(seq)}
"""


def error_replies(srv):
    return int(srv.info("stats").get("total_error_replies", "0"))


def pin(cpu):
    return ["taskset", "-c", str(cpu)] if cpu is not None else []


def bench_one(srv, client_cpu, name, argv, requests, pipeline, keyspace):
    """Runs one redis-benchmark; returns requests/s. Fails on an error reply or no result."""
    before = error_replies(srv)
    rps, _, text = lib.benchmark(srv.port, argv, 50, pipeline, requests, keyspace,
                                 prefix=pin(client_cpu))
    errors = error_replies(srv) - before
    if errors != 0:
        raise RuntimeError(f"{name} at -P {pipeline}: {errors} error replies\n{text[-1500:]}")
    return rps


def commands(srv):
    """(name, argv, setup) in table order. setup runs before each redis-benchmark call."""
    sha_imid = srv.cli("SCRIPT", "LOAD", FLOW_IMID)
    sha_incr_id = srv.cli("SCRIPT", "LOAD", FLOW_INCR_ID)
    sha_incr = srv.cli("SCRIPT", "LOAD", FLOW_INCR)

    def keys(mode):
        return lambda: srv.cli("CONFIG", "SET", "imid.openid-keys", mode)

    plain = keys("")
    keyed = keys(lib.BENCH_KEY)
    plain()
    open_plain = srv.cli("OPENID.ENC", lib.MSGID, "1", "1")
    keyed()
    open_keyed = srv.cli("OPENID.ENC", lib.MSGID, "1", "1")
    plain()
    srv.cli("HSET", "ref:fields4", "time", "1700000000000", "seq", "6", "channel_type", "1",
            "hash", "2526662")
    # Random keys come from redis-benchmark's __rand_int__, drawn independently for each
    # placeholder, so a flow's sequence key and inbox are two random conversations: the same
    # work per call as one conversation's pair.
    flow = ["2", "{c:__rand_int__}:", "{c:__rand_int__}:inbox:", "1", str(CAP)]
    return [
        ("PING", ["PING"], plain),
        # Reference, not imid: one argument and a 19-byte bulk reply, the shape of MSGID.GEN
        # and OPENID.ENC, with no module in the way.
        ("ECHO (reference: 19-byte bulk reply)", ["ECHO", lib.MSGID], plain),
        ("INCR (random keys)", ["INCR", "incr:__rand_int__"], plain),
        ("SEQ.NEXT (random keys)", ["SEQ.NEXT", "seq:__rand_int__"], plain),
        ("MSGID.GEN", ["MSGID.GEN", "1", "conv:__rand_int__"], plain),
        ("MSGID.DECODE", ["MSGID.DECODE", lib.MSGID], plain),
        ("UID.GEN", ["UID.GEN", "conv:__rand_int__"], plain),
        # 100 UIDs a call can outrun the layout (41,10,12: 4,096 UIDs per ms, 4.1 M/s); UID.GEN
        # then borrows up to 10 s ahead of the clock and refuses beyond. So each run starts
        # with nothing borrowed and issues at most UID_COUNT_REQUESTS calls (7.3 s of UIDs).
        ("UID.GEN COUNT 100", ["UID.GEN", "conv:__rand_int__", "COUNT", "100"],
         lambda: (plain(), uid_caught_up(srv))),
        ("UID.DECODE", ["UID.DECODE", "117831765636153344"], plain),
        # Reference, not imid: a built-in command whose reply has MSGID.DECODE's shape (4
        # name/integer pairs), to tell the cost of the reply apart from the module's.
        ("HGETALL (reference: 4-field reply)", ["HGETALL", "ref:fields4"], plain),
        ("OPENID.ENC (plain)", ["OPENID.ENC", lib.MSGID, "1", "1"], plain),
        ("OPENID.DEC (plain)", ["OPENID.DEC", open_plain], plain),
        ("OPENID.ENC (keyed)", ["OPENID.ENC", lib.MSGID, "1", "1"], keyed),
        ("OPENID.DEC (keyed)", ["OPENID.DEC", open_keyed], keyed),
        ("flow: imid (SEQ.NEXT+MSGID.GEN+ZADD+cap)",
         ["EVALSHA", sha_imid, flow[0], flow[1] + "seq", flow[2] + "imid", *flow[3:]], plain),
        ("flow: INCR+Lua ID (INCR+TIME+ZADD+cap)",
         ["EVALSHA", sha_incr_id, flow[0], flow[1] + "incrid", flow[2] + "incrid", *flow[3:]],
         plain),
        ("flow: INCR only (INCR+ZADD+cap)",
         ["EVALSHA", sha_incr, flow[0], flow[1] + "incr", flow[2] + "incr", *flow[3:]], plain),
    ]


UID_COUNT_REQUESTS = 300_000


def uid_caught_up(srv, limit_s=15.0):
    """Waits until UID.GEN borrows nothing ahead of the clock (imid_uid_high_water_ms)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        high = int(srv.info("imid").get("imid_uid_high_water_ms", 0))
        if high <= time.time() * 1000:
            return
        time.sleep(0.1)
    raise RuntimeError("UID.GEN still borrows ahead of the clock after 15 s")


def throughput(module, workdir, rounds, requests, keyspace, server_cpu, client_cpu):
    srv = lib.Server(module, workdir=workdir, prefix=pin(server_cpu))
    cmds = commands(srv)
    results = {}  # (name, pipeline) -> [rps per round]
    for rnd in range(1, rounds + 1):
        for pipeline in (1, 16):
            for name, argv, setup in cmds:
                setup()
                # Pipelined runs go ~10x faster; give them more requests so each lasts long
                # enough to measure.
                n = requests * (5 if pipeline > 1 else 1)
                if "COUNT" in argv:
                    n = min(n, UID_COUNT_REQUESTS)
                rps = bench_one(srv, client_cpu, name, argv, n, pipeline, keyspace)
                results.setdefault((name, pipeline), []).append(rps)
                print(f"  round {rnd} -P {pipeline:<2} {name:<42} {rps:>12,.0f} req/s",
                      file=sys.stderr, flush=True)
    used = int(srv.info("memory")["used_memory"])
    srv.stop()
    return [name for name, _, _ in cmds], results, used


def load_keys(srv, command, n, value_base):
    """Loads n keys `k:<i>` = value_base+i with `command` through redis-cli --pipe."""
    srv.pipe([command, f"k:{i:08d}", str(value_base + i)] for i in range(n))


def memory(module, workdir, n, server_cpu):
    """used_memory per key for n sequence keys vs n INCR keys with the same names and values."""
    # Values above Redis's shared integers (0..9999) and above 2^31, like a long-lived sequence;
    # an INCR key holding such a value is an int-encoded string object, no separate buffer.
    value_base = 3_000_000_000
    rows = []
    for label, command in (("sequence (SEQ.SET)", "SEQ.SET"), ("string (INCRBY)", "INCRBY")):
        srv = lib.Server(module, workdir=workdir, prefix=pin(server_cpu))
        before = int(srv.info("memory")["used_memory"])
        load_keys(srv, command, n, value_base)
        after = int(srv.info("memory")["used_memory"])
        dbsize = int(srv.cli("DBSIZE"))
        if dbsize != n:
            raise RuntimeError(f"{label}: DBSIZE {dbsize}, expected {n}")
        usage = int(srv.cli("MEMORY", "USAGE", "k:00000000"))
        srv.stop()
        rows.append((label, n, after - before, (after - before) / n, usage))
    return rows


def machine():
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def run(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
        except OSError:
            return "unknown"

    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": run("uname", "-sr"),
        "redis": run("redis-server", "--version"),
        "rustc": run("rustc", "--version"),
        "commit": run("git", "rev-parse", "--short", "HEAD"),
        "dirty": bool(run("git", "status", "--porcelain", "--untracked-files=no")),
        "load_before": open("/proc/loadavg").read().split()[:3],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200_000,
                    help="requests per run at pipeline 1 (x5 at pipeline 16)")
    ap.add_argument("--keyspace", type=int, default=10_000,
                    help="random keys per family (-r); inboxes reach the cap at this size")
    ap.add_argument("--memory-keys", type=int, default=1_000_000)
    ap.add_argument("--json", required=True, help="write raw results here")
    args = ap.parse_args()

    module = lib.module_path(args.module)
    # Server and client on different cores when there are at least two and taskset exists.
    can_pin = (os.cpu_count() or 1) >= 2 and subprocess.run(
        ["sh", "-c", "command -v taskset"], capture_output=True).returncode == 0
    server_cpu, client_cpu = (0, 1) if can_pin else (None, None)

    lib.stop_on_signal()
    with tempfile.TemporaryDirectory(prefix="imid-bench-") as workdir:
        try:
            info = machine()
            print("throughput:", file=sys.stderr)
            names, results, _ = throughput(module, workdir, args.rounds, args.requests,
                                           args.keyspace, server_cpu, client_cpu)
            print("memory:", file=sys.stderr)
            mem = memory(module, workdir, args.memory_keys, server_cpu)
            info["load_after"] = open("/proc/loadavg").read().split()[:3]
        finally:
            lib.stop_all()

    out = {
        "machine": info,
        "pinned": can_pin,
        "rounds": args.rounds,
        "requests": args.requests,
        "keyspace": args.keyspace,
        "cap": CAP,
        "names": names,
        "throughput": {f"{n}|{p}": v for (n, p), v in results.items()},
        "memory": mem,
        "scripts": {"imid": FLOW_IMID, "incr_id": FLOW_INCR_ID, "incr": FLOW_INCR},
    }
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
