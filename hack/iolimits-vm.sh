#!/usr/bin/env bash
# Runs node-server's IO limits test on cgroup v2, for machines whose cgroup v2 has no io
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

# The guest runs this worktree's build: bring it up to date here, where compiling is fast.
echo "hack: compiling node-server and its tests on the host" >&2
mvn_run -q -pl node-server -am test-compile
reports=$REPO_ROOT/node-server/target/surefire-reports
rm -f "$reports/TEST-$class.xml" "$reports/$class.txt" "$reports/$class-output.txt"

# protoc.skip: the host's build generated the protocol classes (see hack/expansion-vm.sh).
setup='mkdir -p /tmp/cgroup2 && mount -t cgroup2 none /tmp/cgroup2 && grep -qw io /tmp/cgroup2/cgroup.controllers
echo +io > /tmp/cgroup2/cgroup.subtree_control
export STRATA_TEST_CGROUP2=/tmp/cgroup2 STRATA_TEST_START_SECONDS=240' # a JVM starts in about a minute there
status=0
vm_run "loop ext4" "$setup" mvn_run -o -Dmaven.compiler.useIncrementalCompilation=false -Dprotoc.skip=true \
  test -pl node-server -am -Dtest="${class##*.}" -Dsurefire.failIfNoSpecifiedTests=false || status=$?

report=$reports/TEST-$class.xml
if [ ! -f "$report" ]; then
  echo "hack: FAILED: no test report for $class" >&2
  exit 1
fi
summary=$(grep -o '<testsuite [^>]*>' "$report" | grep -o ' \(tests\|failures\|errors\|skipped\|time\)="[^"]*"' | tr -d '\n')
echo "hack: $class:$summary" >&2
if ! grep -q ' tests="[1-9]' <<<"$summary" || grep -q ' \(failures\|errors\|skipped\)="[^0]' <<<"$summary"; then
  echo "hack: FAILED: $class did not pass every test it ran, or ran none" >&2
  status=1
fi
grep -h '^IoLimitsTest: ' "$reports/$class-output.txt" >&2 || true
exit "$status"
