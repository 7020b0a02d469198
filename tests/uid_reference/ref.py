"""Reads requests from stdin, one per line, and answers each with lines `id time_ms node seq` as
third-party libraries (pinned in requirements*.txt) compute them; tests/it/uid_reference.rs compares
them with imid's UID.DECODE. Our code driving theirs: the bit layouts come from the libraries.

  gen <layout> <node> <count>   IDs the library generates for machine `node`, decomposed by it
  dec <layout> <id>             the library's decomposition of `id`

<layout> and the library that answers for it:
  instagram      snowflake-id-toolkit 0.6.0, InstagramSnowflakeIDGenerator / InstagramSnowflakeID
  sonyflake      sonyflake-py 1.3.0 (Sonyflake v1's port: SonyFlake, SonyFlake.decompose);
                 run with PYTHONPATH=target/uid-ref/sonyflake-v1, as its module name is v2's too
  sonyflake-v2   sonyflake 2.0.3 (Sonyflake v2's port, its v2 defaults: start 2025-01-01, 10 ms)
  mastodon       Mastodon.py 2.3.3, MaybeSnowflakeIdType: an ID from a datetime (whole seconds,
                 low 16 bits 0) and an ID's datetime (whole seconds); `-` where it gives no field
"""
import datetime
import sys

UTC = datetime.timezone.utc


def instagram():
    from snowflake_id_toolkit.instagram import InstagramSnowflakeID, InstagramSnowflakeIDGenerator

    epoch = 1314220021721  # Instagram's, as the library's docstring gives it

    def dec(i):
        x = InstagramSnowflakeID(i)
        return (int(x), x.timestamp_ms(epoch), x.node_id(), x.sequence())

    def gen(node, n):
        g = InstagramSnowflakeIDGenerator(node_id=node, epoch=epoch)
        return [dec(int(g.generate_next_id())) for _ in range(n)]

    return gen, dec


def sonyflake_v1():
    import sonyflake.sonyflake as v1

    if not hasattr(v1, "SonyFlake"):
        sys.exit("sonyflake-py (v1) not found: run with PYTHONPATH=target/uid-ref/sonyflake-v1")
    start_ms = round(v1.SONYFLAKE_EPOCH.timestamp() * 1000)

    def dec(i):
        d = v1.SonyFlake.decompose(i)
        return (d["id"], start_ms + d["time"] * 10, d["machine_id"], d["sequence"])

    def gen(node, n):
        g = v1.SonyFlake(machine_id=lambda: node)
        return [dec(g.next_id()) for _ in range(n)]

    return gen, dec


def sonyflake_v2():
    from sonyflake import Sonyflake

    if not hasattr(Sonyflake, "to_time"):
        sys.exit("found Sonyflake v1's port where v2's (sonyflake 2.0.3) was expected")
    start = datetime.datetime(2025, 1, 1, tzinfo=UTC)  # Sonyflake v2's default StartTime

    def make(node):
        return Sonyflake(start_time=start, machine_id=node)

    reader = make(0)

    def dec(i, g=None):
        g = g or reader
        d = g.decompose(i)
        return (i, round(g.to_time(i).timestamp() * 1000), d.machine_id, d.sequence)

    def gen(node, n):
        g = make(node)
        return [dec(g.next_id(), g) for _ in range(n)]

    return gen, dec


def mastodon():
    from mastodon.types_base import MaybeSnowflakeIdType

    def dec(i):
        t = MaybeSnowflakeIdType(i).to_datetime()
        return (i, round(t.timestamp()) * 1000, "-", "-")

    def gen(node, n):
        if node != 0:
            sys.exit("Mastodon IDs have no node field")
        out = []
        for _ in range(n):
            i = int(str(MaybeSnowflakeIdType(datetime.datetime.now(UTC))))
            out.append((i, dec(i)[1], 0, "-"))
        return out

    return gen, dec


LIBS = {
    "instagram": instagram,
    "sonyflake": sonyflake_v1,
    "sonyflake-v2": sonyflake_v2,
    "mastodon": mastodon,
}


def main():
    cache = {}
    out = []
    for req in sys.stdin.read().splitlines():
        w = req.split()
        if not w:
            continue
        if w[1] not in cache:
            cache[w[1]] = LIBS[w[1]]()
        gen, dec = cache[w[1]]
        if w[0] == "gen":
            rows = gen(int(w[2]), int(w[3]))
        elif w[0] == "dec":
            rows = [dec(int(w[2]))]
        else:
            sys.exit(f"unknown request {req}")
        out.extend(" ".join(str(x) for x in r) for r in rows)
    print("\n".join(out))


main()
