#!/usr/bin/env bash
# Runs every test: unit tests and the tests that start the servers as real processes on real
# unix sockets.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run verify "$@"
