#!/usr/bin/env bash
# Bit-exact check of imid's `uidgenerator` layout against Baidu's own UidGenerator classes
# (BitsAllocator, DefaultUidGenerator), compiled from a checkout of
# https://github.com/baidu/uid-generator with Debian's JDK. Not part of `make test`: that source is
# on GitHub only (no package registry carries it, and CI reaches only the registries), and its
# code is not copied into this repository. Run it by hand where the checkout is at hand:
#
#   bash scripts/uidgenerator-check/run.sh /path/to/uid-generator [path/to/libimid.so]
#
# Needs: default-jdk-headless, libcommons-lang-java, libslf4j-java (Debian), redis-server, python3.
# The two stubs under stub/ stand in for the two Spring types those classes touch
# (Assert.isTrue/notNull, InitializingBean); Driver.java calls Baidu's classes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:?usage: run.sh /path/to/baidu/uid-generator [libimid.so]}
module=$(realpath "${2:-target/release/libimid.so}")
work=$(mktemp -d); trap 'redis-cli -p 17998 shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
cp_jars=/usr/share/java/commons-lang.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar
files=(BitsAllocator.java UidGenerator.java exception/UidGenerateException.java impl/DefaultUidGenerator.java
       utils/DateUtils.java worker/WorkerIdAssigner.java)
javac -nowarn -d "$work/out" -cp "$cp_jars" "${files[@]/#/$src/src/main/java/com/baidu/fsg/uid/}" \
  $(find "$here/stub" -name '*.java') "$here/Driver.java"
export BAIDU_CP="$work/out:$cp_jars"
redis-server --port 17998 --bind 127.0.0.1 --save '' --daemonize yes --dir "$work" \
  --loadmodule "$module" imid.uid-layout uidgenerator imid.uid-epoch 1767225600000 imid.uid-node 123 >/dev/null
for _ in $(seq 50); do redis-cli -p 17998 ping >/dev/null 2>&1 && break; sleep 0.1; done
python3 "$here/compare.py" 17998
