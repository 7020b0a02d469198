#!/usr/bin/env python3
"""Instructions per call of every imid command against the floor (server-bench/floor.c).

For each command, redis-server runs under callgrind, counting only inside Redis's `call()`
(the command's own execution, replies and propagation; not the network or the request
parsing), while redis-benchmark sends N commands at pipeline 16 from one client. Total / N is
the figure. Each figure comes from its own fresh server, with imid and the floor module both
loaded. The floor command does the same work as imid's as plainly as C against redismodule.h
allows (see floor.c), so imid / floor is how far imid's glue is from what the work costs.
Callgrind counts are deterministic: they do not move with the machine's load, unlike throughput.
PING, ECHO and INCR are measured the same way, for reference.

Before anything is measured, every command line is run once on an ordinary server (no
valgrind) and must not reply an error; where the reply is deterministic, imid's and the floor's
must be equal (a floor that replies something else is not doing the same work). A command the
module does not have (UID.* before that family lands) is skipped, and the skip is printed.

Needs valgrind, gcc, redis-server, redis-benchmark (scripts/deps.sh installs them) and a built
project (for the redis-module crate's redismodule.h). Standard library only.

    server-bench/instructions.py --module target/release/libimid.so [--requests 20000] [--json out.json]
"""

import argparse
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in server-bench/ from the import below
import lib  # noqa: E402  (server-bench/lib.py)

PIPELINE = 16
WRITE_KEYS = 100_000  # random keys for writes (-r): nearly every call creates its key
SEED_KEYS = 1_000  # sequence keys loaded from an RDB file for the reads, imid's and the floor's
# Fields of the one sequence map (imid's `sm`, the floor's `fm`) and of the Redis hash `h` that
# the map rows address at random: f:<12 digits> = i + 1, loaded from the same RDB file.
MAP_FIELDS = 100_000
LIMIT_VALUE = 1_000_000_000  # the LIMIT keys `sl` (imid) and `fl` (floor): high enough not to clamp

# Targets: (imid command, floor command, most imid may cost as a multiple of it).
# The second element is a floor command, a reference row or another imid row.
TARGETS = [
    ("SEQ.NEXT", "floor.seq.next", 1.10),
    ("MSGID.GEN", "floor.msgid.gen", 1.10),
    ("MSGID.HASH", "floor.noop", 1.10),
    ("UID.GEN", "floor.uid.gen", 1.10),
    # Since 0.2.0 (maps, IDMP): a map field costs at most 1.25 x Redis's own hash field; IDMP
    # at most 1.5 x the plain call.
    ("SEQ.HNEXT (map, random fields)", "HINCRBY (hash, random fields)", 1.25),
    ("SEQ.NEXT IDMP (new token)", "SEQ.NEXT", 1.50),
]

# Since 0.3.0 (the fence): the same commands with one plain replica attached, imid's fence off
# (`imid.fence-replicas 0`) and on (`1`), against their floor commands measured with the same
# replica attached. (row name above, warm-up argv run before counting, most imid may cost.)
REPLICA_ROWS = [
    ("SEQ.NEXT", ["SEQ.NEXT", "warm"], ["floor.seq.next", "warm"]),
    ("MSGID.GEN", ["MSGID.GEN", "1", "warm"], ["floor.msgid.gen", "1", "warm"]),
    ("UID.GEN", ["UID.GEN", "warm"], ["floor.uid.gen", "warm"]),
]
REPLICA_TARGET = 1.10
FENCES = (("off", "0"), ("on", "1"))


def row(command, imid, floor, keys=None, seeded=False, keyed=False, same="reply", new=False,
        warm=None, why="the floor assumes the default layout"):
    """One table row. imid / floor: argv (`__rand_int__` is redis-benchmark's random number,
    drawn per placeholder, keyspace `keys`). seeded: the server loads SEED_KEYS sequences of each
    kind and the MAP_FIELDS-field map and hash first (reads, map rows). keyed: imid runs with
    `imid.openid-keys` = lib.BENCH_KEY. same: what the check requires of the two replies: "reply"
    equal, "shape" the same type and length. new: a syntax the module may not have (before 0.2.0:
    IDMP, maps); an error reply from imid skips the row, and the skip is printed. warm:
    (imid argv, floor argv) run before counting, their instructions not counted. why: with
    same="warn", why the replies may differ."""
    return {"command": command, "imid": imid, "floor": floor, "keys": keys, "seeded": seeded,
            "keyed": keyed, "same": same, "new": new, "warm": warm, "why": why}


