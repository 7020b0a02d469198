"""imid through Valkey GLIDE for Python (`valkey-glide`, asyncio), against one server or a Redis
Cluster: the calls docs/clients.md shows. tests/it/clients.rs runs it and checks every line it
prints against the servers (which node served each call, what the keys hold).

  imid_glide.py --host H --port P --replica-port R --tags a,b   one primary (fence on) and its replica
  imid_glide.py --cluster H:P[,H:P...] --tags a,b,c [--routes none]

Per tag `t` (keys `{t}:...`, one conversation): SEQ.NEXT with an IDMP token and its retry,
MSGID.GEN, UID.GEN (one, then COUNT 3), IM.SEND and its retry, MSGID.DECODE, SEQ.GET (in a
Cluster from the replica of the key's slot), WRONGTYPE and an IDMP error. Standalone, then the
fence: a call that waits for a replica put to sleep, with GLIDE's default request timeout
(250 ms, below imid.fence-timeout) and with one above it.

`--routes none` leaves out every route argument (what the test does to see its checks fail).
"""
import argparse
import asyncio
import time

from glide import (
    GlideClient,
    GlideClientConfiguration,
    GlideClusterClient,
    GlideClusterClientConfiguration,
    NodeAddress,
    ReadFrom,
    RequestError,
    SlotKeyRoute,
    SlotType,
)

# Above imid.fence-timeout (1000 ms by default): a fenced call that waits gets imid's NOREPLICAS
# answer instead of GLIDE's TimeoutError.
REQUEST_TIMEOUT_MS = 3000


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


class Imid:
    """A GLIDE client and the route of each call: in a Cluster a keyed imid command goes to the
    primary of its key's slot (GLIDE routes a command it does not know by its first argument,
    which is MSGID.GEN's channel type, not its key), a read-only one (SEQ.GET) to a replica."""

    def __init__(self, client, cluster, routes):
        self.c = client
        self.cluster = cluster
        self.routes = routes

    async def call(self, args, route=None):
        if not self.cluster:
            return await self.c.custom_command(args)
        return await self.c.custom_command(args, route if self.routes == "key" else None)

    def primary(self, key):
        return SlotKeyRoute(SlotType.PRIMARY, key)

    def replica(self, key):
        return SlotKeyRoute(SlotType.REPLICA, key)


async def conversation(db, tag):
    t = "{%s}" % tag
    seq = t + ":seq"
    p = db.primary(t)

    # A send's sequence value, once per token: the retry gets the first call's value, marked.
    last, dup = await db.call(["SEQ.NEXT", seq, "IDMP", "client-msg-1"], p)
    print("seq.next", tag, last, dup)
    last, dup = await db.call(["SEQ.NEXT", seq, "IDMP", "client-msg-1"], p)
    print("seq.retry", tag, last, dup)

    msgid = text(await db.call(["MSGID.GEN", "1", t], p))
    print("msgid.gen", tag, msgid)
    # Python ints hold a UID exactly.
    print("uid.gen", tag, await db.call(["UID.GEN", t], p))
    print("uid.count", tag, *(await db.call(["UID.GEN", t, "COUNT", "3"], p)))

    # IM.SEND: [seq, msgid, duplicate, uid]; the UID comes as decimal text and stays text.
    send = ["IM.SEND", t, seq, t + ":inbox:bob", t + ":trimmed:bob", "1", "alice", "c1", "hi", "100"]
    for name in ("im.send", "im.retry"):
        s, m, d, u = await db.call(send, p)
        print(name, tag, s, text(m), d, text(u))

    # A map under RESP3, GLIDE's default protocol: {b"time": ..., b"seq": ..., ...}.
    fields = await db.call(["MSGID.DECODE", msgid], p)
    print("msgid.decode", tag, *(fields[k] for k in (b"time", b"seq", b"channel_type", b"hash")))

    # A replica may answer a read once it has the writes: WAIT for one, then read from it.
    await db.call(["WAIT", "1", "2000"], p)
    for _ in range(2):
        print("seq.get", tag, await db.call(["SEQ.GET", seq], db.replica(seq)))

    await db.call(["SET", t + ":str", "x"], p)
    for what, args in (
        ("wrongtype", ["SEQ.NEXT", t + ":str"]),
        ("idmp", ["SEQ.NEXT", seq, "COUNT", "2", "IDMP", "client-msg-1"]),
    ):
        try:
            await db.call(args, p)
            print("error." + what, tag, "none")
        except RequestError as e:
            print("error." + what, tag, type(e).__name__, e)


