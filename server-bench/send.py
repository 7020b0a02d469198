#!/usr/bin/env python3
"""IM.SEND against examples/lua/send.lua and against its parts called alone (since 0.3.0).

Four measurements, each on its own fresh redis-server with the module loaded:

1. Instructions per message inside Redis's call() (callgrind, as server-bench/instructions.py
   counts them), at 1, 5 and 50 recipients, for the same stream of sends three ways:
   - `IM.SEND` (native),
   - `EVALSHA` of send.lua,
   - its parts called alone: `MSGID.GEN ct tag`, `UID.GEN tag STRING`, `SEQ.NEXT seq IDMP
     <sha1(sender|id)>`, then per recipient `ZADD inbox seq member` and, where the inbox is
     past the cap, `ZPOPMIN inbox n` and `SEQ.ADVANCE trimmed <dropped seq>` (the commands that
     write the same data, without the script's ZCARD).
   The stream: random conversations out of CONVS, each with the same recipients u0..u<R-1>, a
   random sender, a new client message id per send, a 40-byte body, cap 10. Every inbox starts
   full (an RDB file made beforehand by the same sends, loaded with `imid.seq-gap 0`), so every
   send trims one message per inbox, as in a steady state.
2. Throughput, native against send.lua in one run (redis-benchmark, 50 clients, pipeline 1 and
   16, the same keys: random conversations out of 1,000 per placeholder, cap 10, 1 recipient),
   in interleaved rounds; the median of the rounds.
3. One inbox write three ways (--only zadd): the key API IM.SEND uses, RedisModule_Call of
   ZADD, and ZADD itself (server-bench/floor.c's floor.zadd.api and floor.zadd.call).
4. Latency of one send to 1, 100 and 1,000 recipients: the server's own time per call (INFO
   commandstats' usec_per_call: how long a call blocked the server), the mean of CALLS sends
   after a warm-up that filled every inbox to the cap.

    server-bench/send.py --module target/release/libimid.so [--smoke] [--json out.json]
"""

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

SEND_LUA = open(os.path.join(lib.ROOT, "examples", "lua", "send.lua")).read()
CONVS = 200
CAP = 10
BODY = "b" * 40
PIPELINE = 16
# IM.SEND's targets (since 0.3.0), per recipient count: native / send.lua, native / parts.
MAX_VS_LUA = 0.25
MAX_VS_PARTS = 1.2


class Stream:
    """The sends of one measurement: (conversation, sender, client id) per send."""

    def __init__(self, recipients, n, seed):
        rng = random.Random(seed)
        self.recipients = recipients
        self.sends = [(rng.randrange(CONVS), f"u{rng.randrange(recipients)}", f"c{seed}-{i}")
                      for i in range(n)]

    @staticmethod
    def keys(conv, recipients):
        tag = f"{{conv:{conv}}}"
        keys = [tag, f"{tag}:seq"]
        for u in range(recipients):
            keys += [f"{tag}:inbox:u{u}", f"{tag}:trimmed:u{u}"]
        return keys

    def native(self):
        return [["IM.SEND", *self.keys(conv, self.recipients), "1", sender, cid, BODY, str(CAP)]
                for conv, sender, cid in self.sends]

    def lua(self, sha):
        out = []
        for conv, sender, cid in self.sends:
            keys = self.keys(conv, self.recipients)
            out.append(["EVALSHA", sha, str(len(keys)), *keys, "1", sender, cid, BODY, str(CAP)])
        return out


def run_parts(c, stream, sizes):
    """The stream as its parts called alone (see the module comment). `sizes` is every inbox's
    length, which the client tracks to know when to trim."""
    for conv, sender, cid in stream.sends:
        tag = f"{{conv:{conv}}}"
        token = hashlib.sha1(f"{sender}|{cid}".encode()).hexdigest()
        first = [["MSGID.GEN", "1", tag], ["UID.GEN", tag, "STRING"],
                 ["SEQ.NEXT", f"{tag}:seq", "IDMP", token]]
        c.send(*first)
        msgid, uid, (seq, _) = c.reply(), c.reply(), c.reply()
        member = f"{msgid}|{uid}|{sender}|{BODY}"
        writes, trims = [], []
        for u in range(stream.recipients):
            inbox = f"{tag}:inbox:u{u}"
            writes.append(["ZADD", inbox, str(seq), member])
            n = sizes.get(inbox, 0) + 1
            if n > CAP:
                trims.append((inbox, f"{tag}:trimmed:u{u}", n - CAP))
                n = CAP
            sizes[inbox] = n
        writes += [["ZPOPMIN", inbox, str(k)] for inbox, _, k in trims]
        c.send(*writes)
        replies = [c.reply() for _ in writes]
        popped = replies[len(writes) - len(trims):]
        advances = [["SEQ.ADVANCE", t, p[-1]] for (_, t, _), p in zip(trims, popped)]
        c.pipelined(advances, PIPELINE)
        for r in replies:
            if isinstance(r, lib.Error):
                raise RuntimeError(r)


