#!/usr/bin/env bash
# Runs a csi-sanity binary you built yourself (kubernetes-csi/csi-test; it is not part of this
# repository) against controller-server and one node-server started here, then checks that no
# loop device or mount is left. Usage (as root):
#   hack/csi-sanity.sh /path/to/csi-sanity [mount|block|nfs] [more csi-sanity flags...]
# nfs runs the Controller specs with the NFS StorageClass parameters against a real export
# directory: one bind-mounted where controller-server looks for the export (this kernel has no NFS
# client, so the Node specs, which would mount the share, are not run for nfs). Where a real NFS
# server and client exist (hack/nfs-vm.sh: STRATA_NFS_TEST_EXPORT=server:/share, and
# STRATA_NFS_TEST_EXPORT_DIR its directory on this machine), nfs runs every spec against it, with
# controller-server mounting the export itself (--nfs-mount-exports true).
# STRATA_PREBUILT=1 skips the build (the jars of a build on this worktree are used).
# For a slow machine (hack/lvm-vm.sh's emulated VM, where each lvm2 command takes seconds):
# SANITY_RENEW_INTERVAL (default 1s) is controller-server's --agent-renew-interval, whose three
# intervals are an agent's lease; SANITY_AGENT_CALL_TIMEOUT (default 5s) its --agent-call-timeout;
# SANITY_START_SECONDS (default 120) how long the servers may take to start; SANITY_LOGS a
# directory the servers' logs are copied to at the end.
# SANITY_NODES (default 1) node-servers to start, each with a pool of its own (csi-sanity calls the
# first one's Node service). With more than one, each pool is a tmpfs, the first the largest: a
# volume csi-sanity creates without topology goes to the node with the most room, which must be
# the first, whose Node service then stages it. SANITY_SNAPSHOT_COPIES (default 1) the VolumeSnapshotClass parameter
# copies its snapshots get (--csi.testsnapshotparameters; docs/snapshot-copies.md): 2 with two
# nodes keeps every snapshot on both.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sanity=${1:?usage: hack/csi-sanity.sh /path/to/csi-sanity [mount|block|nfs] [csi-sanity flags...]}
access=${2:-mount}
shift $(( $# >= 2 ? 2 : 1 ))

[ "${STRATA_PREBUILT:-}" = 1 ] || mvn_run -q package -DskipTests
work=$(mktemp -d /tmp/strata-sanity-XXXXXX)
openssl rand -hex 32 > "$work/token"
controller_flags=()
sanity_flags=(--csi.testvolumeaccesstype "$access")
export_data="$work/export-data"
if [ "$access" = nfs ] && [ -n "${STRATA_NFS_TEST_EXPORT:-}" ]; then
  export_data=${STRATA_NFS_TEST_EXPORT_DIR:?names the directory of the export on this machine}
  printf 'server: %s\nshare: %s\n' "${STRATA_NFS_TEST_EXPORT%%:/*}" "/${STRATA_NFS_TEST_EXPORT#*:/}" > "$work/nfs-parameters.yaml"
  controller_flags=(--nfs-export-root "$work/exports" --nfs-mount-exports true)
  sanity_flags=(--csi.testvolumeaccesstype mount --csi.testvolumeparameters "$work/nfs-parameters.yaml")
elif [ "$access" = nfs ]; then
  mkdir -p "$work/export-data" "$work/exports/sanity-nfs/srv/export"
  mount --bind "$work/export-data" "$work/exports/sanity-nfs/srv/export"
  printf 'server: sanity-nfs\nshare: /srv/export\n' > "$work/nfs-parameters.yaml"
  controller_flags=(--nfs-export-root "$work/exports" --nfs-mount-exports false)
  sanity_flags=(--csi.testvolumeaccesstype mount --csi.testvolumeparameters "$work/nfs-parameters.yaml"
    --ginkgo.focus "Controller Server")
fi
if [ "$access" != nfs ]; then
  # The specs with a volume attribute class: a mutable parameter local volumes take (docs/attributes.md).
  printf 'writeIOPS: "1000"\n' > "$work/mutable-parameters.yaml"
  sanity_flags+=(--csi.testvolumemutableparameters "$work/mutable-parameters.yaml")
  if [ "${SANITY_SNAPSHOT_COPIES:-1}" != 1 ]; then
    printf 'copies: "%s"\n' "$SANITY_SNAPSHOT_COPIES" > "$work/snapshot-parameters.yaml"
    sanity_flags+=(--csi.testsnapshotparameters "$work/snapshot-parameters.yaml")
  fi
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
java @"$REPO_ROOT/deploy/jvm.options" -jar "$REPO_ROOT/controller-server/target/controller-server.jar" \
  --endpoint "unix://$work/controller.sock" --agent-token-file "$work/token" \
  --agent-registry-address "127.0.0.1:$port" --agent-renew-interval "${SANITY_RENEW_INTERVAL:-1s}" --agent-settle-time 0s \
  --agent-call-timeout "${SANITY_AGENT_CALL_TIMEOUT:-5s}" \
  --agent-plaintext true "${controller_flags[@]}" > "$work/controller.log" 2>&1 &
controller=$!
nodes=()
for n in $(seq "${SANITY_NODES:-1}"); do
  suffix=$([ "$n" = 1 ] || echo "-$n")
  if [ "${SANITY_NODES:-1}" -gt 1 ]; then # sparse images: the size is a limit, not memory taken
    mkdir -p "$work/pool$suffix" && mount -t tmpfs -o "size=$((64 - 8 * n))g" "sanity-pool$n" "$work/pool$suffix"
  fi
  java @"$REPO_ROOT/deploy/jvm.options" -jar "$REPO_ROOT/node-server/target/node-server.jar" \
    --endpoint "unix://$work/node$suffix.sock" --node-id "sanity-node$suffix" --pool-dir "$work/pool$suffix" --kubelet-dir "$work" \
    --controller-address "127.0.0.1:$port" --agent-address 127.0.0.1:0 --agent-token-file "$work/token" \
    --agent-plaintext true > "$work/node$suffix.log" 2>&1 &
  nodes+=($!)
done
trap 'kill $controller ${nodes[*]} 2>/dev/null; wait 2>/dev/null
  [ -z "${SANITY_LOGS:-}" ] || { mkdir -p "$SANITY_LOGS" && cp "$work"/*.log "$SANITY_LOGS/"; }
  grep -F "$work/exports/" /proc/self/mountinfo | cut -d" " -f5 | xargs -r -n1 umount 2>/dev/null || true
  grep -F " $work/pool" /proc/self/mountinfo | cut -d" " -f5 | xargs -r -n1 umount 2>/dev/null || true' EXIT
# A JVM starts in seconds here, in about a minute in an emulated VM.
for _ in $(seq $((${SANITY_START_SECONDS:-120} * 5))); do
  [ "$(grep -c 'agent registered' "$work/controller.log" 2>/dev/null)" -ge "${SANITY_NODES:-1}" ] && break; sleep 0.2
done

status=0
"$sanity" --csi.endpoint "unix://$work/node.sock" --csi.controllerendpoint "unix://$work/controller.sock" \
  --csi.mountdir "$work/mnt" --csi.stagingdir "$work/staging" "${sanity_flags[@]}" \
  --ginkgo.no-color "$@" || status=$?

loops=$(losetup --noheadings --output BACK-FILE | grep -c "$work" || true)
mounts=$(grep "$work" /proc/self/mountinfo | grep -v "$work/exports/" | grep -vc " $work/pool[-0-9]* " || true)
echo "left behind: $loops loop devices, $mounts mounts (server logs in $work)"
if [ "$access" = nfs ]; then
  echo "left in the export: $(find "$export_data" -mindepth 1 -not -path "*/.strata-csi*" -not -name lost+found | wc -l) entries besides the driver's own directory"
fi
left=$(find "$work"/pool* -name '*.img' -o -name '*.record' -o -name '*.tombstone' 2>/dev/null | wc -l)
echo "left in the pools: $left images, records and tombstones"
[ "$loops" = 0 ] && [ "$mounts" = 0 ] && [ "$left" = 0 ] || status=1
exit $status
