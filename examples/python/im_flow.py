#!/usr/bin/env python3
"""The imid IM flow from Python (redis-py): load the imid_im Functions library, send a few
messages with IM.SEND (one retried: IDMP; a retry through the library's imid_send, which does
exactly what IM.SEND does and is the place to change that storage model), sync them in pages
(IM.SYNC), mark them read (IM.READ: one cursor map per conversation, clamped to its seq), pull
a user's changed kinds of data (IM.CHANGE and IM.PULL: the incremental pull over one sequence
map), then the keyless commands (MSGID.DECODE, MSGID.HASH,
OPENID.ENC/DEC), against one server or a Redis Cluster.

    python3 examples/python/im_flow.py [--host H] [--port P]
    (or IMID_HOST / IMID_PORT; default 127.0.0.1:6379)
    python3 examples/python/im_flow.py --cluster H:P[,H:P...]   (or IMID_CLUSTER)

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

    def read_key(self):
        # every member's read cursor: one sequence map, field = user
        return self.tag + ":read"


class User:
    """One user's sync sequences (a sequence map, field = kind of data), the per-kind change
    logs and what their cap dropped; every key carries the hash tag {<user>}."""

    def __init__(self, user_id):
        self.seqs = "app:seq:{%s}" % user_id
        self.trimmed = "app:trimmed:{%s}" % user_id

    def log(self, kind):
        return self.seqs.replace("app:seq:", "app:log:") + ":" + kind


# imid's keyless commands: pure functions of their arguments, answered alike by every node.
KEYLESS = ("MSGID.ENCODE", "MSGID.DECODE", "MSGID.HASH", "OPENID.ENC", "OPENID.DEC",
           "UID.ENCODE", "UID.DECODE")


def cluster_client(nodes):
    """A RedisCluster that can send imid's keyless commands.

    redis-py's cluster client finds a command's keys in COMMAND's reply and routes by them; a
    command without keys that is not in its own routing table fails with "No way to dispatch
    this command to Redis Cluster. Missing key." (redis-py 4.3 to 8.1 alike). Telling it once
    per client where they go is enough: any node for the pure commands, every primary for
    MSGID.FLOOR (it raises the floor of the node it reaches). `command_flags` is the client's
    own table for Redis's keyless commands (PING, TIME, ...); per call,
    `target_nodes=rc.get_random_node()` works too. (`target_nodes=RedisCluster.RANDOM` works in
    redis-py 4.3 but no longer in 8.1, which looks for a key first.)
    """
    from redis.cluster import ClusterNode, RedisCluster

    startup = [ClusterNode(h, int(p)) for h, p in (n.rsplit(":", 1) for n in nodes.split(","))]
    rc = RedisCluster(startup_nodes=startup, decode_responses=True)
    for command in KEYLESS:
        rc.command_flags[command] = RedisCluster.RANDOM
    rc.command_flags["MSGID.FLOOR"] = RedisCluster.PRIMARIES
    return rc


def fields(reply):
    """A reply with named fields as a dict: a map under RESP3, a flat list under RESP2."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2]))


def send_keys(conv, recipients):
    keys = [conv.tag, conv.seq]
    for user in recipients:
        keys += [conv.inbox(user), conv.trimmed(user)]
    return keys


def send(r, conv, sender, recipients, client_msg_id, body, cap=100):
    """IM.SEND: the keys and arguments of send.lua, without numkeys. uid: the message's 64-bit
    UID, as decimal text (as the script replies it). A retry (dup) replies the original seq, and
    the IDs read back from an inbox (None when no inbox named holds the message any more)."""
    keys = send_keys(conv, recipients)
    seq, msgid, dup, uid = r.execute_command("IM.SEND", *keys, conv.channel_type, sender,
                                             client_msg_id, body, cap)
    return seq, msgid, dup == 1, None if uid is None else int(uid)