def rows(plain_openid, keyed_openid, uid, map_fields):
    field = "f:__rand_int__"
    # every field of the loaded map once with SEQ.HNEXT (the floor's with floor.seq.hnext)
    warm = (warm_up(map_fields, "SEQ.HNEXT", "sm"), warm_up(map_fields, "floor.seq.hnext", "fm"))
    return [
        row("MSGID.GEN", ["MSGID.GEN", "1", "conv:__rand_int__"],
            ["floor.msgid.gen", "1", "conv:__rand_int__"], keys=WRITE_KEYS, same="shape"),
        row("MSGID.ENCODE", ["MSGID.ENCODE", "1700000000000", "6", "1", "2526662"],
            ["floor.msgid.encode", "1700000000000", "6", "1", "2526662"]),
        row("MSGID.DECODE", ["MSGID.DECODE", lib.MSGID], ["floor.msgid.decode", lib.MSGID]),
        row("MSGID.HASH", ["MSGID.HASH", "conv:12345"], ["floor.msgid.hash", "conv:12345"]),
        row("MSGID.FLOOR", ["MSGID.FLOOR", "1700000000000"],
            ["floor.msgid.floor", "1700000000000"]),
        row("SEQ.NEXT", ["SEQ.NEXT", "s:__rand_int__"], ["floor.seq.next", "f:__rand_int__"],
            keys=WRITE_KEYS),
        row("SEQ.GET", ["SEQ.GET", "s:__rand_int__"], ["floor.seq.get", "f:__rand_int__"],
            keys=SEED_KEYS, seeded=True),
        row("SEQ.MGET (4 keys)", ["SEQ.MGET"] + ["s:__rand_int__"] * 4,
            ["floor.seq.mget"] + ["f:__rand_int__"] * 4, keys=SEED_KEYS, seeded=True),
        row("SEQ.SET", ["SEQ.SET", "s:__rand_int__", "1000"],
            ["floor.seq.set", "f:__rand_int__", "1000"], keys=WRITE_KEYS),
        row("SEQ.ADVANCE", ["SEQ.ADVANCE", "s:__rand_int__", "1000"],
            ["floor.seq.advance", "f:__rand_int__", "1000"], keys=WRITE_KEYS),
        # A fresh token per call (random keys, nearly each created by the call): the cost of
        # keeping a token, against plain SEQ.NEXT above.
        row("SEQ.NEXT IDMP (new token)", ["SEQ.NEXT", "s:__rand_int__", "IDMP", "t:__rand_int__"],
            ["floor.seq.next", "f:__rand_int__", "IDMP", "t:__rand_int__"], keys=WRITE_KEYS,
            new=True),
        # One map of map_fields fields loaded from the RDB file, a random field per call
        # (f:<12 digits>, all present), after every field had its first SEQ.HNEXT (warm).
        row("SEQ.HNEXT (map, random fields)", ["SEQ.HNEXT", "sm", field],
            ["floor.seq.hnext", "fm", field], keys=map_fields, seeded=True, warm=warm),
        # The same map with a fresh token per call: the map's one token window fills to
        # imid.seq-idmp-max (1,000) and then drops one token per call. One field: a token names
        # its field, and redis-benchmark draws each placeholder apart, so random fields would
        # reuse tokens for other fields (refused). The floor has no map tokens: against its
        # plain map NEXT of the same field (the replies differ; measured anyway).
        row("SEQ.HNEXT IDMP (map, one field, new token)",
            ["SEQ.HNEXT", "sm", "f:000000000001", "IDMP", "t:__rand_int__"],
            ["floor.seq.hnext", "fm", "f:000000000001"], keys=map_fields, seeded=True, warm=warm,
            same="warn", new=True, why="the floor's map keeps no tokens"),
        row("SEQ.HGET (map, random fields)", ["SEQ.HGET", "sm", field],
            ["floor.seq.hget", "fm", field], keys=map_fields, seeded=True, warm=warm),
        # Fields hold at most map_fields + 1: nearly every call raises its field (a write).
        row("SEQ.HADVANCE (map, random fields)", ["SEQ.HADVANCE", "sm", field, "1000000"],
            ["floor.seq.hadvance", "fm", field, "1000000"], keys=map_fields, seeded=True,
            warm=warm),
        row("SEQ.HADVANCE ... LIMIT (map, random fields)",
            ["SEQ.HADVANCE", "sm", field, "1000000", "LIMIT", "sl"],
            ["floor.seq.hadvance", "fm", field, "1000000", "LIMIT", "fl"], keys=map_fields,
            seeded=True, warm=warm),
        # The same SEQ.HNEXT straight after the load: nearly every call is its field's first,
        # which skips the gap and replicates `SEQ.HSET key field last` (a one-time cost).
        row("SEQ.HNEXT (map, first call per field after a load)", ["SEQ.HNEXT", "sm", field],
            ["floor.seq.hnext", "fm", field], keys=map_fields, seeded=True),
        row("OPENID.ENC (plain)", ["OPENID.ENC", lib.MSGID, "1", "1"],
            ["floor.openid.enc", lib.MSGID, "1", "1"]),
        row("OPENID.DEC (plain)", ["OPENID.DEC", plain_openid],
            ["floor.openid.dec", plain_openid]),
        row("OPENID.ENC (keyed)", ["OPENID.ENC", lib.MSGID, "1", "1"],
            ["floor.openid.enck", lib.MSGID, "1", "1"], keyed=True),
        row("OPENID.DEC (keyed)", ["OPENID.DEC", keyed_openid],
            ["floor.openid.deck", keyed_openid], keyed=True),
        row("UID.GEN", ["UID.GEN", "conv:__rand_int__"], ["floor.uid.gen", "conv:__rand_int__"],
            keys=WRITE_KEYS, same="shape"),
        # The floor assumes the default layout (41,10,12 from 2026-01-01, node 0): where imid's
        # replies differ, the check says so but measures anyway.
        row("UID.DECODE", ["UID.DECODE", uid], ["floor.uid.decode", uid], same="warn"),
        row("UID.ENCODE", ["UID.ENCODE", "1767225600123", "3", "7"],
            ["floor.uid.encode", "1767225600123", "3", "7"], same="warn"),
        # Under another layout (since 0.2.0): the LAYOUT option's parsing and a named layout's
        # shifts, against the same floor commands (which know the default layout only).
        row("UID.DECODE (LAYOUT discord)", ["UID.DECODE", uid, "LAYOUT", "discord"],
            ["floor.uid.decode", uid], same="warn"),
        row("UID.ENCODE (LAYOUT sonyflake)",
            ["UID.ENCODE", "1767225600120", "3", "7", "LAYOUT", "sonyflake"],
            ["floor.uid.encode", "1767225600120", "3", "7"], same="warn"),
    ]


