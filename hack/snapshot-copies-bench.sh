#!/usr/bin/env bash
# Benchmark: snapshot copies between two node-servers (issue 36): a volume full of data, snapshot
# S1 copied whole to the other node, 1% of the volume rewritten in scattered writes of 4 to 64 KiB,
# snapshot S2 copied incrementally on the copy of S1, and S2 copied whole in the same run: bytes
# sent (the sending node's strata_transfer_bytes_total) and time of each, and the incremental
# bytes against the changed bytes (at most 1.1x). The benchmark relays the agents' streams itself
# (ReceiveSnapshotCopy, ReadContent, WriteSnapshotCopy) on the plaintext agent channel, with a real
# controller-server and two node-servers as processes. Pools are loop-mounted filesystems of five
# times the volume and a GiB (FS=xfs, the default: reflinks; FS=ext4: copies).
# Usage (as root): [FS=ext4] hack/snapshot-copies-bench.sh [VOLUME_MIB=1024]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run -q package -DskipTests
"$REPO_ROOT/hack/aot-cache.sh"
STRATA_AGENT_CALL_TIMEOUT=${STRATA_AGENT_CALL_TIMEOUT:-120s} java @"$REPO_ROOT/deploy/jvm.options" "${UNSAFE_ALLOW[@]}" -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/SnapshotCopiesBench.java" "$REPO_ROOT" "${1:-1024}"
