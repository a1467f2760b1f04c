#!/usr/bin/env bash
# Benchmark: snapshot time of a 1 GiB volume with 512 MiB of data on a pool that reflinks (xfs) and
# on one that copies (ext4), and the throughput of its restore onto another node through
# controller-server, each beside `cp` of the same image in the same run, as ratios; and
# controller-server's resident memory during the restores. Pools are loop-mounted filesystems.
# Usage (as root): hack/snapshot-bench.sh [ROUNDS=3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run -q package -DskipTests
"$REPO_ROOT/hack/aot-cache.sh"
java @"$REPO_ROOT/deploy/jvm.options" "${UNSAFE_ALLOW[@]}" -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/SnapshotBench.java" "$REPO_ROOT" "${1:-3}"
