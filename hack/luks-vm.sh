#!/usr/bin/env bash
# Runs the encryption at rest test (system-tests' EncryptionTest) with real dm-crypt, which this
# machine's kernel lacks: in a VM (hack/vm.sh) whose Debian kernel loads dm-mod, dm-crypt, xts and
# the kernel's crypto API for programs (algif_skcipher, which cryptsetup uses for LUKS2 key slots),
# with cryptsetup from Debian's cryptsetup-bin (installed on the host here: the guest's root is the
# host's). The test drives an encrypted volume through every phase with real processes (create,
# attach, stage, publish, a marker and data written, expansion, snapshot, restore onto a second
# node-server, read back), checks that no image holds the marker, that a wrong or missing key is
# refused at stage, kills node-server at each encryption step, and runs fio in an encrypted and a
# plain volume side by side. The guest requires dm-crypt (STRATA_TEST_LUKS=required: its absence
# fails the test instead of skipping it); afterwards this script checks the test report and
# prints the test's figures. Not part of .ci/run (an emulated VM: 30 to 45 minutes).
# Usage (as root):
#   hack/luks-vm.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

if ! command -v cryptsetup >/dev/null 2>&1 || ! command -v fio >/dev/null 2>&1; then
  echo "hack: installing cryptsetup-bin and fio" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cryptsetup-bin fio >/dev/null
fi

class=dev.strata.csi.e2e.EncryptionTest

vm_prepare_tests "$class"

# No udev in the guest: libdevmapper makes the device nodes itself (DM_DISABLE_UDEV); the driver
# names a mapping by its /dev/dm-N node, which devtmpfs makes either way.
setup='export STRATA_TEST_LUKS=required STRATA_TEST_START_SECONDS=240 DM_DISABLE_UDEV=1
mkdir -p /run/cryptsetup'
status=0
vm_run "loop xfs dm-mod dm-crypt xts algif_skcipher" "$setup" mvn_run -o -Dmaven.compiler.useIncrementalCompilation=false \
  -Dprotoc.skip=true test -pl system-tests -am -Dtest="${class##*.}" -Dsurefire.failIfNoSpecifiedTests=false || status=$?

vm_check_reports "$class" || status=1
vm_output_lines "EncryptionTest: " "$class" >&2 || true
exit "$status"
