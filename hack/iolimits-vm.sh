#!/usr/bin/env bash
# Runs the IO limits test (system-tests) on cgroup v2, for machines whose cgroup v2 has no io
# controller (their own run of IoLimitsTest tests cgroup v1's blkio throttling): in a VM
# (hack/vm.sh) the guest mounts cgroup v2 with the io controller enabled below its root, and
# IoLimitsTest runs against it (STRATA_TEST_CGROUP2): node-server writes the pods' io.max, and a
# process in a pod's container cgroup is timed against the limits. Afterwards this script checks
# the test report (every test ran, none failed or skipped) and prints the rates measured.
# Usage (as root):
#   hack/iolimits-vm.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

class=dev.strata.csi.e2e.IoLimitsTest

vm_prepare_tests "$class"

# protoc.skip: the host's build generated the protocol classes (see hack/expansion-vm.sh).
setup='mkdir -p /tmp/cgroup2 && mount -t cgroup2 none /tmp/cgroup2 && grep -qw io /tmp/cgroup2/cgroup.controllers
echo +io > /tmp/cgroup2/cgroup.subtree_control
export STRATA_TEST_CGROUP2=/tmp/cgroup2 STRATA_TEST_START_SECONDS=240' # a JVM starts in about a minute there
status=0
vm_run "loop ext4" "$setup" mvn_run -o -Dmaven.compiler.useIncrementalCompilation=false -Dprotoc.skip=true \
  test -pl system-tests -am -Dtest="${class##*.}" -Dsurefire.failIfNoSpecifiedTests=false || status=$?

vm_check_reports "$class" || status=1
vm_output_lines "IoLimitsTest: " "$class" >&2 || true
exit "$status"
