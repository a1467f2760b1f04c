#!/usr/bin/env bash
# The main job on an embedded default: builds both servers, starts them locally on unix sockets,
# drives them over gRPC and stops them. No cluster, no external server.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mvn_run -q package -DskipTests
java --enable-native-access=ALL-UNNAMED -cp "$REPO_ROOT/controller-server/target/lib/*" \
  "$REPO_ROOT/hack/demo/Demo.java" "$REPO_ROOT"
