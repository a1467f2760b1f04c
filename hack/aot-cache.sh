#!/usr/bin/env bash
# Trains the servers' AOT caches (JDK 25 and later: classes loaded and linked, profiles) into
# target/aot on a real run (hack/local/AotTraining.java: a controller-server and a node-server,
# full pipelines with real loop devices and mounts, as root). The demo and the benchmarks start
# the servers with them. Does nothing on an older JDK, or when the caches are newer than the jars
# and deploy/jvm.options. The image trains its own at build time (Dockerfile).
# With OPTIONS_FILE and OUT_DIR it trains, always, caches for other JVM options into OUT_DIR: a
# hack/footprint.sh variant OPTIONS_FILE@OUT_DIR then runs with caches that match its options.
# Usage (as root, after mvn package): hack/aot-cache.sh [PIPELINES=5] [OPTIONS_FILE OUT_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

java_feature=$("$JAVA_HOME/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
if [ "${java_feature%%.*}" -lt 25 ] 2>/dev/null; then
  echo "hack: Java $java_feature has no AOT cache (JDK 25+); the servers start without one" >&2
  exit 0
fi
if [ $# -ge 3 ]; then
  exec java @"$REPO_ROOT/deploy/jvm.options" "${UNSAFE_ALLOW[@]}" -cp "$REPO_ROOT/controller-server/target/lib/*" \
    "$REPO_ROOT/hack/local/AotTraining.java" "$REPO_ROOT" "$3" "$1" "$(realpath "$2")"
fi
caches="$REPO_ROOT/target/aot"
fresh=true
for cache in "$caches/controller-server.aot" "$caches/node-server.aot"; do
  for input in "$REPO_ROOT"/controller-server/target/controller-server.jar "$REPO_ROOT"/node-server/target/node-server.jar \
      "$REPO_ROOT"/node-server/target/lib/*.jar "$REPO_ROOT/deploy/jvm.options"; do
    [ "$cache" -nt "$input" ] || fresh=false
  done
done
if $fresh; then
  exit 0
fi
echo "hack: training the servers' AOT caches (target/aot)" >&2
rm -rf "$caches" "$caches.new"
java @"$REPO_ROOT/deploy/jvm.options" "${UNSAFE_ALLOW[@]}" -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/AotTraining.java" "$REPO_ROOT" "$caches.new" "${1:-5}"
mv "$caches.new" "$caches"
