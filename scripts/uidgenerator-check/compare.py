"""Compares imid's `uidgenerator` layout with Baidu's classes (see run.sh), both directions."""
import calendar, json, os, random, subprocess, sys, time

port = sys.argv[1]
EPOCH_STR, EPOCH_MS = "2026-01-01", 1767225600000
DEFAULT_EPOCH_STR, DEFAULT_EPOCH_MS = "2016-05-20", 1463702400000


def java(*args):
    out = subprocess.run(["java", "-Duser.timezone=UTC", "-cp", os.environ["BAIDU_CP"], "Driver", *map(str, args)],
                         check=True, capture_output=True, text=True).stdout
    return out.split()


def redis(*args):
    return subprocess.run(["redis-cli", "-p", port, *map(str, args)], check=True, capture_output=True,
                          text=True).stdout.split()


def imid_decode(uid, *layout):
    r = redis("UID.DECODE", uid, *layout)
    return int(r[1]), int(r[3]), int(r[5])  # time, node, seq


def baidu_parse(epoch, uids):
    out = subprocess.run(["java", "-Duser.timezone=UTC", "-cp", os.environ["BAIDU_CP"], "Driver", "parse", epoch,
                          *map(str, uids)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        d = json.loads(line)
        t = calendar.timegm(time.strptime(d["timestamp"], "%Y-%m-%d %H:%M:%S")) * 1000
        yield int(d["UID"]), t, int(d["workerId"]), int(d["sequence"])


checked = 0
# imid -> Baidu: IDs UID.GEN issued under `uidgenerator` with epoch 2026-01-01, node 123.
ours = [int(x) for x in redis("UID.GEN", "t", "COUNT", 2000)]
for uid, t, worker, seq in baidu_parse(EPOCH_STR, ours):
    assert (t, worker, seq) == imid_decode(uid), (uid, t, worker, seq)
    assert worker == 123
    checked += 1
# Baidu -> imid: IDs DefaultUidGenerator issued with the same bits and epoch, two workers.
for worker in (0, 4194303):
    theirs = [int(x) for x in java("gen", EPOCH_STR, worker, 2000)]
    for uid, t, w, seq in baidu_parse(EPOCH_STR, theirs):
        assert (t, w, seq) == imid_decode(uid, "LAYOUT", "uidgenerator", "EPOCH", EPOCH_MS), uid
        assert w == worker
        checked += 1
# The default layout (epoch 2016-05-20, run out in 2024): BitsAllocator.allocate at the edges and at
# random, against UID.ENCODE ... LAYOUT uidgenerator and UID.DECODE.
rnd = random.Random(20)
cases = [(0, 0, 0), (268435455, 4194303, 8191), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
cases += [(rnd.randrange(1 << 28), rnd.randrange(1 << 22), rnd.randrange(1 << 13)) for _ in range(300)]
for delta, worker, seq in cases:
    uid = int(java("alloc", delta, worker, seq)[0])
    t = DEFAULT_EPOCH_MS + delta * 1000
    assert int(redis("UID.ENCODE", t, worker, seq, "LAYOUT", "uidgenerator")[0]) == uid, (delta, worker, seq)
    assert imid_decode(uid, "LAYOUT", "uidgenerator") == (t, worker, seq), uid
    checked += 1
print(f"uidgenerator: {checked} IDs agree bit for bit with Baidu's BitsAllocator/DefaultUidGenerator")
