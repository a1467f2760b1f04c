#!/usr/bin/env bash
# Runs the encryption at rest tests (system-tests' EncryptionTest and EncryptedLvmTest) with real
# dm-crypt, which this machine's kernel lacks: in a VM (hack/vm.sh) whose Debian kernel loads
# dm-mod, dm-crypt, xts and the kernel's crypto API for programs (algif_skcipher, which cryptsetup
# uses for LUKS2 key slots), and dm-thin-pool and dm-snapshot for the LVM pool, with cryptsetup
# from Debian's cryptsetup-bin and lvm2 (installed on the host here: the guest's root is the host's).
# - EncryptionTest drives an encrypted image-pool volume through every phase with real processes
#   (create, attach, stage, publish, a marker and data written, expansion, snapshot, restore onto
#   a second node-server, read back), checks that no image holds the marker, that a wrong or
#   missing key is refused at stage, kills node-server at each encryption step of stage and
#   unstage, and runs fio in an encrypted and a plain volume side by side;
# - EncryptedLvmTest does it for thin and linear logical volumes (two node-servers with a volume
#   group each): no logical volume holds the marker, a thin snapshot cut before a passphrase
#   rotation is restored onto the other node (refused with the new passphrase alone, opened and
#   rotated with both), a rotation while the volume is published and written (the old passphrase
#   then opens nothing, the new one does, the data is intact), and node-server killed at each step
#   of a rotation.
# The guest requires dm-crypt (STRATA_TEST_LUKS=required: its absence fails the tests instead of
# skipping them); afterwards this script checks the test reports and prints the tests' figures.
# Not part of .ci/run (an emulated VM: 30 to 45 minutes for EncryptionTest).
# Usage (as root):
#   hack/luks-vm.sh                      # both classes
#   hack/luks-vm.sh EncryptedLvmTest     # some of them (simple names)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

if ! command -v cryptsetup >/dev/null 2>&1 || ! command -v fio >/dev/null 2>&1 || ! command -v lvcreate >/dev/null 2>&1 \
    || ! command -v thin_check >/dev/null 2>&1; then
  echo "hack: installing cryptsetup-bin, fio, lvm2 and thin-provisioning-tools" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cryptsetup-bin fio lvm2 \
    thin-provisioning-tools >/dev/null
fi

started=$SECONDS
classes=()
for class in dev.strata.csi.e2e.EncryptionTest dev.strata.csi.e2e.EncryptedLvmTest; do
  if [ $# -eq 0 ] || [[ " $* " == *" ${class##*.} "* ]]; then
    classes+=("$class")
  fi
done
[ ${#classes[@]} -gt 0 ] || { echo "hack: no such class: $*" >&2; exit 2; }
tests=$(IFS=,; echo "${classes[*]##*.}")

vm_prepare_tests "${classes[@]}"

# No udev in the guest: libdevmapper makes the device nodes itself (DM_DISABLE_UDEV); the driver
# names a mapping by its /dev/dm-N node, which devtmpfs makes either way. LVM writes its metadata
# backups under /etc/lvm, read-only in the guest: a copy on the guest's tmpfs (as hack/lvm-vm.sh).
# A JVM takes a minute or more to start under emulation: 10 minutes at most.
setup='export STRATA_TEST_LUKS=required STRATA_TEST_LVM=required STRATA_TEST_START_SECONDS=600 DM_DISABLE_UDEV=1 LVM_SYSTEM_DIR=/tmp/lvm-etc
mkdir -p /run/cryptsetup /run/lock/lvm && cp -a /etc/lvm /tmp/lvm-etc'
status=0
vm_run "loop xfs ext4 dm-mod dm-crypt xts algif_skcipher dm-thin-pool dm-snapshot" "$setup" mvn_run -o \
  -Dmaven.compiler.useIncrementalCompilation=false -Dprotoc.skip=true test -pl system-tests -am -Dtest="$tests" \
  -Dsurefire.failIfNoSpecifiedTests=false || status=$?

vm_check_reports "${classes[@]}" || status=1
for class in "${classes[@]}"; do
  vm_output_lines "${class##*.}: " "$class" >&2 || true
done
echo "hack: luks-vm.sh took $((SECONDS - started)) s, status $status" >&2
exit "$status"
