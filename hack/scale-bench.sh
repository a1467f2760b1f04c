#!/usr/bin/env bash
# Scale benchmark (docs/scale.md): controller-server as deployed (deploy/jvm.options, under the
# memory limit docs/scale.md advises for the number of volumes, or the one given), and one
# process serving the real agent API for N simulated nodes (hack/local/ScaleNodes.java: each its own
# port, in-memory pool of VOLUMES volumes and a snapshot, 2 ms per call, lease renewals every 10 s
# with inventory reports as node-server sends them). For each N, a run with every node healthy and
# one with 1% of them hung (calls accepted, never answered; leases renewed). Prints a table row per run.
# Usage: hack/scale-bench.sh [NODES=10,100,1000,5000] [VOLUMES=100] [MEMORY_LIMIT=auto|512m|none]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run -q package -DskipTests -pl controller-server -am
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true # 5,000 nodes: a listening socket each
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $("$JAVA_HOME/bin/java" -version 2>&1 | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
java -Xmx2g -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/ScaleBench.java" "$REPO_ROOT" "${1:-10,100,1000,5000}" "${2:-100}" "${3:-auto}"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