def extra_checks(plain_openid):
    """More (imid, floor) pairs that must agree, beyond the measured lines: non-ASCII targets,
    COUNT, no-op writes, and inputs both must refuse. (imid argv, floor argv, keyed,
    "equal" or "errors")."""
    tampered = ("B" if plain_openid[0] != "B" else "C") + plain_openid[1:]
    spare_bits = plain_openid[:18] + chr(ord(plain_openid[18]) + 1)
    pairs = [
        (["MSGID.HASH", "ü😀x"], "equal"),
        (["MSGID.HASH", b"\xff"], "errors"),
        (["MSGID.DECODE", "d1vo-8H8O-0006-D3E6"], "errors"),
        (["MSGID.DECODE", "D1VO-8H8O-0006-D3EW"], "errors"),
        (["MSGID.DECODE", "D1VO8H8O-0006-D3E6-"], "errors"),
        (["MSGID.ENCODE", "4398046511104", "0", "0", "0"], "errors"),
        (["MSGID.ENCODE", "4398046511103", "4095", "15", "4194303"], "equal"),
        (["MSGID.GEN", "16", "x"], "errors"),
        (["OPENID.ENC", lib.MSGID, "256", "1"], "errors"),
        (["OPENID.ENC", "0000-0000-0000-0000", "255", "0"], "equal"),
        (["OPENID.DEC", tampered], "errors"),
        (["OPENID.DEC", spare_bits], "errors"),
        (["OPENID.DEC", plain_openid + "="], "errors"),
        (["SEQ.NEXT", "{p}:cnt", "COUNT", "5"], "equal"),
        (["SEQ.NEXT", "{p}:cnt", "count", "0"], "errors"),
        (["SEQ.ADVANCE", "{p}:cnt", "3"], "equal"),
        (["SEQ.SET", "{p}:cnt", "5"], "equal"),
        (["SEQ.MGET", "{p}:cnt", "{p}:none", "{p}:cnt"], "equal"),
        (["SEQ.GET", "str"], "errors"),
        (["SEQ.SET", "{p}:max", "9223372036854775807"], "equal"),
        (["SEQ.NEXT", "{p}:max"], "errors"),
        (["SEQ.GET", "{p}:max"], "equal"),
    ]
    # maps and IDMP (since 0.2.0), checked when imid has them: (argv, want, the row whose skip
    # skips them too)
    new = [
        (["SEQ.HNEXT", "{p}:m", "a", "COUNT", "5"], "equal", "SEQ.HNEXT (map, random fields)"),
        (["SEQ.HNEXT", "{p}:m", ""], "errors", "SEQ.HNEXT (map, random fields)"),
        (["SEQ.HNEXT", "{p}:m", "x" * 257], "errors", "SEQ.HNEXT (map, random fields)"),
        (["SEQ.HNEXT", "{p}:m", "x" * 256], "equal", "SEQ.HNEXT (map, random fields)"),
        (["SEQ.HADVANCE", "{p}:m", "a", "3"], "equal", "SEQ.HADVANCE (map, random fields)"),
        (["SEQ.HADVANCE", "{p}:m", "b", "7", "LIMIT", "{p}:cnt"], "equal",
         "SEQ.HADVANCE ... LIMIT (map, random fields)"),
        (["SEQ.HADVANCE", "{p}:m", "b", "-1"], "errors", "SEQ.HADVANCE (map, random fields)"),
        (["SEQ.HGET", "{p}:m", "b"], "equal", "SEQ.HGET (map, random fields)"),
        (["SEQ.HGET", "{p}:m", "none"], "equal", "SEQ.HGET (map, random fields)"),
        (["SEQ.HGET", "str", "b"], "errors", "SEQ.HGET (map, random fields)"),
        (["SEQ.NEXT", "{p}:idmp", "IDMP", "tok"], "equal", "SEQ.NEXT IDMP (new token)"),
        (["SEQ.NEXT", "{p}:idmp", "IDMP", "tok"], "equal", "SEQ.NEXT IDMP (new token)"),
        (["SEQ.NEXT", "{p}:idmp", "COUNT", "3", "IDMP", "tok2"], "equal",
         "SEQ.NEXT IDMP (new token)"),
        (["SEQ.NEXT", "{p}:idmp", "IDMP", "tok"], "equal", "SEQ.NEXT IDMP (new token)"),
        (["SEQ.NEXT", "{p}:idmp", "IDMP", "x" * 65], "errors", "SEQ.NEXT IDMP (new token)"),
    ]
    out = []
    for argv, want, *row in [p + (None,) for p in pairs] + new:
        floor = ["floor." + argv[0].lower()] + [
            a.format(p="f") if isinstance(a, str) else a for a in argv[1:]]
        imid = [a.format(p="s") if isinstance(a, str) else a for a in argv]
        out.append((imid, floor, False, want, row[0]))
    out.append((["OPENID.DEC", plain_openid], ["floor.openid.deck", plain_openid], True,
                "errors", None))
    return out


