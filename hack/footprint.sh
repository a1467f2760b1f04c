#!/usr/bin/env bash
# Footprint benchmark: resident memory of controller-server and node-server idle and after 20 full
# pipelines, and exec-to-ready time (median of several starts), beside a bare JVM with the same
# options (deploy/jvm.options) measured in the same run.
# Usage (as root): hack/footprint.sh [STARTS=5] [PIPELINES=20] [SETTLE_MILLIS=10000]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run -q package -DskipTests
echo "machine: $(nproc) cores, $(uname -r), $("$JAVA_HOME/bin/java" -version 2>&1 | head -1)"
java @"$REPO_ROOT/deploy/jvm.options" -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/Footprint.java" "$REPO_ROOT" "${1:-5}" "${2:-20}" "${3:-10000}"