def server_kw(workdir, log, dbfile, module):
    """lib.Server's arguments: in workdir, loading dbfile, no gap skipped after a load."""
    return {"bin": SERVER, "dir": workdir, "dbfilename": dbfile, "log": log, "modules": [module],
            "args": ["--imid.seq-gap", "0"]}


def prefill(workdir, module, recipients):
    """An RDB file where every inbox of every conversation is full: the same kind of sends,
    natively, on an ordinary server. Returns its file name and the inbox sizes."""
    name = f"full{recipients}.rdb"
    if os.path.exists(os.path.join(workdir, name)):
        os.remove(os.path.join(workdir, name))
    srv = lib.Server(timeout=30, **server_kw(workdir, f"prefill{recipients}.log", name, module))
    try:
        c = srv.client()
        cmds = []
        for conv in range(CONVS):
            keys = Stream.keys(conv, recipients)
            for i in range(CAP + 1):  # every inbox full, every trimmed marker there
                cmds.append(["IM.SEND", *keys, "1", "u0", f"pre-{i}", BODY, str(CAP)])
        c.pipelined(cmds, PIPELINE)
        if c("SAVE") != "OK":
            raise RuntimeError("SAVE failed")
        c.close()
    finally:
        srv.stop()
    sizes = {f"{{conv:{conv}}}:inbox:u{u}": CAP for conv in range(CONVS)
             for u in range(recipients)}
    return name, sizes


def count(workdir, module, dbfile, label, warm, drive):
    """Instructions inside call() while `drive(client)` runs, on a fresh server under callgrind
    that loaded `dbfile`, after `warm(client)` (not counted: the script's load, and the one-time
    work of a server's first sends, the leases' and the IDMP clock's first write)."""
    return lib.count(label, workdir, warm, drive, timeout=300,
                     **server_kw(workdir, f"{label}.log", dbfile, module))


def instructions(workdir, module, counts):
    rows = []
    for recipients, n in counts:
        dbfile, sizes = prefill(workdir, module, recipients)
        stream = Stream(recipients, n, seed=recipients)
        warm = Stream(recipients, 20, seed=1000 + recipients)
        got = {}
        got["native"] = count(workdir, module, dbfile, f"native{recipients}",
                              lambda c: c.pipelined(warm.native()),
                              lambda c: c.pipelined(stream.native()))
        sha = hashlib.sha1(SEND_LUA.encode()).hexdigest()

        def lua_warm(c):
            if c("SCRIPT", "LOAD", SEND_LUA) != sha:
                raise RuntimeError("SCRIPT LOAD")
            c.pipelined(warm.lua(sha))
        got["lua"] = count(workdir, module, dbfile, f"lua{recipients}", lua_warm,
                           lambda c: c.pipelined(stream.lua(sha)))
        part_sizes = dict(sizes)
        got["parts"] = count(workdir, module, dbfile, f"parts{recipients}",
                             lambda c: run_parts(c, warm, part_sizes),
                             lambda c: run_parts(c, stream, part_sizes))
        row = {"recipients": recipients, "sends": n,
               **{k: v / n for k, v in got.items()}}
        row["vs_lua"] = row["native"] / row["lua"]
        row["vs_parts"] = row["native"] / row["parts"]
        rows.append(row)
        print(f"  {recipients:>3} recipients: IM.SEND {row['native']:>10,.0f}  send.lua "
              f"{row['lua']:>10,.0f}  parts {row['parts']:>10,.0f}  "
              f"({row['vs_lua']:.3f} x send.lua, {row['vs_parts']:.2f} x parts)",
              file=sys.stderr, flush=True)
    return rows


