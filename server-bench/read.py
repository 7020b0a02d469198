#!/usr/bin/env python3
"""IM.SYNC, IM.READ, IM.PULL and IM.CHANGE against their scripts (0.3.0), and IM.UNREAD and
IM.READBY (since 0.3.0, no script) against the Redis commands a script would use for them:
instructions per call inside Redis's call() (callgrind, as server-bench/send.py counts them),
each native command against EVALSHA (EVALSHA_RO for the read-only two) of
examples/lua/{sync,read,pull,change}.lua and against the Redis commands it is made of called
alone (`parts`), on the same stream of calls, each way on its own fresh server under callgrind.

Warm keys: the server loaded an RDB where every conversation of CONVS has a full inbox (cap 10,
server-bench/send.py's prefill) and every user of USERS has three kinds with 10 changes each;
the calls pick random ones. Cold keys: the same calls on names nothing wrote (missing keys).

IM.UNREAD's parts: SEQ.HGET of the cursor, then ZRANGE inbox +inf (cursor BYSCORE REV LIMIT 0
1000 (the newest members, whose senders a script would look at); IM.READBY's: SEQ.HMGET of the
20 members' cursors. Warm: every conversation's read map holds 20 members' cursors.

    server-bench/read.py --module target/release/libimid.so [--calls N] [--only unread,readby] [--json out.json]
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

LUA = {n: open(os.path.join(lib.ROOT, "examples", "lua", f"{n}.lua")).read()
       for n in ("sync", "read", "pull", "change")}
# The inboxes as server-bench/send.py's prefill leaves them at one recipient: CONVS
# conversations, each inbox full at cap CAP, 40-byte bodies.
CONVS = 200
CAP = 10
BODY = "b" * 40
USERS = 200
KINDS = ("friend", "group", "conv")
TARGET = 0.25
# The read commands since 0.3.0, which have no script: at most this many times their parts.
NEW = ("unread", "readby")
NEW_TARGET = 1.10
MEMBERS = [f"u{i}" for i in range(20)]


def calls(which, n, seed, cold):
    """`n` calls of `which`, in script terms: (keys, argv)."""
    rng = random.Random(seed)
    pre = "cold" if cold else ""
    out = []
    for i in range(n):
        conv, user = rng.randrange(CONVS), rng.randrange(USERS)
        tag = f"{{conv:{pre}{conv}}}"
        utag = f"{{{pre}u{user}}}"
        if which == "unread":
            out.append(([f"{tag}:read", f"{tag}:inbox:u0"], ["u0"]))
        elif which == "readby":
            out.append(([f"{tag}:read"], [str(rng.randrange(12)), *MEMBERS]))
        elif which == "sync":
            out.append(([f"{tag}:seq", f"{tag}:inbox:u0", f"{tag}:trimmed:u0"],
                        [str(rng.randrange(12)), "5"]))
        elif which == "read":
            out.append(([f"{tag}:read", f"{tag}:inbox:u0", f"{tag}:seq"],
                        ["u0", str(rng.randrange(12))]))
        elif which == "change":
            kind = rng.choice(KINDS)
            out.append(([f"app:seq:{utag}", f"app:trimmed:{utag}", f"app:log:{utag}:{kind}"],
                        [kind, f"change {i}", "10"]))
        else:
            keys = [f"app:seq:{utag}", f"app:trimmed:{utag}"] + [f"app:log:{utag}:{k}"
                                                                 for k in KINDS]
            argv = [x for k in KINDS for x in (k, str(rng.randrange(12)))]
            out.append((keys, argv))
    return out


def native(which, cs):
    return [[f"IM.{which.upper()}", *k, *a] for k, a in cs]


def lua(which, cs):
    sha = hashlib.sha1(LUA[which].encode()).hexdigest()
    verb = "EVALSHA_RO" if which in ("sync", "pull") else "EVALSHA"
    return [[verb, sha, str(len(k)), *k, *a] for k, a in cs]


def parts(which, cs):
    """The Redis commands each call is made of, called alone (pipelined; a change's writes wait
    for its seq, as a client's would): IM.SYNC as SEQ.GET, SEQ.GET, ZRANGE ... LIMIT; IM.READ as
    SEQ.HADVANCE ... LIMIT, ZRANGE ... BYSCORE REV LIMIT 0 1000; IM.PULL as two SEQ.HMGET and a ZRANGE per kind; IM.CHANGE as
    SEQ.HNEXT, then ZADD, ZPOPMIN of the excess and SEQ.HADVANCE of the marker."""
    def drive(c):
        if which == "change":
            for (seqs, trimmed, log), (kind, change, cap) in cs:
                seq = c("SEQ.HNEXT", seqs, kind)
                if isinstance(seq, lib.Error):
                    raise RuntimeError(seq)
                c.pipelined([["ZADD", log, str(seq), f"{seq}|{change}"]])
                n = c("ZCARD", log)
                if n > int(cap):
                    popped = c("ZPOPMIN", log, str(n - int(cap)))
                    c.pipelined([["SEQ.HADVANCE", trimmed, kind, popped[-1]]])
            return
        cmds = []
        if which == "unread":
            for (read, inbox), (user,) in cs:
                cursor = c("SEQ.HGET", read, user)
                cmds.append(["ZRANGE", inbox, "+inf", f"({cursor}", "BYSCORE", "REV", "LIMIT", "0",
                             "1000"])
            c.pipelined(cmds)
            return
        for keys, argv in cs:
            if which == "readby":
                cmds.append(["SEQ.HMGET", keys[0], *argv[1:]])
            elif which == "sync":
                cmds += [["SEQ.GET", keys[0]], ["SEQ.GET", keys[2]],
                         ["ZRANGE", keys[1], f"({argv[0]}", "+inf", "BYSCORE", "LIMIT", "0",
                          str(int(argv[1]) + 1), "WITHSCORES"]]
            elif which == "read":
                # read.lua's calls since 0.3.0: the newest members, whose senders it reads
                cmds += [["SEQ.HADVANCE", keys[0], argv[0], argv[1], "LIMIT", keys[2]],
                         ["ZRANGE", keys[1], "+inf", f"({argv[1]}", "BYSCORE", "REV", "LIMIT", "0",
                          "1000"]]
            else:
                kinds = argv[0::2]
                cmds += [["SEQ.HMGET", keys[0], *kinds], ["SEQ.HMGET", keys[1], *kinds]]
                cmds += [["ZRANGE", log, f"({held}", "+inf", "BYSCORE", "WITHSCORES"]
                         for log, held in zip(keys[2:], argv[1::2])]
        c.pipelined(cmds)
    return drive


def server_kw(workdir, log, dbfile, module):
    """lib.Server's arguments: in workdir, loading dbfile, no gap skipped after a load."""
    return {"dir": workdir, "dbfilename": dbfile, "log": log, "modules": [module],
            "args": ["--imid.seq-gap", "0"]}


def prefill(workdir, module):
    """An RDB file: every conversation's inbox full (CAP + 1 sends from u0), 10 changes per kind
    per user (11 made, cap 10), every conversation's read map holding MEMBERS' cursors."""
    name = "full-read.rdb"
    srv = lib.Server(timeout=60, **server_kw(workdir, "prefill-read.log", name, module))
    try:
        c = srv.client()
        cmds = []
        for conv in range(CONVS):
            tag = f"{{conv:{conv}}}"
            keys = [tag, f"{tag}:seq", f"{tag}:inbox:u0", f"{tag}:trimmed:u0"]
            cmds += [["IM.SEND", *keys, "1", "u0", f"pre-{i}", BODY, str(CAP)]
                     for i in range(CAP + 1)]
        for u in range(USERS):
            for k in KINDS:
                keys = [f"app:seq:{{u{u}}}", f"app:trimmed:{{u{u}}}", f"app:log:{{u{u}}}:{k}"]
                for i in range(11):
                    cmds.append(["IM.CHANGE", *keys, k, f"pre {i}", "10"])
        for conv in range(CONVS):
            pairs = [x for i, m in enumerate(MEMBERS) for x in (m, str(i % 12))]
            cmds.append(["SEQ.HSET", f"{{conv:{conv}}}:read", *pairs])
        c.pipelined(cmds)
        if c("SAVE") != "OK":
            raise RuntimeError("SAVE failed")
        c.close()
    finally:
        srv.stop()
    return name


def count(workdir, module, dbfile, label, warm, drive):
    """Instructions inside call() while `drive(client)` runs, on a fresh server under callgrind
    that loaded `dbfile`, after `warm(client)` (not counted)."""
    return lib.count(label, workdir, warm, drive, timeout=300,
                     **server_kw(workdir, f"{label}.log", dbfile, module))


def measure(module, workdir, only, n):
    """The rows: each command of `only`, warm keys then cold, n calls per figure."""
    dbfile = prefill(workdir, module)
    rows = []
    for which in only:
        for cold in (False, True):
            stream = calls(which, n, 1, cold)
            warm = calls(which, 20, 2, cold)
            got = {}
            ways = (("native", native),) if which in NEW else (("native", native), ("lua", lua))
            for way, make in ways:
                def warm_up(c, make=make):
                    if which not in NEW:
                        c("SCRIPT", "LOAD", LUA[which])
                    c.pipelined(make(which, warm))
                label = f"{which}-{'cold' if cold else 'warm'}-{way}"
                got[way] = count(workdir, module, dbfile, label, warm_up,
                                 lambda c, make=make: c.pipelined(make(which, stream))) / n
            label = f"{which}-{'cold' if cold else 'warm'}-parts"
            got["parts"] = count(workdir, module, dbfile, label, parts(which, warm),
                                 parts(which, stream)) / n
            if which in NEW:
                row = {"command": f"IM.{which.upper()}", "keys": "cold" if cold else "warm",
                       **got, "vs_parts": got["native"] / got["parts"]}
                rows.append(row)
                print(f"IM.{which.upper():<7} {row['keys']}: native {got['native']:>9,.0f}  "
                      f"parts {got['parts']:>9,.0f}  {row['vs_parts']:.2f} x parts "
                      f"(target {NEW_TARGET})", flush=True)
                continue
            row = {"command": f"IM.{which.upper()}", "keys": "cold" if cold else "warm",
                   **got, "vs_lua": got["native"] / got["lua"],
                   "vs_parts": got["native"] / got["parts"]}
            rows.append(row)
            print(f"IM.{which.upper():<7} {row['keys']}: native {got['native']:>9,.0f}  "
                  f"script {got['lua']:>9,.0f}  parts {got['parts']:>9,.0f}  "
                  f"{row['vs_lua']:.3f} x script (target {TARGET}), {row['vs_parts']:.2f} x parts",
                  flush=True)
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--module", required=True)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--json")
    p.add_argument("--only", default="", help="comma-separated: sync,read,pull,change,unread,readby")
    a = p.parse_args()
    only = [w for w in a.only.split(",") if w] or ["sync", "read", "pull", "change", *NEW]
    module = lib.module_path(a.module)
    lib.stop_on_signal()
    workdir = tempfile.mkdtemp(prefix="imid-read-bench-")
    try:
        rows = measure(module, workdir, only, a.calls)
    finally:
        lib.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
