#!/usr/bin/env bash
# The main job on an embedded default: builds the servers, starts controller-server and two
# node-servers locally (with AOT caches on JDK 25+, trained first by hack/aot-cache.sh), drives one
# volume through create -> attach -> stage -> publish and back with real loop devices and mounts,
# and checks nothing is left. No cluster; run as root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

echo "hack: building the servers (mvn package; a first run downloads the dependencies for a few minutes)" >&2
mvn_run -q package -DskipTests
"$REPO_ROOT/hack/aot-cache.sh"
java --enable-native-access=ALL-UNNAMED "${UNSAFE_ALLOW[@]}" -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/Demo.java" "$REPO_ROOT"