def throughput(workdir, module, requests, rounds):
    srv = lib.Server(timeout=30, **server_kw(workdir, "tput.log", "none.rdb", module))
    try:
        sha = srv.call("SCRIPT", "LOAD", SEND_LUA)
        # One conversation, a random client_msg_id per send: redis-benchmark draws every
        # __rand_int__ on its own, so random keys paired an ID with another conversation's
        # inbox, which IM.SEND refuses as a retry that is not one. An ID drawn twice is a
        # true retry (same conversation, same message) and answers the first send.
        keys = ["{c:1}", "{c:1}:seq", "{c:1}:inbox", "{c:1}:trimmed"]
        args = ["1", "alice", "id:__rand_int__", BODY, str(CAP)]
        ways = {"IM.SEND": ["IM.SEND", *keys, *args],
                "send.lua": ["EVALSHA", sha, "4", *keys, *args]}
        runs = {}
        for r in range(rounds):
            for pipeline in (1, 16):
                for name, argv in ways.items():
                    rps, _, text = lib.benchmark(srv.port, argv, 50, pipeline, requests,
                                                 100_000_000)
                    if "ERR" in text:
                        raise RuntimeError(f"redis-benchmark {name}: {text}")
                    runs.setdefault((name, pipeline), []).append(rps)
    finally:
        srv.stop()
    out = []
    for pipeline in (1, 16):
        a = statistics.median(runs[("IM.SEND", pipeline)])
        b = statistics.median(runs[("send.lua", pipeline)])
        out.append({"pipeline": pipeline, "native_rps": a, "lua_rps": b, "ratio": a / b,
                    "native_runs": runs[("IM.SEND", pipeline)],
                    "lua_runs": runs[("send.lua", pipeline)]})
        print(f"  pipeline {pipeline:>2}: IM.SEND {a:>9,.0f}/s  send.lua {b:>9,.0f}/s  "
              f"({a / b:.2f} x)", file=sys.stderr, flush=True)
    return out


def latency(workdir, module, sizes, calls):
    srv = lib.Server(timeout=30, **server_kw(workdir, "latency.log", "none.rdb", module))
    rows = []
    try:
        c = srv.client(timeout=600)
        sha = c("SCRIPT", "LOAD", SEND_LUA)
        for recipients in sizes:
            for name in ("IM.SEND", "send.lua"):
                keys = Stream.keys(f"lat-{name}-{recipients}", recipients)

                def send(i):
                    args = ["1", "u0", f"{name}-{i}", BODY, str(CAP)]
                    argv = (["IM.SEND", *keys, *args] if name == "IM.SEND"
                            else ["EVALSHA", sha, str(len(keys)), *keys, *args])
                    r = c(*argv)
                    if isinstance(r, lib.Error):
                        raise RuntimeError(f"{name} to {recipients}: {r}")
                for i in range(CAP + 1):  # every inbox full
                    send(i)
                c("CONFIG", "RESETSTAT")
                for i in range(CAP + 1, CAP + 1 + calls):
                    send(i)
                verb = "im.send" if name == "IM.SEND" else "evalsha"
                stats = c("INFO", "commandstats")
                line = [x for x in stats.splitlines() if x.startswith(f"cmdstat_{verb}:")][0]
                fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
                if int(fields["calls"]) != calls:
                    raise RuntimeError(f"{name}: {fields['calls']} calls counted, {calls} made")
                row = {"recipients": recipients, "command": name,
                       "mean_us": float(fields["usec_per_call"])}
                rows.append(row)
                print(f"  {name:<8} to {recipients:>4} recipients: {row['mean_us']:>8,.1f} µs per "
                      "call", file=sys.stderr, flush=True)
        c.close()
    finally:
        srv.stop()
    return rows


