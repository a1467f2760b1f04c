#!/usr/bin/env bash
# Runs every test: unit tests, the tests that start the servers as real processes on real unix
# sockets, the manifests' tests, and the conformance suite against the servers in containers of
# the project's image. For the last, a Docker engine (installed and started if missing) and a
# base image built here (hack/base-image.sh) are made sure of first; where that fails the
# container run is skipped with the reason, except under CI (CI=true), where it fails.
set -euo pipefail
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

mvn_run verify "${container_flags[@]}" "$@"
# The figures of the fault-injection and hostile-input suites (their output goes to the test reports).
cat "$REPO_ROOT"/node-server/target/surefire-reports/*-output.txt 2>/dev/null | grep -E '^(crash|hostile) suite:' || true
