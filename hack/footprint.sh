#!/usr/bin/env bash
# Footprint benchmark: resident memory of controller-server and node-server idle and after 20 full
# pipelines, and exec-to-ready time (median of several starts), beside two baselines with the same
# options measured in the same run: a bare JVM, and the floor of the servers' stack
# (hack/local/GrpcFloor.java: gRPC over Netty, protobuf, a Probe on a unix socket and on TCP, with
# an AOT cache of its own). The servers run as deployed: deploy/jvm.options, and the AOT
# caches of hack/aot-cache.sh where the JDK has them (25+). Each VARIANT is measured beside them,
# turn by turn: OPTIONS_FILE[@AOT_DIR][#REPO], AOT_DIR "-" for none (e.g. deploy/jvm.options@- for
# the same options without the caches), REPO another checkout whose jars were built.
# Usage (as root): hack/footprint.sh [STARTS=5] [PIPELINES=20] [SETTLE_MILLIS=10000] [VARIANT...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run -q package -DskipTests
"$REPO_ROOT/hack/aot-cache.sh"
echo "machine: $(nproc) cores, $(uname -r), $("$JAVA_HOME/bin/java" -version 2>&1 | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
java @"$REPO_ROOT/deploy/jvm.options" "${UNSAFE_ALLOW[@]}" -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/Footprint.java" "$REPO_ROOT" "${1:-5}" "${2:-20}" "${3:-10000}" "${@:4}"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
