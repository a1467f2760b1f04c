#!/usr/bin/env bash
# Runs the LVM pool's tests on the real lvm2 tools and device-mapper, which this machine's kernel
# lacks: in a VM (hack/vm.sh) whose Debian kernel has dm-mod, dm-thin-pool and dm-snapshot (loaded
# at boot: the guest's modprobe cannot, and lvcreate --snapshot wants the snapshot target even for
# a thin snapshot), with lvm2 and thin-provisioning-tools from Debian's packages (installed on the
# host here: the guest's root is the host's). Each test makes its own volume group on a loop
# device, with a thin pool:
# - LvmPoolSystemTest drives the pool itself through create, attach (the device-mapper device
#   appears), mkfs, mount and write, detach (the device goes), reconcile after a restart, online
#   growth under a mounted ext4, a thin snapshot of a mounted volume, its restore after the source
#   is deleted, and delete; and the changed-block engine on two thin snapshots (thin_delta);
# - LvmZeroingSystemTest fills the group's free extents and its thin pool's data with a pattern by
#   volumes it then removes; a linear and a thin volume the pool makes there read raw show no byte
#   of it (made without the pool's zeroing, they do); then times a linear volume's creation with and
#   without zeroing;
# - LvmPipelineTest runs it end to end: controller-server and two node-servers as processes, one
#   with --volume-group and no image pool (--image-pool=false), through every CSI phase with a StorageClass of pool: lvm (create, attach,
#   stage, publish, write, online growth, thin snapshot, restore, delete; a linear block volume;
#   capacity per class and thin overcommit; copies between nodes: a thin snapshot restored into
#   the other node's image pool, an image-pool volume cloned into linear and thin volumes, over
#   extents a deleted volume left full of old data, and those cloned back, byte for byte);
# - LvmSnapshotMetadataTest calls the SnapshotMetadata service on controller-server for thin
#   snapshots of a block volume with known blocks written between them (the ranges, paging, errors);
# - LvmSnapshotCopySystemTest keeps snapshot copies in the pool: one received whole into a thin
#   volume, the next on a thin snapshot of it with only the changed ranges written and a range of
#   zeros discarded (unmapped), both read out again incrementally (thin_delta on the copies), a restore;
# - LvmSnapshotCopiesNodeLossTest: three node-servers, each with a volume group of its own; thin ext4
#   and block snapshots with copies: "2" restore on the node holding the copy and onto a third after
#   their node is killed and its volume group removed, byte for byte; deleted, nothing is left;
# - LvmCrashRecoveryTest kills node-server at each crash point of the LVM pool's steps and checks
#   that the retried calls finish the volume's life with its data;
# - LvmGroupSnapshotTest takes group snapshots of thin ext4 and xfs volumes under a writer (A then
#   B, each fsynced), restores the members and checks the pair and the data: plain volumes where
#   the kernel nests lvcreate's freeze in the group's FIFREEZE (Linux 6.8 and later; before, the
#   group must be FAILED_PRECONDITION with nothing left), LUKS2 ones on any kernel, a LUKS2 image of
#   the node's image pool with a LUKS2 thin volume; and refuses a group with a linear member;
# then csi-sanity (CSI_SANITY, default /opt/csi-sanity/csi-sanity; built by you, not part of this
# repository; CSI_SANITY=skip: not run) runs every spec with the StorageClass parameters pool: lvm against a node-server
# with a volume group of its own, and no logical volume of the driver's may be left.
# The guest requires device-mapper (STRATA_TEST_LVM=required: its absence fails the tests instead
# of skipping them); afterwards this script checks the test reports (every test ran, none failed,
# errored or skipped) and the lines the tests print. Not part of .ci/run (an emulated VM: minutes).
# Usage (as root):
#   hack/lvm-vm.sh                          # every class, then csi-sanity
#   hack/lvm-vm.sh LvmCrashRecoveryTest     # some of them (simple names), then csi-sanity
#   LVM_CRASH_POINTS=EXPAND_RECORDED,RESTORE_COPIED hack/lvm-vm.sh LvmCrashRecoveryTest   # some crash points
#   VM_KERNEL=linux-image-6.12-amd64 hack/lvm-vm.sh LvmGroupSnapshotTest   # on Debian 12's other kernel
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sanity=${CSI_SANITY:-/opt/csi-sanity/csi-sanity}
all=(dev.strata.csi.node.local.pool.LvmPoolSystemTest dev.strata.csi.node.local.pool.LvmZeroingSystemTest dev.strata.csi.e2e.LvmPipelineTest dev.strata.csi.e2e.LvmCrashRecoveryTest
  dev.strata.csi.e2e.LvmSnapshotMetadataTest dev.strata.csi.node.local.pool.LvmSnapshotCopySystemTest
  dev.strata.csi.e2e.LvmSnapshotCopiesNodeLossTest dev.strata.csi.e2e.LvmGroupSnapshotTest)