def send_lua(r, conv, sender, recipients, client_msg_id, body, cap=100):
    """The same send through the library's imid_send (examples/lua/send.lua): the script to
    edit when the storage model must change (member format, trimming, more keys)."""
    keys = send_keys(conv, recipients)
    seq, msgid, dup, uid = r.fcall("imid_send", len(keys), *keys, conv.channel_type, sender,
                                   client_msg_id, body, cap)
    return seq, msgid, dup == 1, None if uid is None else int(uid)


def sync(r, conv, user, last_seq, limit):
    keys = [conv.seq, conv.inbox(user), conv.trimmed(user)]
    # IM.SYNC: sync.lua's keys and arguments without numkeys; read-only, so a replica may
    # serve it too (with the fence on, a primary answers once its replicas hold the page).
    max_seq, cursor, complete, trimmed, flat = r.execute_command("IM.SYNC", *keys, last_seq, limit)
    messages = []
    for i in range(0, len(flat), 2):
        msgid, uid, sender, body = flat[i + 1].split("|", 3)
        messages.append((flat[i], msgid, int(uid), sender, body))
    return max_seq, cursor, complete == 1, trimmed, messages


def read(r, conv, user, seq):
    keys = [conv.read_key(), conv.inbox(user), conv.seq]
    cursor, unread = r.execute_command("IM.READ", *keys, user, seq)
    return cursor, unread


def change(r, user, kind, text, cap=100):
    """Records a change of one kind of the user's data; returns its seq (SEQ.HNEXT)."""
    keys = [user.seqs, user.trimmed, user.log(kind)]
    return r.execute_command("IM.CHANGE", *keys, kind, text, cap)


