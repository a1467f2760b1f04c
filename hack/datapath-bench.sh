#!/usr/bin/env bash
# Benchmark of the data path: what a pod gets from a volume against the pool's own disk. fio with
# direct I/O and libaio on a file on the pool's filesystem (raw), a file in an ext4 filesystem
# volume and a block volume (both allocation: full, made, attached, staged and published by
# controller-server and a node-server), every target written fully once first, 10 s a job, the
# targets alternated round by round, medians, ratios against raw. The pool is an ext4 filesystem of
# its own: on an image file in DATAPATH_IMAGE_DIR attached with direct I/O, or on DATAPATH_POOL_DEVICE
# (formatted!). Takes about 3 x 5 x rounds x runtime seconds plus the first writes.
# Usage (as root):
#   hack/datapath-bench.sh
#   DATAPATH_SIZE_MIB=256 DATAPATH_ROUNDS=1 DATAPATH_RUNTIME=3 hack/datapath-bench.sh   # a quick run
# Settings (environment): DATAPATH_SIZE_MIB (2048), DATAPATH_ROUNDS (3), DATAPATH_RUNTIME (10, seconds
# a job), DATAPATH_IMAGE_DIR (/var/tmp), DATAPATH_POOL_DEVICE (none), DATAPATH_BLOCK_DEVICE (none: the
# raw block baseline, overwritten), DATAPATH_VOLUME_GROUP and DATAPATH_THIN_POOL (none: an LVM pool,
# whose volumes join the targets), DATAPATH_LVM_TYPES (thin; thin,linear), DATAPATH_EXPERIMENTS
# (none; loop-4k,written,queue,xfs-pool: hand-made loop devices, see DatapathBench), DATAPATH_XFS_DEVICE
# (for xfs-pool; formatted), DATAPATH_SKIP_BUILD (set it when the jars are built already, as in the VM).
# On a disk of its own in a VM: hack/datapath-vm.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if ! command -v fio >/dev/null 2>&1; then
  echo "hack: installing fio" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null
fi
if [ -z "${DATAPATH_SKIP_BUILD:-}" ]; then
  mvn_run -q package -DskipTests
  "$REPO_ROOT/hack/aot-cache.sh"
fi
java @"$REPO_ROOT/deploy/jvm.options" --enable-native-access=ALL-UNNAMED "${UNSAFE_ALLOW[@]}" \
  -cp "$REPO_ROOT/controller-server/target/lib/*" "$REPO_ROOT/hack/local/DatapathBench.java" "$REPO_ROOT" \
  "size-mib=${DATAPATH_SIZE_MIB:-2048}" "rounds=${DATAPATH_ROUNDS:-3}" "runtime=${DATAPATH_RUNTIME:-10}" \
  "image-dir=${DATAPATH_IMAGE_DIR:-/var/tmp}" "pool-device=${DATAPATH_POOL_DEVICE:-}" \
  "block-device=${DATAPATH_BLOCK_DEVICE:-}" "volume-group=${DATAPATH_VOLUME_GROUP:-}" \
  "thin-pool=${DATAPATH_THIN_POOL:-}" "lvm-types=${DATAPATH_LVM_TYPES:-}" \
  "experiments=${DATAPATH_EXPERIMENTS:-}" "xfs-device=${DATAPATH_XFS_DEVICE:-}"
