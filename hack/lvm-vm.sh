#!/usr/bin/env bash
# Runs the LVM pool's tests on the real lvm2 tools and device-mapper, which this machine's kernel
# lacks: in a VM (hack/vm.sh) whose Debian kernel has dm-mod, dm-thin-pool and dm-snapshot (loaded
# at boot: the guest's modprobe cannot, and lvcreate --snapshot wants the snapshot target even for
# a thin snapshot), with lvm2 and thin-provisioning-tools from Debian's packages (installed on the
# host here: the guest's root is the host's). LvmPoolSystemTest makes its own volume group on a loop device, with a thin pool,
# and drives volumes through create, attach (the device-mapper device appears), mkfs, mount and
# write, detach (the device goes), reconcile after a restart, online growth under a mounted ext4,
# a thin snapshot of a mounted volume, its restore after the source is deleted, and delete. The
# guest requires device-mapper (STRATA_TEST_LVM=required: its absence fails the test instead of
# skipping it); afterwards this script checks the test report (every test ran, none failed,
# errored or skipped) and the lines the test prints once ext4 grew and a snapshot was taken.
# LvmPipelineTest then runs the pool end to end: controller-server and two node-servers as
# processes, one with --volume-group (a group of the test's own), through every CSI phase with a
# StorageClass of pool: lvm (create, attach, stage, publish, write, online growth, thin snapshot,
# restore, delete; a linear block volume; capacity per class and thin overcommit).
# Not part of .ci/run (an emulated VM: several minutes).
# Usage (as root):
#   hack/lvm-vm.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

if ! command -v lvcreate >/dev/null 2>&1 || ! command -v thin_check >/dev/null 2>&1; then
  echo "hack: installing lvm2 and thin-provisioning-tools" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lvm2 thin-provisioning-tools >/dev/null
fi

classes=(dev.strata.csi.node.local.LvmPoolSystemTest dev.strata.csi.e2e.LvmPipelineTest)
started=$SECONDS

vm_prepare_tests "${classes[@]}"

# LVM writes its metadata backups and archives under /etc/lvm, read-only in the guest (the host's
# root over 9p): a copy on the guest's tmpfs, named by LVM_SYSTEM_DIR. No udev in the guest: the
# tests' and the driver's commands turn udev synchronisation off themselves.
setup='export STRATA_TEST_LVM=required STRATA_TEST_START_SECONDS=240 LVM_SYSTEM_DIR=/tmp/lvm-etc
cp -a /etc/lvm /tmp/lvm-etc && mkdir -p /run/lock/lvm'
tests=$(IFS=,; echo "${classes[*]##*.}")
status=0
vm_run "loop ext4 dm-mod dm-thin-pool dm-snapshot" "$setup" mvn_run -o -Dmaven.compiler.useIncrementalCompilation=false -Dprotoc.skip=true \
  test -pl system-tests -am -Dtest="$tests" -Dsurefire.failIfNoSpecifiedTests=false || status=$?

vm_check_reports "${classes[@]}" || status=1
vm_output_lines "lvm: " "${classes[@]}" >&2 || true
for line in "ext4 on a thin volume grown online" "thin snapshot of a mounted 64 MiB volume took" \
    "pipeline: ext4 on an LVM volume grown online through the CSI calls"; do
  if ! vm_output_lines "lvm: " "${classes[@]}" 2>/dev/null | grep -qF "lvm: $line"; then
    echo "hack: FAILED: no \"lvm: $line\" in the test's output" >&2
    status=1
  fi
done
echo "hack: lvm-vm.sh took $((SECONDS - started)) s, status $status" >&2
exit "$status"