def references(map_fields):
    """(name, argv, keyspace, seeded, warm-up): Redis's own commands, measured the same way."""
    warm = warm_up(map_fields, "HINCRBY", "h", "1")  # as the map rows' warm-up
    return [
        ("PING", ["PING"], None, False, None),
        ("ECHO (19-byte bulk reply)", ["ECHO", lib.MSGID], None, False, None),
        ("INCR (random keys)", ["INCR", "i:__rand_int__"], WRITE_KEYS, False, None),
        ("floor.noop (a module command that only replies)", ["floor.noop"], None, False, None),
        # The Redis hash `h` with the map's fields and values (a hashtable at this size).
        ("HINCRBY (hash, random fields)", ["HINCRBY", "h", "f:__rand_int__", "1"], map_fields,
         True, warm),
        ("HGET (hash, random fields)", ["HGET", "h", "f:__rand_int__"], map_fields, True, warm),
    ]


def server_kw(server, dbfile, module, floor, keyed, fence=None):
    """lib.Server's arguments: imid (keyed: `imid.openid-keys` = BENCH_KEY) and the floor.
    fence: None, or `imid.fence-replicas` for a primary with a replica (repl-diskless-sync-delay
    0: the replica's full sync starts at once instead of after 5 s)."""
    args = ["--imid.openid-keys", lib.BENCH_KEY] if keyed else []
    if fence is not None:
        args += ["--imid.fence-replicas", fence, "--repl-diskless-sync-delay", "0"]
    return {"bin": server, "dbfilename": dbfile, "args": args,
            "modules": [module, (floor, lib.BENCH_KEY)]}


