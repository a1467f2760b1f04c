#!/usr/bin/env bash
# Runs a csi-sanity binary you built yourself (kubernetes-csi/csi-test; it is not part of this
# repository) against controller-server and one node-server started here, then checks that no
# loop device or mount is left. Usage (as root):
#   hack/csi-sanity.sh /path/to/csi-sanity [mount|block] [more csi-sanity flags...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sanity=${1:?usage: hack/csi-sanity.sh /path/to/csi-sanity [mount|block] [csi-sanity flags...]}
access=${2:-mount}
shift $(( $# >= 2 ? 2 : 1 ))

mvn_run -q package -DskipTests
work=$(mktemp -d /tmp/strata-sanity-XXXXXX)
openssl rand -hex 32 > "$work/token"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
java @"$REPO_ROOT/deploy/jvm.options" -jar "$REPO_ROOT/controller-server/target/controller-server.jar" \
  --endpoint "unix://$work/controller.sock" --agent-token-file "$work/token" \
  --agent-registry-address "127.0.0.1:$port" --agent-renew-interval 1s --agent-settle-time 0s \
  --agent-plaintext true > "$work/controller.log" 2>&1 &
controller=$!
java @"$REPO_ROOT/deploy/jvm.options" -jar "$REPO_ROOT/node-server/target/node-server.jar" \
  --endpoint "unix://$work/node.sock" --node-id sanity-node --pool-dir "$work/pool" \
  --controller-address "127.0.0.1:$port" --agent-address 127.0.0.1:0 --agent-token-file "$work/token" \
  --agent-plaintext true > "$work/node.log" 2>&1 &
node=$!
trap 'kill $controller $node 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 150); do grep -q 'agent registered' "$work/controller.log" 2>/dev/null && break; sleep 0.2; done

status=0
"$sanity" --csi.endpoint "unix://$work/node.sock" --csi.controllerendpoint "unix://$work/controller.sock" \
  --csi.mountdir "$work/mnt" --csi.stagingdir "$work/staging" --csi.testvolumeaccesstype "$access" \
  --ginkgo.no-color "$@" || status=$?

loops=$(losetup --noheadings --output BACK-FILE | grep -c "$work" || true)
mounts=$(grep -c "$work" /proc/self/mountinfo || true)
echo "left behind: $loops loop devices, $mounts mounts (server logs in $work)"
[ "$loops" = 0 ] && [ "$mounts" = 0 ] || status=1
exit $status
