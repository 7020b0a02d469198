#!/usr/bin/env bash
# `make bench` / `make bench-smoke`: criterion benches of the core, then server-level throughput
# and memory (server-bench/server.py), then instructions per command against the floor module
# (server-bench/instructions.py, server-bench/floor.c), then sequence maps against Redis hashes on every server
# of the matrix (server-bench/maps.py: memory per counter, RDB save/load; server-bench/pauses.py: the
# worst single call while a map grows to 2,000,000 fields, widens and shrinks), a SEQ.HSET of 2,000
# new fields against HSET on Redis 7.0 and Valkey 9.1 (server-bench/bulk.py), then IM.SEND against
# send.lua and its parts (server-bench/send.py), then throughput with one replica attached, the
# fence off against on (server-bench/fence.py), then the results page (server-bench/report.py),
# then durable before use on a healthy and a slow disk (server-bench/durable.py).
#
#   server-bench/run.sh          full run, writes server-bench/RESULTS.md (minutes; run on a quiet machine)
#   server-bench/run.sh --smoke  tiny run that only proves every command works and the table is built;
#                         writes target/bench-smoke/RESULTS.md, never the committed page
#
# Expects `make build` to have built target/release/libimid.so. Installs nothing: python3,
# redis-server, redis-benchmark, redis-cli, valgrind and gcc come from scripts/deps.sh. Servers are started on
# free 127.0.0.1 ports in a temp dir by server.py, which stops them on exit or signal.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=full
[ "${1:-}" = "--smoke" ] && mode=smoke