def attach_replica(server, workdir, label, module, floor, primary):
    """A plain replica of the primary (no valgrind), with both modules, in a directory of its
    own: its full sync writes an RDB file even with `--save ''`, and a primary later started in
    a directory holding one would load it and be "inherited" (every new sequence's first call
    then waits for the fence). Returns it once the primary lists it online."""
    rdir = os.path.join(workdir, f"{label}-replica")
    os.makedirs(rdir, exist_ok=True)
    return lib.start_replica(primary, dir=rdir, log="replica.log", timeout=60,
                             **server_kw(server, "replica.rdb", module, floor, False))


def sample(argv):
    """One concrete command line: each __rand_int__ as redis-benchmark would fill it."""
    return [a.replace("__rand_int__", "000000000042") for a in argv]


def shape(reply):
    if isinstance(reply, list):
        return ("array", len(reply))
    if isinstance(reply, str):
        return ("string", len(reply))
    return (type(reply).__name__,)


def check_and_prepare(server, workdir, module, floor, map_fields):
    """Seeds the RDB for the reads, checks every command line on an ordinary server, and returns
    (rows to measure, lines saying what was skipped or differs, floor commands present)."""
    notes = []
    srv = lib.Server(dir=workdir, log="check.log", timeout=30,
                     **server_kw(server, "seed.rdb", module, floor, False))
    try:
        c = srv.client()
        # Seed sequences s:<12 digits> (imid) and f:<12 digits> (floor) = i + 1, then save them:
        # the read rows' servers load this file, so no seeding runs inside their call() counts.
        seed = ("for i = 0, tonumber(ARGV[1]) - 1 do "
                "redis.call(ARGV[2], string.format(ARGV[3] .. ':%012d', i), i + 1) end")
        for cmd, prefix in (("SEQ.SET", "s"), ("floor.seq.set", "f")):
            r = c("EVAL", seed, "0", str(SEED_KEYS), cmd, prefix)
            if isinstance(r, lib.Error):
                raise RuntimeError(f"seeding with {cmd}: {r}")

        def has(name):
            info = c("COMMAND", "INFO", name)
            return isinstance(info, list) and info and info[0] is not None

        # The map rows' map (imid's, if it has maps), the floor's and Redis's hash: fields
        # f:<12 digits> = i + 1, as redis-benchmark draws them; and the LIMIT keys.
        fill = ("for i = 0, tonumber(ARGV[1]) - 1 do "
                "redis.call(ARGV[2], ARGV[3], string.format('f:%012d', i), i + 1) end")
        maps = [("floor.seq.hset", "fm"), ("HSET", "h")]
        if has("seq.hset"):
            maps.insert(0, ("SEQ.HSET", "sm"))
        for cmd, key in maps:
            r = c("EVAL", fill, "0", str(map_fields), cmd, key)
            if isinstance(r, lib.Error):
                raise RuntimeError(f"seeding {key} with {cmd}: {r}")
        for cmd, key in (("SEQ.SET", "sl"), ("floor.seq.set", "fl")):
            c(cmd, key, str(LIMIT_VALUE))
        if c("SAVE") != "OK":
            raise RuntimeError("SAVE failed")

        plain_openid = c("OPENID.ENC", lib.MSGID, "1", "1")
        uid = c("UID.ENCODE", "1767225600123", "3", "7") if has("uid.encode") else None
        if not isinstance(uid, int):
            uid = c("floor.uid.encode", "1767225600123", "3", "7")
        c("CONFIG", "SET", "imid.openid-keys", lib.BENCH_KEY)
        keyed_openid = c("OPENID.ENC", lib.MSGID, "1", "1")
        c("CONFIG", "SET", "imid.openid-keys", "")
        for v in (plain_openid, keyed_openid):
            if not isinstance(v, str) or isinstance(v, lib.Error):
                raise RuntimeError(f"OPENID.ENC replied {v!r}")

        todo = []
        for r in rows(plain_openid, keyed_openid, str(uid), map_fields):
            if not has(r["imid"][0]):
                notes.append(f"skipped {r['command']}: the module has no {r['imid'][0]} command")
                continue
            if not has(r["floor"][0]):
                notes.append(f"{r['command']}: no floor ({r['floor'][0]} needs AES-NI, "
                             "which this CPU lacks)")
                r = dict(r, floor=None)
            if r["keyed"]:
                c("CONFIG", "SET", "imid.openid-keys", lib.BENCH_KEY)
            a = c(*sample(r["imid"]))
            b = c(*sample(r["floor"])) if r["floor"] else None
            if r["keyed"]:
                c("CONFIG", "SET", "imid.openid-keys", "")
            if r["new"] and isinstance(a, lib.Error):
                notes.append(f"skipped {r['command']}: imid replied {a}")
                continue
            for who, reply in (("imid", a), ("floor", b)):
                if isinstance(reply, lib.Error):
                    raise RuntimeError(f"{r['command']}: {who} replied an error: {reply}")
            if b is not None:
                if r["same"] == "shape":
                    differ = shape(a) != shape(b)
                else:
                    differ = a != b
                if differ and r["same"] == "warn":
                    notes.append(f"{r['command']}: imid replied {a!r}, the floor {b!r} "
                                 f"({r['why']}); measured anyway")
                elif differ:
                    raise RuntimeError(f"{r['command']}: imid replied {a!r}, the floor {b!r}: "
                                       "the floor does not do the same work")
            todo.append(r)
        c("SET", "str", "x")
        measured = {r["command"] for r in todo}
        for imid, floor_argv, keyed, want, needs in extra_checks(plain_openid):
            if not has(floor_argv[0]) or (needs and needs not in measured):
                continue
            if keyed:
                c("CONFIG", "SET", "imid.openid-keys", lib.BENCH_KEY)
            a, b = c(*imid), c(*floor_argv)
            if keyed:
                c("CONFIG", "SET", "imid.openid-keys", "")
            ok = (isinstance(a, lib.Error) and isinstance(b, lib.Error) if want == "errors"
                  else a == b and not isinstance(a, lib.Error))
            if not ok:
                raise RuntimeError(f"{imid!r}: imid replied {a!r}, {floor_argv[0]} {b!r}")
        c.close()
    finally:
        srv.stop()
    return todo, notes