def zadd_paths(workdir, module, n):
    """One inbox write three ways, instructions per call inside call() (as instructions.py
    counts them: n calls from redis-benchmark, one client at pipeline 16, a fresh server each with
    imid and the floor loaded): the key API as IM.SEND writes (floor.zadd.api),
    RedisModule_Call of ZADD (floor.zadd.call), and ZADD itself. Random keys out of 1,000,
    members of 80 bytes (sorted sets past the listpack, as inboxes are)."""
    floor = lib.build_floor(workdir)
    member = "m:__rand_int__:" + "x" * 65
    rows = []
    for name, argv in (("key API (RedisModule_ZsetAdd)", ["floor.zadd.api"]),
                       ("RedisModule_Call of ZADD", ["floor.zadd.call"]),
                       ("ZADD, the command", ["ZADD"])):
        label = f"zadd{len(rows)}"
        srv = lib.Callgrind(label, workdir, bin=SERVER, dir=workdir, dbfilename="empty.rdb",
                            log=f"{label}.log", modules=[module, (floor, lib.BENCH_KEY)], timeout=180)
        try:
            lib.benchmark(srv.port, argv + ["z:__rand_int__", "__rand_int__", member], 1,
                          PIPELINE, n, 1000)
        finally:
            srv.stop()
        v = srv.total() / n
        rows.append({"path": name, "instructions": v})
        print(f"  {name:<32} {v:>8,.0f}", file=sys.stderr, flush=True)
    return rows


def render(data):
    out = ["Instructions per message inside call() (callgrind, " + data["server"] + "):", "",
           "| recipients | IM.SEND | send.lua | parts alone | IM.SEND / send.lua "
           f"(target ≤ {MAX_VS_LUA}) | IM.SEND / parts (target ≤ {MAX_VS_PARTS}) |",
           "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in data["instructions"]:
        out.append(f"| {r['recipients']} | {r['native']:,.0f} | {r['lua']:,.0f} | "
                   f"{r['parts']:,.0f} | {r['vs_lua']:.3f} "
                   f"({'met' if r['vs_lua'] <= MAX_VS_LUA else 'short'}) | {r['vs_parts']:.2f} "
                   f"({'met' if r['vs_parts'] <= MAX_VS_PARTS else 'short'}) |")
    if data.get("zadd"):
        out += ["", "One inbox write (instructions per call inside call()):", "",
                "| path | instructions |", "| --- | ---: |"]
        out += [f"| {r['path']} | {r['instructions']:,.0f} |" for r in data["zadd"]]
    out += ["", "Throughput (redis-benchmark, 50 clients, 1 recipient, cap 10, median of "
            f"{data['rounds']} interleaved rounds):", "",
            "| pipeline | IM.SEND req/s | send.lua req/s | IM.SEND / send.lua |",
            "| ---: | ---: | ---: | ---: |"]
    for r in data["throughput"]:
        out.append(f"| {r['pipeline']} | {r['native_rps']:,.0f} | {r['lua_rps']:,.0f} | "
                   f"{r['ratio']:.2f} |")
    out += ["", "Latency of one send (the server's time per call, INFO commandstats, inboxes "
            "full):", "", "| recipients | command | µs per call |", "| ---: | --- | ---: |"]
    for r in data["latency"]:
        out.append(f"| {r['recipients']} | {r['command']} | {r['mean_us']:,.1f} |")
    return out


SERVER = lib.server_bin()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", default=lib.DEFAULT_MODULE)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it all runs")
    ap.add_argument("--only", default="instructions,zadd,throughput,latency")
    ap.add_argument("--json")
    args = ap.parse_args()
    module = lib.module_path(args.module)
    lib.need("valgrind", "callgrind_control", "redis-benchmark", SERVER)
    lib.stop_on_signal()
    only = args.only.split(",")
    if args.smoke:
        counts, requests, rounds, calls = [(1, 40), (5, 20), (50, 4)], 2000, 1, 3
    else:
        counts, requests, rounds, calls = [(1, 4000), (5, 2000), (50, 400)], 100_000, 3, 50
    data = {"server": lib.version(SERVER, full=True), "rounds": rounds, "instructions": [], "throughput": [],
            "latency": [], "zadd": []}
    with tempfile.TemporaryDirectory(prefix="imid-send-") as workdir:
        try:
            if "instructions" in only:
                data["instructions"] = instructions(workdir, module, counts)
            if "zadd" in only:
                data["zadd"] = zadd_paths(workdir, module, 400 if args.smoke else 20_000)
            if "throughput" in only:
                data["throughput"] = throughput(workdir, module, requests, rounds)
            if "latency" in only:
                data["latency"] = latency(workdir, module, [1, 100, 1000], calls)
        finally:
            lib.stop_all()
    print("\n".join(render(data)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
