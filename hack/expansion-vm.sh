#!/usr/bin/env bash
# Runs node-server's expansion tests where ext4 can grow online, for machines that withhold
# CAP_SYS_RESOURCE from root (there ext4's online resize fails, and the tests check only that it
# fails cleanly): in a VM (hack/vm.sh), whose root has every capability, ImageExpansionTest and
# ExpansionTest grow ext4, xfs and btrfs online, and ext4 and xfs detached and then staged again.
# The guest requires the capability (STRATA_TEST_CAP_SYS_RESOURCE=required: its absence fails the
# tests), and afterwards this script checks the test reports: both classes ran with no failure,
# error or skip, and the ext4 cases reported their grown sizes (the lines "expansion: ext4 ...",
# printed only once the filesystem grew and the data read back).
# Usage (as root):
#   hack/expansion-vm.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

classes=(dev.strata.csi.node.local.pool.ImageExpansionTest dev.strata.csi.e2e.ExpansionTest)
# The ext4 lines the tests print, one per case that must have grown ext4.
expected=("ext4 online (image pool)" "ext4 online (CSI calls)" "ext4 offline (CSI calls)")

# The guest runs this worktree's build: bring it up to date here, where compiling is fast.
vm_prepare_tests "${classes[@]}"

# protoc.skip: the host's build generated the protocol classes; generating them again would have
# javac recompile them all, which takes over ten minutes under emulation.
setup='export STRATA_TEST_CAP_SYS_RESOURCE=required STRATA_TEST_START_SECONDS=240' # a JVM starts in about a minute there
tests=$(IFS=,; echo "${classes[*]##*.}")
status=0
vm_run "loop ext4 xfs btrfs" "$setup" mvn_run -o -Dmaven.compiler.useIncrementalCompilation=false -Dprotoc.skip=true \
  test -pl system-tests -am -Dtest="$tests" -Dsurefire.failIfNoSpecifiedTests=false || status=$?

vm_check_reports "${classes[@]}" || status=1
vm_output_lines "expansion: " "${classes[@]}" >&2 || true
for line in "${expected[@]}"; do
  if ! vm_output_lines "expansion: " "${classes[@]}" 2>/dev/null | grep -qF "expansion: $line:"; then
    echo "hack: FAILED: no \"expansion: $line\" in the reports: that ext4 case did not grow the filesystem" >&2
    status=1
  fi
done
exit "$status"