# Each field of a loaded map once, before counting: the first SEQ.HNEXT of a field after a load
# skips the never-reissue gap and replicates its explicit effect, once per field (README); the
# warm rows measure the calls after that, the "first call" row that one-time cost.
WARM = ("for i = 0, tonumber(ARGV[1]) - 1 do "
        "redis.call(ARGV[2], ARGV[3], string.format('f:%012d', i), unpack(ARGV, 4)) end")


def warm_up(map_fields, *argv):
    """EVAL of `argv[0] argv[1] <field> argv[2:]...` for every field of a map."""
    return ["EVAL", WARM, "0", str(map_fields), *argv]


def count(server, workdir, module, floor, argv, n, keys, seeded, keyed, label, warm=None,
          fence=None, info=None):
    """Instructions per call inside call() for n pipelined `argv`, on a fresh server. warm: a
    command run first, its instructions then zeroed (callgrind_control -z). fence: attach one
    replica first and run with imid.fence-replicas = fence, both servers in fresh directories.
    info: a dict that gets the primary's `INFO imid` fence counters after the run (read with
    callgrind's instrumentation off, so not counted)."""
    pdir = workdir
    if fence is not None:
        pdir = os.path.join(workdir, f"{label}-primary")
        os.makedirs(pdir, exist_ok=True)
    srv = lib.Callgrind(label, workdir, dir=pdir, log=os.path.join(workdir, f"{label}.log"),
                        timeout=180, **server_kw(server, "seed.rdb" if seeded else "empty.rdb",
                                                 module, floor, keyed, fence))
    replica = None
    try:
        if fence is not None:
            replica = attach_replica(server, workdir, label, module, floor, srv)
        if warm or info is not None:
            with srv.client(timeout=600) as c:  # every field of a map, under valgrind
                if warm:
                    r = c(*warm)
                    if isinstance(r, lib.Error):
                        raise RuntimeError(f"warm-up {warm[:2]}: {r}")
                before = fence_counters(c) if info is not None else None
            srv.zero()
        lib.benchmark(srv.port, argv, 1, PIPELINE, n, keys)
        if info is not None:
            srv.dump()  # so that reading INFO is not counted
            with srv.client() as c:
                after = fence_counters(c)
            info.update({k: v - before.get(k, 0) for k, v in after.items()})
    finally:
        srv.stop()
        if replica is not None:
            replica.stop(120)
    return srv.total() / n


# The fence's counters (INFO imid) and Redis's error replies (INFO stats); gauges left out.
COUNTERS = ("imid_fence_waits", "imid_fence_timeouts", "imid_fence_refused",
            "imid_fence_unfenced_idmp", "total_error_replies")


def fence_counters(c):
    """The primary's fence counters (INFO imid), error replies (INFO stats) and ROLE calls."""
    got = lib.counters(c, "imid", "stats", "commandstats")
    out = {k.removeprefix("imid_"): got[k] for k in COUNTERS if k in got}
    if "cmdstat_role" in got:
        out["role"] = got["cmdstat_role"]
    return out