def pull(r, user, held):
    """The kinds whose seq is above the one held ({kind: seq}), each as
    (seq now, reset, [(seq, change), ...]); the other kinds are not in the reply."""
    kinds = sorted(held)
    keys = [user.seqs, user.trimmed] + [user.log(k) for k in kinds]
    args = [x for k in kinds for x in (k, held[k])]
    flat = r.execute_command("IM.PULL", *keys, *args)
    out = {}
    for i in range(0, len(flat), 4):
        kind, seq, reset, changes = flat[i:i + 4]
        out[kind] = (seq, reset == 1, list(zip(changes[::2], changes[1::2])))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default=os.environ.get("IMID_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("IMID_PORT", "6379")))
    ap.add_argument("--cluster", default=os.environ.get("IMID_CLUSTER", ""),
                    help="host:port[,host:port...] of a Redis Cluster")
    a = ap.parse_args()
    if a.cluster:
        r = cluster_client(a.cluster)
    else:
        r = redis.Redis(host=a.host, port=a.port, decode_responses=True)
    with open(LIBRARY) as f:
        # On a cluster redis-py sends FUNCTION LOAD to every primary.
        print("FUNCTION LOAD:", r.function_load(f.read(), replace=True))

    conv = Conv("py-%d" % os.getpid())
    sent = []
    for i in range(1, 6):
        seq, msgid, dup, uid = send(r, conv, "alice", ["bob"], "c%d" % i, "hello %d" % i)
        print("send c%d: seq %d msgid %s uid %d" % (i, seq, msgid, uid))
        sent.append((seq, msgid, uid))
    seq, msgid, dup, uid = send(r, conv, "alice", ["bob"], "c1", "hello 1")
    print("retry c1: seq %d msgid %s uid %d duplicate %s" % (seq, msgid, uid, dup))
    if not dup or (seq, msgid, uid) != sent[0]:
        sys.exit("the retried send was not deduplicated")
    if r.zcard(conv.inbox("bob")) != 5:
        sys.exit("the retry stored the message again")
    # The script knows IM.SEND's sends (the same IDMP token): a retry through it is a duplicate.
    seq, msgid, dup, uid = send_lua(r, conv, "alice", ["bob"], "c2", "hello 2")
    print("retry c2 through imid_send: seq %d msgid %s duplicate %s" % (seq, msgid, dup))
    if not dup or (seq, msgid, uid) != sent[1]:
        sys.exit("the script did not recognise IM.SEND's send")

    last, got = 0, []
    while True:
        max_seq, last, complete, trimmed, messages = sync(r, conv, "bob", last, 2)
        for m in messages:
            print("  bob got seq %d %s (uid %d) from %s: %s" % m)
        got += [m[0] for m in messages]
        print("sync: cursor %d max_seq %d complete %s" % (last, max_seq, complete))
        if complete:
            break
    if got != [s[0] for s in sent]:
        sys.exit("sync returned seqs %r" % got)

    third, first = sent[2][0], sent[0][0]
    print("read %d: cursor %d unread %d" % ((third,) + read(r, conv, "bob", third)))
    print("late read %d: cursor %d unread %d" % ((first,) + read(r, conv, "bob", first)))
    cursor, unread = read(r, conv, "bob", last + 100)
    print("read %d: cursor %d unread %d" % (last + 100, cursor, unread))
    if (cursor, unread) != (last, 0):
        sys.exit("an ack past the max seq %d gave cursor %d, %d unread" % (last, cursor, unread))

    # The incremental pull: the phone holds a seq per kind and pulls only what moved.
    user = User("py-%d" % os.getpid())
    phone = {k: 0 for k in ("friendship", "group", "conversation", "profile")}
    for kind, text in (("friendship", "+bob"), ("friendship", "+carol"), ("group", "join g1")):
        print("change %s %r: seq %d" % (kind, text, change(r, user, kind, text)))
    for want in (["friendship", "group"], []):
        got = pull(r, user, phone)
        print("pull: %d kind(s) changed %s" % (len(got), sorted(got)))
        for kind, (seq, reset, changes) in sorted(got.items()):
            print("  %s -> seq %d: %s" % (kind, seq, changes))
            phone[kind] = seq
        if sorted(got) != want:
            sys.exit("pulled %s, expected %s" % (sorted(got), want))
    server = fields(r.execute_command("SEQ.HGETALL", user.seqs))
    print("SEQ.HGETALL %s: %s" % (user.seqs, server))
    if server != {k: v for k, v in phone.items() if v}:
        sys.exit("the phone holds %s, the server %s" % (phone, server))

    # Keyless commands: on a cluster they go where cluster_client routes them.
    msgid = sent[0][1]
    d = fields(r.execute_command("MSGID.DECODE", msgid))
    print("MSGID.DECODE %s: time %d seq %d channel_type %d hash %d"
          % (msgid, d["time"], d["seq"], d["channel_type"], d["hash"]))
    if r.execute_command("MSGID.HASH", conv.tag) != d["hash"]:
        sys.exit("MSGID.HASH of the conversation differs from the hash in its ID")
    if a.cluster:
        slot = r.keyslot(conv.tag)
        print("hash >> 8 = %d, slot of %s = %d" % (d["hash"] >> 8, conv.tag, slot))
        if d["hash"] >> 8 != slot:
            sys.exit("the ID does not carry its conversation's slot")
    uid = sent[0][2]
    u = fields(r.execute_command("UID.DECODE", uid))
    print("UID.DECODE %d: time %d node %d seq %d" % (uid, u["time"], u["node"], u["seq"]))
    if r.execute_command("UID.ENCODE", u["time"], u["node"], u["seq"]) != uid:
        sys.exit("UID.ENCODE of UID.DECODE's fields is another UID")
    openid = r.execute_command("OPENID.ENC", msgid, 1, 2)
    o = fields(r.execute_command("OPENID.DEC", openid))
    print("OPENID.ENC: %s -> OPENID.DEC msgid %s msg_type %d direction %d"
          % (openid, o["msgid"], o["msg_type"], o["direction"]))
    if (o["msgid"], o["msg_type"], o["direction"]) != (msgid, 1, 2):
        sys.exit("OPENID round trip failed")
    print("ok")


if __name__ == "__main__":
    main()
