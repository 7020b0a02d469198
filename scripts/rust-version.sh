#!/usr/bin/env bash
# Checks that Cargo.toml's `rust-version` is exactly the oldest Rust the locked dependencies
# accept: the highest `rust-version` any package in Cargo.lock's resolve declares for this
# platform (normal, build and dev dependencies: `cargo test` builds them all). Run by `make lint`.
set -euo pipefail
cd "$(dirname "$0")/.."
host="$(rustc -vV | sed -n 's/^host: //p')"
cargo metadata --format-version 1 --locked --filter-platform "$host" | python3 -c '
import json, sys
meta = json.load(sys.stdin)
def key(v):
    return tuple(int(x) for x in v.split("."))
root = meta["resolve"]["root"]
ours = None
need, who = (0,), []
for p in meta["packages"]:
    v = p.get("rust_version")
    if p["id"] == root:
        ours = v
        continue
    if not v:
        continue
    k = key(v) + (0,) * (3 - len(key(v)))
    if k > need:
        need, who = k, [p["name"] + " " + p["version"]]
    elif k == need:
        who.append(p["name"] + " " + p["version"])
want = ".".join(str(x) for x in need[:2]) if need[2] == 0 else ".".join(map(str, need))
if ours is None:
    sys.exit("Cargo.toml has no rust-version; the locked dependencies need " + want)
if key(ours) + (0,) * (3 - len(key(ours))) != need:
    sys.exit("Cargo.toml says rust-version = \"%s\", but the locked dependencies need %s (%s)"
             % (ours, want, ", ".join(sorted(who)[:5])))
print("rust-version %s: what the locked dependencies need (%s)" % (ours, ", ".join(sorted(who)[:5])))
'