def ratio(a, b):
    return a / b if a is not None and b else None


def render(data):
    """The results as markdown lines (also used by server-bench/report.py)."""
    out = [
        "| command | imid instr/call | floor command | floor instr/call | imid / floor |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for r in data["rows"]:
        f = r["floor"]
        rt = ratio(r["imid"], f)
        out.append(f"| {r['command']} | {r['imid']:,.0f} | "
                   f"{'`' + r['floor_command'] + '`' if r['floor_command'] else 'no floor'} | "
                   f"{'' if f is None else f'{f:,.0f}'} | "
                   f"{'' if rt is None else f'{rt:.2f}'} |")
    for r in data["references"]:
        out.append(f"| reference: {r['command']} | {r['instructions']:,.0f} | | | |")
    out += ["", "| target | ratio | status |", "| --- | ---: | --- |"]
    for t in data["targets"]:
        status = "not measured" if t["ratio"] is None else (
            "met" if t["ratio"] <= t["max"] else "short")
        shown = "" if t["ratio"] is None else f"{t['ratio']:.2f}"
        base = f"`{t['floor']}`" if t["floor"].startswith("floor.") else t["floor"]
        out.append(f"| {t['imid']} ≤ {t['max']:.2f} × {base} | {shown} | {status} |")
    out += render_replica(data)
    return out


def render_replica(data):
    """The rows with one replica attached, fence off and on (since 0.3.0), as markdown lines."""
    rows = data.get("replica") or []
    if not rows:
        return []
    alone = {r["command"]: ratio(r["imid"], r["floor"]) for r in data["rows"]}
    out = ["", "With one replica attached (the fence, since 0.3.0): a plain replica (both modules "
           "loaded, not under valgrind), the primary's `imid.fence-replicas` 0 (off) or 1 (on), both servers "
           "in fresh directories; the floor command measured on its own fresh pair the same way. "
           "One warm-up call first (its instructions not counted: the fence's first "
           "acknowledgement, the leases). Counted inside `call()`, which includes the fence's "
           "own `ROLE` reads (through `RedisModule_Call`) but not its timers, `GETACK`s and the "
           "blocked clients' replies. Waits: calls the fence made wait (`imid_fence_waits`).", "",
           "| command | fence | imid instr/call | floor command | floor instr/call | imid / floor "
           "| alone: imid / floor | waits / calls |",
           "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        rt = ratio(r["imid"], r["floor"])
        a = alone.get(r["command"])
        fl = r["floor"]
        out.append(f"| {r['command']} | {r['fence']} | {r['imid']:,.0f} | "
                   f"{'`' + r['floor_command'] + '`' if r['floor_command'] else 'no floor'} | "
                   f"{'' if fl is None else f'{fl:,.0f}'} | {'' if rt is None else f'{rt:.2f}'} | "
                   f"{'' if a is None else f'{a:.2f}'} | "
                   f"{r['imid_info'].get('fence_waits', '?')} / {data['requests']:,} |")
    mx = data.get("replica_target", 1.10)
    out += ["", "| target (one replica attached) | ratio | status |", "| --- | ---: | --- |"]
    for r in rows:
        rt = ratio(r["imid"], r["floor"])
        status = "not measured" if rt is None else ("met" if rt <= mx else "short")
        out.append(f"| {r['command']}, fence {r['fence']} ≤ {mx:.2f} × `{r['floor_command']}` "
                   f"| {'' if rt is None else f'{rt:.2f}'} | {status} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", default=lib.DEFAULT_MODULE)
    ap.add_argument("--requests", type=int, default=20_000,
                    help="commands per measurement (default 20000)")
    ap.add_argument("--map-fields", type=int, default=MAP_FIELDS,
                    help=f"fields of the map and hash the map rows address (default {MAP_FIELDS})")
    ap.add_argument("--only", help="measure only the rows and references whose name contains "
                    "one of these comma-separated texts (the checks still run on all)")
    ap.add_argument("--no-replica", action="store_true",
                    help="skip the rows with a replica attached (fence off and on)")
    ap.add_argument("--replica-fences", default="off,on",
                    help="the fence settings of the replica rows (default off,on)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    module = lib.module_path(args.module)
    server = lib.server_bin()
    lib.need("valgrind", "callgrind_control", "gcc", "redis-benchmark", server)
    lib.stop_on_signal()
    n = args.requests
    with tempfile.TemporaryDirectory(prefix="imid-floor-") as workdir:
        try:
            floor = lib.build_floor(workdir)
            todo, notes = check_and_prepare(server, workdir, module, floor, args.map_fields)
            for line in notes:
                print(line, file=sys.stderr)
            wanted = lambda name: not args.only or any(t in name for t in args.only.split(","))
            checked = {r["command"]: r for r in todo}
            todo = [r for r in todo if wanted(r["command"])]
            results, refs = [], []
            for i, r in enumerate(todo):
                warm = r["warm"] or (None, None)
                imid = count(server, workdir, module, floor, r["imid"], n, r["keys"],
                             r["seeded"], r["keyed"], f"imid{i}", warm[0])
                fl = None
                if r["floor"]:
                    fl = count(server, workdir, module, floor, r["floor"], n, r["keys"],
                               r["seeded"], r["keyed"], f"floor{i}", warm[1])
                results.append({"command": r["command"], "imid": imid,
                                "floor_command": r["floor"][0] if r["floor"] else None,
                                "floor": fl})
                print(f"  {r['command']:<42} imid {imid:>8,.0f}   floor "
                      f"{'-' if fl is None else f'{fl:,.0f}':>8}", file=sys.stderr, flush=True)
            replica = []
            for i, (name, warm_imid, warm_floor) in enumerate(REPLICA_ROWS):
                r = checked.get(name)
                if args.no_replica or r is None or not wanted(f"{name} (replica)"):
                    continue
                for fname, fence in FENCES:
                    if fname not in args.replica_fences.split(","):
                        continue
                    got = {}
                    for who, argv, warm in (("imid", r["imid"], warm_imid),
                                            ("floor", r["floor"], warm_floor)):
                        if argv is None:
                            continue
                        info = {}
                        got[who] = count(server, workdir, module, floor, argv, n, r["keys"],
                                         False, False, f"replica{i}-{fname}-{who}", warm,
                                         fence=fence, info=info)
                        got[who + "_info"] = info
                    replica.append({"command": name, "fence": fname, "imid": got["imid"],
                                    "floor_command": r["floor"][0] if r["floor"] else None,
                                    "floor": got.get("floor"), "imid_info": got["imid_info"],
                                    "floor_info": got.get("floor_info", {})})
                    fl = got.get("floor")
                    print(f"  {name + ' (replica, fence ' + fname + ')':<42} imid "
                          f"{got['imid']:>8,.0f}   floor {'-' if fl is None else f'{fl:,.0f}':>8}"
                          f"   waits {got['imid_info'].get('fence_waits')}",
                          file=sys.stderr, flush=True)
            for i, (name, argv, keys, seeded, warm) in enumerate(references(args.map_fields)):
                if not wanted(name) and argv != ["floor.noop"]:
                    continue
                v = count(server, workdir, module, floor, argv, n, keys, seeded, False, f"ref{i}",
                          warm)
                refs.append({"command": name, "argv": argv, "instructions": v})
                print(f"  {name:<42} {v:>8,.0f}", file=sys.stderr, flush=True)
        finally:
            lib.stop_all()

    by_command = {r["command"]: r for r in results}
    floor_of = {}
    for r in results:  # a floor command's own row comes first (floor.seq.next: SEQ.NEXT's)
        if r["floor_command"]:
            floor_of.setdefault(r["floor_command"], r["floor"])
    floor_of["floor.noop"] = next(r["instructions"] for r in refs if r["argv"] == ["floor.noop"])
    # A target's baseline: a floor command, a reference row, or another imid row.
    base_of = dict(floor_of)
    base_of.update({r["command"]: r["instructions"] for r in refs})
    base_of.update({r["command"]: r["imid"] for r in results})
    targets = []
    for cmd, fcmd, mx in TARGETS:
        imid = by_command.get(cmd, {}).get("imid")
        targets.append({"imid": cmd, "floor": fcmd, "max": mx,
                        "ratio": ratio(imid, base_of.get(fcmd))})
    version = lib.version(server, full=True)
    data = {
        "requests": n,
        "pipeline": PIPELINE,
        "write_keys": WRITE_KEYS,
        "seed_keys": SEED_KEYS,
        "map_fields": args.map_fields,
        "server": version.strip(),
        "rows": results,
        "references": refs,
        "targets": targets,
        "notes": notes,
        "replica": replica,
        "replica_target": REPLICA_TARGET,
    }
    print(f"Instructions per call inside call() (callgrind), {n:,} commands at pipeline "
          f"{PIPELINE}, {data['server']}")
    print("\n".join(render(data)))
    for line in notes:
        print(f"- {line}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)


if __name__ == "__main__":
    main()
