#!/usr/bin/env bash
# Benchmark: latency of every RPC and of the full pipeline against the same pipeline done with
# plain tools in the same run, and CreateVolume throughput at 1, 16 and 100 callers.
# Usage (as root): hack/bench.sh [ROUNDS=30] [VOLUMES_PER_LEVEL=200] [WARM_UP_ROUNDS=20]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run -q package -DskipTests
"$REPO_ROOT/hack/aot-cache.sh"
# The benchmark's own JVM plays kubelet and the sidecars, Go programs that compile nothing while
# they run. With the JVM's default compilers it would spend a core on C2 compilations during the
# measured rounds, taking it from the servers and the tools alike on a small machine; it runs with
# the servers' options instead (C1 only, compiled early).
java @"$REPO_ROOT/deploy/jvm.options" "${UNSAFE_ALLOW[@]}" -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/Bench.java" "$REPO_ROOT" "${1:-30}" "${2:-200}" "${3:-20}"
