#!/usr/bin/env bash
# Runs every test, those tagged root included (-DexcludedTestGroups=): unit tests, the tests that
# start the servers as real processes on real unix sockets, the manifests' tests, and the conformance suite against the servers in containers of
# the project's image. For the last, a Docker engine (installed and started if missing) and a
# base image built here (hack/base-image.sh) are made sure of first; where that fails the
# container run is skipped with the reason, except under CI (CI=true), where it fails.
set -euo pipefail
# --unit: only the tests not tagged root, as a user without root (hack/unit.sh).
if [ "${1:-}" = --unit ]; then
  shift
  exec "$(dirname "${BASH_SOURCE[0]}")/unit.sh" "$@"
fi
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

echo "hack: making sure of a Docker engine and a base image for the container tests" >&2
container_flags=()
if [ "${CI:-}" = true ]; then
  container_flags+=(-Dstrata.requireDocker=true)
fi
if "$REPO_ROOT/hack/docker-engine.sh" && base_image=$("$REPO_ROOT/hack/base-image.sh"); then
  container_flags+=("-Dstrata.baseImage=$base_image")
elif [ "${CI:-}" = true ]; then
  echo "hack: CI needs a Docker engine and a base image for the container tests" >&2
  exit 1
else
  echo "hack: no Docker engine or base image; the container tests will say so and skip" >&2
fi

# Every module runs whatever failed before it: a failed test does not stop Maven
# (maven.test.failure.ignore), so node-server, which needs controller-server's jar, and the
# deploy tests still run after a failure in controller-server; a module that does not build
# stops only the modules that need it (--fail-at-end). What failed is read from the test reports.
# Maven's output goes to the log whole and to the terminal through maven_progress (lib.sh): the
# modules, each test class's result, progress, warnings and failures in full.
exec 3>&1 > >(maven_progress >&3)
progress=$!
started=$(mktemp)
trap 'rm -f "$started" "$started.log"' EXIT
mvn_status=0
mvn_run verify --fail-at-end -Dmaven.test.failure.ignore=true -DexcludedTestGroups= "${container_flags[@]}" "$@" | tee "$started.log" || mvn_status=$?

exec >&3 3>&-
wait "$progress"
mkdir -p "$REPO_ROOT/target" && cp "$started.log" "$REPO_ROOT/target/test.log"
echo "hack: Maven's whole output: target/test.log"
# The figures of the fault-injection and hostile-input suites (their output goes to the test reports).
find "$REPO_ROOT" -path '*/target/surefire-reports*' -name '*-output.txt' -newer "$started" -exec cat {} + 2>/dev/null \
  | grep -E '^(crash|hostile) suite:' || true

# One line naming what failed: the tests with a failure or an error in this run's reports, a
# test JVM that died, a module that did not build.
mapfile -t failed < <(find "$REPO_ROOT" -path '*/target/surefire-reports*' -name 'TEST-*.xml' -newer "$started" -exec awk '
  /<testcase / {
    name = ""; class = ""
    if (match($0, / name="[^"]*"/)) name = substr($0, RSTART + 7, RLENGTH - 8)
    if (match($0, / classname="[^"]*"/)) class = substr($0, RSTART + 12, RLENGTH - 13)
    sub(/.*\./, "", class)
  }
  /<(failure|error)[ >\/]/ { print class "." name }' {} + | sort -u)
problems=()
if [ ${#failed[@]} -gt 0 ]; then
  problems+=("failed tests (${#failed[@]}): $(printf '%s\n' "${failed[@]}" | paste -sd, - | sed 's/,/, /g')")
fi
if grep -qE 'The forked VM terminated|There was an error in the forked process|ExecutionException.*fork' "$started.log"; then
  problems+=("a test JVM died (see \"forked\" above)")
fi
if [ "$mvn_status" -ne 0 ]; then
  problems+=("the build failed: $(grep -E '^\[ERROR\] Failed to execute goal' "$started.log" | head -3 | sed 's/^\[ERROR\] //' | cut -c1-200 | paste -sd';' -)")
fi
if [ ${#problems[@]} -gt 0 ]; then
  echo "hack: FAILED: $(printf '%s\n' "${problems[@]}" | paste -sd';' - | sed 's/;/; /g')"
  exit 1
fi
echo "hack: every test passed"
