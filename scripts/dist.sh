#!/usr/bin/env bash
# `make dist`: the release tarball dist/imid-<version>-<os>-<arch>.tar.gz (linux-x86_64 here),
# holding one directory imid-<version>-<os>-<arch>/ with
#   libimid.so  README.md  CHANGELOG.md  LICENSE
#   docs/  examples/  server-bench/README.md    what README.md links to, and what the docs link
#   server-bench/RESULTS.md  tests/clients/     to in turn (git's tracked files: no node_modules;
#                                               tests/clients/ holds the client programs
#                                               docs/clients.md shows)
#   SHA256SUMS                                  sha256sum of every other file
# The version is Cargo.toml's (cargo pkgid), never a copy of it. Builds the release module
# first (a no-op when it is up to date). Prints the tarball's path on its last line.
#   IMID_DIST_DIR   where the tarball goes (default ./dist)
set -euo pipefail
cd "$(dirname "$0")/.."

# `cargo pkgid` prints path+file:///...#imid@0.1.0 (older cargo: ...#0.1.0).
id=$(cargo pkgid)
version=${id##*[#@]}
case "$version" in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "cannot read the version from cargo pkgid: $id" >&2; exit 1 ;;
esac
platform="$(uname -s | tr '[:upper:]' '[:lower:]')-$(uname -m)"
name="imid-$version-$platform"
out=${IMID_DIST_DIR:-$PWD/dist}

cargo build --release >&2
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$name"
install -m 755 target/release/libimid.so "$stage/$name/libimid.so"
install -m 644 README.md CHANGELOG.md LICENSE "$stage/$name/"
linked=$(git ls-files -- docs examples server-bench/README.md server-bench/RESULTS.md tests/clients)
case "$linked" in
  *docs/*) ;;
  *) echo "git ls-files lists no docs/: make dist runs in a git checkout" >&2; exit 1 ;;
esac
for f in $linked; do
  mode=644
  [ -x "$f" ] && mode=755
  install -D -m "$mode" "$f" "$stage/$name/$f"
done
(cd "$stage/$name" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)

# Reproducible archive: sorted names, no owner, one timestamp (the last commit's, or
# SOURCE_DATE_EPOCH), gzip without a name or time of its own.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$stage" -cf - "$name" | gzip -n -9 >"$out/$name.tar.gz.tmp"
mv "$out/$name.tar.gz.tmp" "$out/$name.tar.gz"
(cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
echo "$out/$name.tar.gz"