if [ "${1:-}" = --in-vm ]; then # the guest's part
  shift
  source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"
  status=0
  vm_guest_maven "$@" || status=1
  if [ "$sanity" = skip ]; then
    echo "vm: csi-sanity not run (CSI_SANITY=skip)"
  elif [ -x "$sanity" ]; then
    config='activation { udev_sync = 0 udev_rules = 0 verify_udev_operations = 0 monitoring = 0 }'
    truncate --size 4G /tmp/sanity-pv.img
    pv=$(losetup --find --show /tmp/sanity-pv.img)
    vgcreate --config "$config" strata-sanity "$pv" >/dev/null
    lvcreate --config "$config" --type thin-pool --size 3g --name thinpool strata-sanity >/dev/null
    printf 'pool: lvm\n' > /tmp/lvm-parameters.yaml
    rm -rf "$REPO_ROOT/system-tests/target/lvm-sanity" && mkdir -p "$REPO_ROOT/system-tests/target/lvm-sanity"
    # Emulated, an lvm2 command takes seconds: agents renew every 10 s (a 30 s lease) as by default,
    # not every second, calls to them get 120 s, and the suite 3 hours, not ginkgo's one. The
    # servers' logs (debug: each call's and each lvm2 command's duration) go to system-tests/target.
    SANITY_RENEW_INTERVAL=10s SANITY_AGENT_CALL_TIMEOUT=120s SANITY_START_SECONDS=600 LOG_VERBOSITY=5 \
      SANITY_LOGS="$REPO_ROOT/system-tests/target/lvm-sanity" \
      VOLUME_GROUP=strata-sanity THIN_POOL=thinpool STRATA_PREBUILT=1 hack/csi-sanity.sh "$sanity" mount \
      --csi.testvolumeparameters /tmp/lvm-parameters.yaml --csi.testvolumesize 67108864 --ginkgo.timeout 3h \
      --ginkgo.junit-report "$REPO_ROOT/system-tests/target/lvm-sanity/junit.xml" || status=1
    left=$(lvs --config "$config" --noheadings -o lv_name @strata.csi.dev | grep -c . || true)
    echo "vm: csi-sanity with pool: lvm left $left logical volumes of the driver's"
    [ "$left" = 0 ] || status=1
    echo "vm: csi-sanity done $(cut -d' ' -f1 /proc/uptime) s after boot"
  else
    echo "vm: FAILED: no csi-sanity binary at $sanity (set CSI_SANITY)" >&2
    status=1
  fi
  exit $status
fi
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

if ! command -v lvcreate >/dev/null 2>&1 || ! command -v thin_check >/dev/null 2>&1 || ! command -v cryptsetup >/dev/null 2>&1; then
  echo "hack: installing lvm2, thin-provisioning-tools and cryptsetup-bin" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lvm2 thin-provisioning-tools \
    cryptsetup-bin >/dev/null
fi

