#!/usr/bin/env bash
# The data-path benchmark (hack/datapath-bench.sh) on a disk of its own: in the VM (hack/vm.sh,
# Debian's kernel, emulated) with a raw disk image attached as a virtio disk, the host's page cache
# bypassed (cache=none). The disk is partitioned here:
#   1  ext4: the image pool, and the raw file (what a hostPath volume gets) for the filesystem jobs
#   2  the raw block device for the block jobs (a partition: nothing between fio and the disk)
#   3  xfs, for the experiment xfs-pool (an image pool on xfs)
#   4  an LVM volume group with a thin pool, for the LVM pool's targets (DATAPATH_LVM=1), and a
#      thin pool of its own for each thin-* experiment
# Every job runs on every target in one run, alternated round by round; the tables show medians
# and each target against the raw file (filesystem jobs) or the raw partition (block jobs).
# An emulated guest makes every layer's CPU cost large against the disk's: its ratios are an upper
# bound of what the layers cost, not what a real machine sees.
# Not part of .ci/run (an emulated VM: 15 to 25 minutes).
# Usage (as root):
#   hack/datapath-vm.sh
#   DATAPATH_LVM=1 hack/datapath-vm.sh                            # with the LVM pool's targets
#   DATAPATH_EXPERIMENTS=loop-4k,written,queue,xfs-pool hack/datapath-vm.sh
#   DATAPATH_LVM=1 DATAPATH_LVM_TYPES=thin,linear DATAPATH_EXPERIMENTS=thin-1m,thin-1m-nozero hack/datapath-vm.sh
# Settings (environment): DATAPATH_SIZE_MIB (512), DATAPATH_ROUNDS (3), DATAPATH_RUNTIME (5),
# DATAPATH_LVM (empty: no LVM targets), DATAPATH_LVM_TYPES (thin; thin,linear for both),
# DATAPATH_THIN_CHUNK (LVM's default, 64 KiB: the chunk size of the driver's thin pool),
# DATAPATH_EXPERIMENTS (none; thin-* ones need DATAPATH_LVM), DATAPATH_SKIP_BUILD, DATAPATH_DISK_DIR
# (/var/tmp: where the disk image goes; it is removed at the end).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

size=${DATAPATH_SIZE_MIB:-512}
packages=()
command -v sfdisk >/dev/null 2>&1 || packages+=(fdisk)
command -v fio >/dev/null 2>&1 || packages+=(fio)
command -v mkfs.xfs >/dev/null 2>&1 || packages+=(xfsprogs)
if [ -n "${DATAPATH_LVM:-}" ]; then
  command -v lvcreate >/dev/null 2>&1 || packages+=(lvm2)
  command -v thin_check >/dev/null 2>&1 || packages+=(thin-provisioning-tools)
fi
if [ ${#packages[@]} -gt 0 ]; then
  echo "hack: installing ${packages[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi
if [ -z "${DATAPATH_SKIP_BUILD:-}" ]; then
  mvn_run -q package -DskipTests
fi

# Partition sizes in MiB, from the volume size: the pool holds the raw file, the filesystem volume
# (a tenth more), the block volume and up to three experiments' images; the thin pool two volumes,
# the volume group two linear ones beside it.
pool=$((7 * size + 512))
raw=$((size + 16))
xfs=$((size + size / 2 + 320))
lvm=$((6 * size + 512))
# Each thin-* experiment: a thin pool of its own beside, the volume's size and room for metadata.
for experiment in ${DATAPATH_EXPERIMENTS//,/ }; do
  case $experiment in thin-*) lvm=$((lvm + size + 128)) ;; esac
done
disk=$(mktemp "${DATAPATH_DISK_DIR:-/var/tmp}/strata-datapath-disk-XXXXXX.img")
# shellcheck disable=SC2064
trap "rm -f '$disk'" EXIT
# Allocated, so that the host's filesystem allocates nothing during the runs.
fallocate -l $(((pool + raw + xfs + lvm + 2) * 1024 * 1024)) "$disk"
sfdisk --quiet "$disk" <<EOF
label: gpt
size=${pool}MiB
size=${raw}MiB
size=${xfs}MiB
size=${lvm}MiB
EOF

lvm_settings=
# A JVM takes a minute or more to start under emulation (minutes on a busy host), and a node agent
# may miss a renewal or two there: the controller's default renewal interval (a lease of 30 s)
# instead of LocalCluster's 1 s; and a first CreateVolume there can outlast the controller's
# default deadline of 5 s for the agent's answer (a run failed so): 120 s.
setup='export STRATA_TEST_START_SECONDS=600 STRATA_AGENT_RENEW_INTERVAL=10s STRATA_AGENT_CALL_TIMEOUT=120s'
if [ -n "${DATAPATH_LVM:-}" ]; then
  # As hack/lvm-vm.sh: LVM's backups under a writable /etc/lvm, udev synchronisation off (no udev).
  # The thin pool gets LVM's defaults (64 KiB chunks, new chunks zeroed), as an admin's would,
  # unless DATAPATH_THIN_CHUNK names another chunk size (lvcreate --chunksize: 512k, 1m).
  setup+='
export LVM_SYSTEM_DIR=/tmp/lvm-etc
cp -a /etc/lvm /tmp/lvm-etc && mkdir -p /run/lock/lvm
config="activation { udev_sync = 0 udev_rules = 0 verify_udev_operations = 0 monitoring = 0 }"
vgcreate --config "$config" strata-bench /dev/vda4 >/dev/null
lvcreate --config "$config" --type thin-pool '"${DATAPATH_THIN_CHUNK:+--chunksize $DATAPATH_THIN_CHUNK }"'--size '"$((3 * size + 256))"'m \
  --name bench-thin strata-bench >/dev/null'
  lvm_settings="DATAPATH_VOLUME_GROUP=strata-bench DATAPATH_THIN_POOL=bench-thin DATAPATH_LVM_TYPES=${DATAPATH_LVM_TYPES:-thin}"
fi

# In a subshell: vm_run sets an EXIT trap of its own, which would replace the one removing the disk.
# shellcheck disable=SC2086
(VM_DISKS=$disk vm_run "loop ext4 xfs dm-mod dm-thin-pool dm-snapshot" "$setup" env DATAPATH_SKIP_BUILD=1 \
  DATAPATH_POOL_DEVICE=/dev/vda1 DATAPATH_BLOCK_DEVICE=/dev/vda2 DATAPATH_XFS_DEVICE=/dev/vda3 $lvm_settings \
  DATAPATH_SIZE_MIB="$size" DATAPATH_ROUNDS="${DATAPATH_ROUNDS:-3}" DATAPATH_RUNTIME="${DATAPATH_RUNTIME:-5}" \
  DATAPATH_EXPERIMENTS="${DATAPATH_EXPERIMENTS:-}" hack/datapath-bench.sh)
