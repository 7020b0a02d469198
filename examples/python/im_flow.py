#!/usr/bin/env python3
"""The imid IM flow from Python (redis-py): load the imid_im Functions library, send a few
messages (one retried), sync them in pages, mark them read.

    python3 examples/python/im_flow.py [--host H] [--port P]
    (or IMID_HOST / IMID_PORT; default 127.0.0.1:6379)

Needs redis-py (Debian: python3-redis; pip: redis) and a Redis with imid loaded.
"""
import argparse
import os
import sys

try:
    import redis
except ImportError:
    sys.exit("redis-py is missing: apt-get install python3-redis (or pip install redis)")

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "functions", "imid_im.lua")


class Conv:
    """One conversation; every key carries the hash tag {conv:<id>} (see examples/README.md)."""

    def __init__(self, conv_id, channel_type=1):
        self.tag = "{conv:%s}" % conv_id
        self.channel_type = channel_type
        self.seq = self.tag + ":seq"

    def inbox(self, user):
        return "%s:inbox:%s" % (self.tag, user)

    def trimmed(self, user):
        return "%s:trimmed:%s" % (self.tag, user)

    def read_key(self, user):
        return "%s:read:%s" % (self.tag, user)

    def dedup(self, sender, client_msg_id):
        return "%s:dedup:%s:%s" % (self.tag, sender, client_msg_id)


def send(r, conv, sender, recipients, client_msg_id, body, cap=100, ttl=3600):
    keys = [conv.tag, conv.seq, conv.dedup(sender, client_msg_id)]
    for user in recipients:
        keys += [conv.inbox(user), conv.trimmed(user)]
    # uid: the message's 64-bit UID, as decimal text (exact through Lua, whose numbers are doubles)
    seq, msgid, dup, uid = r.fcall("imid_send", len(keys), *keys, conv.channel_type, sender, body, cap, ttl)
    return seq, msgid, dup == 1, int(uid)


def sync(r, conv, user, last_seq, limit):
    keys = [conv.seq, conv.inbox(user), conv.trimmed(user)]
    # FCALL_RO: imid_sync is flagged no-writes, so a replica may serve it too.
    max_seq, cursor, complete, trimmed, flat = r.fcall_ro("imid_sync", len(keys), *keys, last_seq, limit)
    messages = []
    for i in range(0, len(flat), 2):
        msgid, uid, sender, body = flat[i + 1].split("|", 3)
        messages.append((flat[i], msgid, int(uid), sender, body))
    return max_seq, cursor, complete == 1, trimmed, messages


def read(r, conv, user, seq):
    keys = [conv.read_key(user), conv.inbox(user), conv.seq]
    cursor, unread = r.fcall("imid_read", len(keys), *keys, seq)
    return cursor, unread


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default=os.environ.get("IMID_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("IMID_PORT", "6379")))
    a = ap.parse_args()
    r = redis.Redis(host=a.host, port=a.port, decode_responses=True)
    with open(LIBRARY) as f:
        print("FUNCTION LOAD:", r.function_load(f.read(), replace=True))

    conv = Conv("py-%d" % os.getpid())
    first = None
    for i in range(1, 6):
        seq, msgid, dup, uid = send(r, conv, "alice", ["bob"], "c%d" % i, "hello %d" % i)
        print("send c%d: seq %d msgid %s uid %d" % (i, seq, msgid, uid))
        first = first or (seq, msgid, uid)
    seq, msgid, dup, uid = send(r, conv, "alice", ["bob"], "c1", "hello 1")
    print("retry c1: seq %d msgid %s uid %d duplicate %s" % (seq, msgid, uid, dup))
    if not dup or (seq, msgid, uid) != first:
        sys.exit("the retried send was not deduplicated")

    last, got = 0, []
    while True:
        max_seq, last, complete, trimmed, messages = sync(r, conv, "bob", last, 2)
        for m in messages:
            print("  bob got seq %d %s (uid %d) from %s: %s" % m)
        got += [m[0] for m in messages]
        print("sync: cursor %d max_seq %d complete %s" % (last, max_seq, complete))
        if complete:
            break
    if got != [1, 2, 3, 4, 5]:
        sys.exit("sync returned seqs %r" % got)

    print("read 3: cursor %d unread %d" % read(r, conv, "bob", 3))
    print("late read 1: cursor %d unread %d" % read(r, conv, "bob", 1))
    cursor, unread = read(r, conv, "bob", last)
    print("read %d: cursor %d unread %d" % (last, cursor, unread))
    if unread != 0:
        sys.exit("bob read everything but has %d unread" % unread)


if __name__ == "__main__":
    main()
