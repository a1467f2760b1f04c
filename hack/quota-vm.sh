#!/usr/bin/env bash
# Runs the project-quota tests on a kernel with quota support, for machines whose own kernel has
# none (there they are reported as skipped), in a VM (hack/vm.sh; about ten minutes).
# Usage (as root):
#   hack/quota-vm.sh [maven arguments...]
# Default: the quota tests of controller-server and node-server. The exit status is Maven's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

maven_args=("$@")
if [ ${#maven_args[@]} -eq 0 ]; then
  maven_args=(test -pl system-tests -am -Dtest='SystemProjectQuotasTest,NfsQuotaTest' -Dsurefire.failIfNoSpecifiedTests=false)
fi
vm_run "loop xfs ext4 quota_v2" "" mvn_run -o -Dmaven.compiler.useIncrementalCompilation=false "${maven_args[@]}"