async def sleep_replica(port, secs):
    """DEBUG SLEEP on the replica, over a plain socket (a GLIDE standalone client refuses a
    replica alone: "No primary node found"); returns when the replica answers again."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"DEBUG SLEEP %s\r\n" % secs.encode())
    await w.drain()
    line = await r.readline()
    w.close()
    return line.strip()


async def fenced(db, key, case, secs, replica_port):
    """A call the fence makes wait: the replica sleeps `secs`, so nothing acknowledges."""
    sleeper = asyncio.create_task(sleep_replica(replica_port, secs))
    await asyncio.sleep(0.2)
    t0 = time.monotonic()
    try:
        v = await db.call(["SEQ.NEXT", key, "IDMP", case])
        print("fence", case, "ok", round((time.monotonic() - t0) * 1000), v)
    except RequestError as e:
        print("fence", case, type(e).__name__, round((time.monotonic() - t0) * 1000), e)
    assert (await sleeper) == b"+OK"
    # The same token once the replica is back: the value recorded for it, marked a duplicate.
    # Until the primary has its next acknowledgement (within about a second), a replica silent
    # for 2 s still counts as gone and the call is refused at once: retried as a user would.
    refused = 0
    while True:
        try:
            last, dup = await db.call(["SEQ.NEXT", key, "IDMP", case])
            break
        except RequestError as e:
            if "NOREPLICAS" not in str(e) or refused >= 30:
                raise
            refused += 1
            await asyncio.sleep(0.1)
    print("fence.retry", case, last, dup, refused)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int)
    ap.add_argument("--replica-port", type=int)
    ap.add_argument("--cluster")
    ap.add_argument("--tags", required=True)
    ap.add_argument("--routes", choices=["key", "none"], default="key")
    a = ap.parse_args()
    tags = a.tags.split(",")

    if a.cluster:
        nodes = [NodeAddress(h, int(p)) for h, p in (n.rsplit(":", 1) for n in a.cluster.split(","))]
        # PREFER_REPLICA: without it GLIDE opens its replica connections without READONLY, and a
        # replica route gets MOVED to the primary.
        config = GlideClusterClientConfiguration(
            nodes, read_from=ReadFrom.PREFER_REPLICA, request_timeout=REQUEST_TIMEOUT_MS
        )
        db = Imid(await GlideClusterClient.create(config), True, a.routes)
    else:
        config = GlideClientConfiguration(
            [NodeAddress(a.host, a.port)], request_timeout=REQUEST_TIMEOUT_MS
        )
        db = Imid(await GlideClient.create(config), False, a.routes)

    for tag in tags:
        await conversation(db, tag)

    if a.replica_port:
        key = "{%s}:fence" % tags[0]
        short = Imid(await GlideClient.create(GlideClientConfiguration([NodeAddress(a.host, a.port)])), False, "key")
        # GLIDE's default request timeout (250 ms) ends the call while the fence still waits.
        await fenced(short, key, "default-timeout", "0.8", a.replica_port)
        # One above imid.fence-timeout: the call gets imid's NOREPLICAS answer.
        await fenced(db, key, "long-timeout", "1.6", a.replica_port)
        await short.c.close()
    await db.c.close()
    print("ok")


asyncio.run(main())