started=$SECONDS
classes=()
for class in "${all[@]}"; do
  if [ $# -eq 0 ] || [[ " $* " == *" ${class##*.} "* ]]; then
    classes+=("$class")
  fi
done
[ ${#classes[@]} -gt 0 ] || { echo "hack: no such class among ${all[*]##*.}" >&2; exit 2; }
tests=$(IFS=,; echo "${classes[*]##*.}")
maven_args=(test -pl system-tests -am -Dtest="$tests" -Dsurefire.failIfNoSpecifiedTests=false)
# LVM_CRASH_POINTS=CREATE_ALLOCATED,ATTACH_RECORDED: only those scenarios of LvmCrashRecoveryTest.
[ -z "${LVM_CRASH_POINTS:-}" ] || maven_args+=(-Dstrata.lvm.crashPoints="$LVM_CRASH_POINTS")
# The jars csi-sanity.sh starts, then the tests' classes.
echo "hack: packaging the programs on the host" >&2
mvn_run -q package -DskipTests -pl node-server,controller-server -am
vm_prepare_tests "${classes[@]}"

# LVM writes its metadata backups and archives under /etc/lvm, read-only in the guest (the host's
# root over 9p): a copy on the guest's tmpfs, named by LVM_SYSTEM_DIR. No udev in the guest: the
# tests' and the driver's commands turn udev synchronisation off themselves.
# A JVM takes a minute or more to start under emulation, several on a busy machine: 10 minutes at most.
# dm-crypt for LvmGroupSnapshotTest's encrypted volumes, as hack/luks-vm.sh has it.
setup='export STRATA_TEST_LVM=required STRATA_TEST_LUKS=required STRATA_TEST_START_SECONDS=600 LVM_SYSTEM_DIR=/tmp/lvm-etc DM_DISABLE_UDEV=1
cp -a /etc/lvm /tmp/lvm-etc && mkdir -p /run/lock/lvm /run/cryptsetup'
status=0
vm_run "loop ext4 xfs dm-mod dm-thin-pool dm-snapshot dm-crypt xts algif_skcipher" "$setup" env CSI_SANITY="$sanity" bash hack/lvm-vm.sh --in-vm "${maven_args[@]}" \
  || status=$?

vm_check_reports "${classes[@]}" || status=1
vm_output_lines "lvm: " "${classes[@]}" >&2 || true
# The lines each class prints once its checks passed.
declare -A lines=([LvmPoolSystemTest]="ext4 on a thin volume grown online|thin snapshot of a mounted 64 MiB volume took|changed blocks of thin snapshots:"
  [LvmZeroingSystemTest]="zeroing: linear|zeroing cost:"
  [LvmPipelineTest]="pipeline: ext4 on an LVM volume grown online through the CSI calls|copies: a thin snapshot restored into node-b's image pool|copies: an image-pool block volume cloned into node-a's LVM pool, linear and thin|copies: LVM volumes, detached and attached, cloned back" [LvmCrashRecoveryTest]="crash suite:"
  [LvmSnapshotMetadataTest]="snapshot metadata of thin snapshots through the CSI calls:"
  [LvmSnapshotCopySystemTest]="snapshot copies: whole, then"
  [LvmGroupSnapshotTest]="group snapshot of thin ext4 + xfs|group snapshot of LUKS2 on thin, ext4 + xfs|group snapshot of LUKS2 on an image (ext4) and on thin LVM (xfs)|group snapshot with a linear member:"
  [LvmSnapshotCopiesNodeLossTest]="copies: thin ext4 and block snapshots with two copies restored after their node's volume group was lost")
for class in "${classes[@]}"; do
  IFS='|' read -r -a wanted <<<"${lines[${class##*.}]}"
  # Read whole first: grep -q stops at its first match, and under pipefail the writer's SIGPIPE would count as no match.
  printed=$(vm_output_lines "lvm: " "$class" 2>/dev/null || true)
  for line in "${wanted[@]}"; do
    if ! grep -qF "lvm: $line" <<<"$printed"; then
      echo "hack: FAILED: no \"lvm: $line\" in ${class##*.}'s output" >&2
      status=1
    fi
  done
done
echo "hack: lvm-vm.sh took $((SECONDS - started)) s, status $status" >&2
exit "$status"
