#!/usr/bin/env bash
# Benchmark: GetMetadataDelta of a volume full of data with 1% of its 4 KiB blocks rewritten between
# two snapshots, on an image pool that reflinks (xfs) and on one that copies (ext4): the time and the
# bytes node-server read, beside reading both snapshots whole. Pools are loop-mounted filesystems
# of four times the volume each (sparse files: an ext4 pool writes three times the volume, xfs once), below the system's temporary directory. The LVM pool's
# figure comes from the VM (hack/lvm-vm.sh LvmPoolSystemTest): thin_delta reads metadata only.
# Usage (as root): hack/snapshot-metadata-bench.sh [VOLUME_MIB=10240]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run -q package -DskipTests
"$REPO_ROOT/hack/aot-cache.sh"
# A snapshot of a full volume on ext4 is a copy of it: seconds, past the default deadline of a call to an agent.
STRATA_AGENT_CALL_TIMEOUT=${STRATA_AGENT_CALL_TIMEOUT:-120s} java @"$REPO_ROOT/deploy/jvm.options" "${UNSAFE_ALLOW[@]}" -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/local/SnapshotMetadataBench.java" "$REPO_ROOT" "${1:-10240}"