module=target/release/libimid.so
[ -f "$module" ] || { echo "$module missing: run make build first" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (nproc $(nproc))"

if [ "$mode" = smoke ]; then
  out=target/bench-smoke/RESULTS.md
  mkdir -p "$(dirname "$out")"
  rm -f "$out"
  # Criterion only has to compile and run each bench once, not measure well.
  cargo bench --features system-alloc --bench core -- --warm-up-time 0.1 --measurement-time 0.2 \
    >"$tmp/criterion.log" 2>&1 || { cat "$tmp/criterion.log" >&2; exit 1; }
  python3 server-bench/server.py --module "$module" --rounds 1 --requests 2000 \
    --memory-keys 10000 --json "$tmp/server.json"
  # 2,000 commands per figure instead of 20,000: every command and its floor still run under
  # callgrind, after the same checks (no error reply, the same reply as the floor).
  # A map and hash of 1,000 fields instead of 100,000 for the map rows.
  # The rows with a replica attached: the fence on only (each row costs a replica's full sync
  # under valgrind, ~3 s).
  python3 server-bench/instructions.py --module "$module" --requests 2000 --map-fields 1000 \
    --replica-fences on --json "$tmp/floor.json"
  # One server, small maps, one save and load.
  python3 server-bench/maps.py --module "$module" --servers redis7 --sizes 100,1000 --counters 2000 \
    --rdb-fields 1000 --rdb-rounds 1 --json "$tmp/maps.json"
  # One server, a map of 20,000 fields, 2 bulk calls.
  python3 server-bench/pauses.py --module "$module" --servers redis7 --fields 20000 --bulk 2 \
    --json "$tmp/pauses.json"
  # One server, an empty map and one of 20,000 fields, 4 bulk calls, one round.
  python3 server-bench/bulk.py --module "$module" --servers redis7 --sizes 0,20000 --calls 4 \
    --rounds 1 --json "$tmp/bulk.json" >/dev/null
  # IM.SEND against send.lua and its parts: a few sends per figure, a short throughput run.
  python3 server-bench/send.py --module "$module" --smoke --json "$tmp/send.json" >"$tmp/send.md"
  # The fence off against on with a replica: one round, a few hundred calls per load.
  python3 server-bench/fence.py --module "$module" --smoke --json "$tmp/fence.json" >/dev/null
  # Durable before use: one round of small loads on a healthy disk, 2 s of a slow one.
  python3 server-bench/durable.py --module "$module" --smoke >"$tmp/durable.md"
else
  out=server-bench/RESULTS.md
  cargo bench --features system-alloc --bench core
  python3 server-bench/server.py --module "$module" --json "$tmp/server.json"
  python3 server-bench/instructions.py --module "$module" --json "$tmp/floor.json"
  python3 server-bench/maps.py --module "$module" --json "$tmp/maps.json"
  python3 server-bench/pauses.py --module "$module" --json "$tmp/pauses.json"
  python3 server-bench/bulk.py --module "$module" --json "$tmp/bulk.json" >/dev/null
  python3 server-bench/send.py --module "$module" --json "$tmp/send.json" >"$tmp/send.md"
  python3 server-bench/fence.py --module "$module" --json "$tmp/fence.json" >/dev/null
  # Against 0.3.0 where IMID_BASELINE names its .so (git worktree add ../base 7c25f73 and
  # cargo build --release there); this build alone otherwise.
  python3 server-bench/durable.py --module "$module" ${IMID_BASELINE:+--baseline "$IMID_BASELINE"} \
    >"$tmp/durable.md"
fi

python3 server-bench/report.py --server-json "$tmp/server.json" --criterion target/criterion \
  --floor-json "$tmp/floor.json" --maps-json "$tmp/maps.json" --pauses-json "$tmp/pauses.json" \
  --bulk-json "$tmp/bulk.json" \
  --fence-json "$tmp/fence.json" --out "$out"
{ echo; echo "## IM.SEND against send.lua (server-bench/send.py)"; echo; cat "$tmp/send.md"; } >>"$out"
{ echo; echo "## Durable before use (server-bench/durable.py)"; echo; cat "$tmp/durable.md"; } >>"$out"
# The smoke check proper: a table row for every command (server.py and instructions.py already
# failed on any error reply, missing throughput or instruction count, or a reply unlike the
# floor's), a floor-table row for each of the 19 MSGID, SEQ, OPENID and UID command lines and
# the 6 of sequence maps and IDMP, and a memory row of maps against hashes per size.
rows=$(grep -c '^| ' "$out")
[ "$rows" -ge 50 ] || { echo "results table incomplete ($rows rows) in $out" >&2; exit 1; }
floor_rows=$(grep -cE '^\| [A-Z].* \| (`floor\.|no floor)' "$out")
[ "$floor_rows" -ge 25 ] || { echo "floor table incomplete ($floor_rows rows) in $out" >&2; exit 1; }
for r in 'SEQ.NEXT IDMP' 'SEQ.HNEXT (map, random' 'SEQ.HNEXT (map, first' 'SEQ.HGET' \
  'SEQ.HADVANCE (' 'SEQ.HADVANCE ... LIMIT'; do
  grep -qF "| $r" "$out" || { echo "no floor row for $r in $out" >&2; exit 1; }
done
# The replica rows (fence off and on for SEQ.NEXT, MSGID.GEN, UID.GEN) and the fence's loads.
replica_rows=$(grep -cE '^\| (SEQ\.NEXT|MSGID\.GEN|UID\.GEN) \| (off|on) \| [0-9,]+ \|' "$out")
[ "$replica_rows" -ge 3 ] || { echo "replica table incomplete ($replica_rows rows) in $out" >&2; exit 1; }
fence_rows=$(grep -cE '^\| (`SEQ\.NEXT hot`|IDMP|16 IDMP|MULTI).* \| [0-9,]+ \| [0-9,]+ \|' "$out")
[ "$fence_rows" -ge 6 ] || { echo "fence throughput table incomplete ($fence_rows rows) in $out" >&2; exit 1; }
grep -qE '^\| 50 \| [0-9,]+ \| [0-9,]+ \| [0-9,]+ \|' "$out" || { echo "no IM.SEND row at 50 recipients in $out" >&2; exit 1; }
map_rows=$(grep -cE '^\| Redis server v=[0-9.]+ \| [0-9,]+ \| [0-9,]+ \| [0-9.]+ \|' "$out")
[ "$map_rows" -ge 2 ] || { echo "map memory table incomplete ($map_rows rows) in $out" >&2; exit 1; }
bulk_rows=$(grep -cE '^\| Redis server v=[0-9.]+ \| [0-9,]+ \| [0-9]+ \| [0-9,]+ \| [0-9,]+ \|' "$out")
[ "$bulk_rows" -ge 2 ] || { echo "bulk-write table incomplete ($bulk_rows rows) in $out" >&2; exit 1; }
pause_rows=$(grep -cE '^\| Redis server v=[0-9.]+ \| (grow|widen|bulk|shrink) \|' "$out")
[ "$pause_rows" -ge 4 ] || { echo "worst-call table incomplete ($pause_rows rows) in $out" >&2; exit 1; }
grep -qE '^\| idmp c16 P1 \| [0-9,]+ \|' "$out" || { echo "no durable healthy-disk row in $out" >&2; exit 1; }
grep -qE '^\| idmp P1 \| [0-9,]+ \| [0-9,]+ \|' "$out" || { echo "no durable slow-disk row in $out" >&2; exit 1; }
echo "wrote $out"
