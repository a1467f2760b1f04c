#!/usr/bin/env bash
# Runs the NFS tests against a real kernel NFS server and client, for machines whose own kernel has
# neither (there they are reported as skipped): in a VM (hack/vm.sh), a kernel NFS server exports
# an ext4 filesystem on 127.0.0.1 (NFSv4.2 as 127.0.0.1:/export, NFSv3 as
# 127.0.0.1:/tmp/nfs/export); Maven runs the NFS and quota tests against it, then csi-sanity
# (CSI_SANITY, default /opt/csi-sanity/csi-sanity; built by you, not part of this repository) runs
# every spec with NFS parameters. NfsServerTest stops and restarts the server through
# /tmp/nfs-server.sh (stop | start | new-fsid). Build on the host first (hack/test.sh).
# Usage (as root):
#   hack/nfs-vm.sh [maven arguments...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sanity=${CSI_SANITY:-/opt/csi-sanity/csi-sanity}
if [ "${1:-}" = --in-vm ]; then # the guest's part
  shift
  source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"
  status=0
  vm_guest_maven "$@" || status=1
  if [ -x "$sanity" ]; then
    STRATA_PREBUILT=1 hack/csi-sanity.sh "$sanity" nfs || status=1
    echo "vm: csi-sanity done $(cut -d' ' -f1 /proc/uptime) s after boot"
  else
    echo "vm: FAILED: no csi-sanity binary at $sanity (set CSI_SANITY)" >&2
    status=1
  fi
  exit $status
fi
source "$(dirname "${BASH_SOURCE[0]}")/vm.sh"

# The server's and client's tools: the guest runs the host's programs over 9p.
if [ ! -x /usr/sbin/rpc.nfsd ] || [ ! -x /sbin/mount.nfs ]; then
  echo "hack: installing nfs-kernel-server and nfs-common" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nfs-kernel-server nfs-common >/dev/null
fi

maven_args=("$@")
if [ ${#maven_args[@]} -eq 0 ]; then
  maven_args=(test -pl system-tests -am -Dsurefire.failIfNoSpecifiedTests=false
    -Dtest='NfsServerTest,NfsRealMountTest,NfsNodeBackendTest,NfsProbeTest,NfsTest,SystemProjectQuotasTest,NfsQuotaTest,TransientLockTest,TreeCopyTest#*OverNfs')
fi

# In the guest, before Maven: / is read-only 9p, which nfsd cannot export. The NFSv4 pseudo-root
# (fsid=0) is a directory of the /tmp tmpfs, the export an ext4 image mounted inside it; the
# server's state and /etc/exports live on tmpfs too.
read -r -d '' setup <<'SETUP' || true
nfs_server_setup() (
  set -euo pipefail
  mount -t tmpfs tmpfs /var/lib/nfs
  mkdir -p /var/lib/nfs/sm /var/lib/nfs/sm.bak /var/lib/nfs/v4recovery /var/lib/nfs/rpc_pipefs
  touch /var/lib/nfs/etab /var/lib/nfs/rmtab /var/lib/nfs/state
  : > /tmp/exports
  mount --bind /tmp/exports /etc/exports
  mount -t nfsd nfsd /proc/fs/nfsd
  mkdir -p /tmp/nfs/export
  truncate -s 2G /tmp/nfs-export.img
  mkfs.ext4 -q -F /tmp/nfs-export.img
  mount -o loop /tmp/nfs-export.img /tmp/nfs/export
  printf '%s\n' '/tmp/nfs 127.0.0.1(rw,fsid=0,crossmnt,no_subtree_check,no_root_squash)' \
    '/tmp/nfs/export 127.0.0.1(rw,fsid=1,no_subtree_check,no_root_squash)' > /tmp/exports
  # Short lease and grace times: a restarted server serves again after seconds, not 90 s.
  echo 10 > /proc/fs/nfsd/nfsv4leasetime
  echo 10 > /proc/fs/nfsd/nfsv4gracetime
  rpcbind -w
  rpc.statd --no-notify || true
  rpc.mountd
  rpc.nfsd 8
  exportfs -ra
  cat > /tmp/nfs-server.sh <<'CONTROL'
#!/bin/bash
# Stops, starts, or restarts with another filesystem id (old file handles turn stale), the VM's NFS server.
set -euo pipefail
case "$1" in
  stop) rpc.nfsd 0 ;;
  start) rpc.nfsd 8 ;;
  new-fsid)
    rpc.nfsd 0
    sed 's/fsid=1,/fsid=2,/' /tmp/exports > /tmp/exports.new && cat /tmp/exports.new > /tmp/exports
    exportfs -ra && exportfs -f
    rpc.nfsd 8 ;;
  *) echo "usage: $0 stop|start|new-fsid" >&2; exit 2 ;;
esac
CONTROL
  chmod +x /tmp/nfs-server.sh
  echo "vm: NFS server up: $(exportfs -v | tr '\n' ' ')"
)
nfs_server_setup || return 1
export STRATA_NFS_TEST_EXPORT=127.0.0.1:/export STRATA_NFS_TEST_EXPORT_V3=127.0.0.1:/tmp/nfs/export
export STRATA_NFS_TEST_EXPORT_DIR=/tmp/nfs/export STRATA_NFS_TEST_SERVER=/tmp/nfs-server.sh
export STRATA_TEST_START_SECONDS=240 # a JVM takes about a minute to start under emulation
SETUP

vm_run "loop ext4 xfs quota_v2 nfsd nfsv4 nfsv3 nfs" "$setup" env CSI_SANITY="$sanity" bash hack/nfs-vm.sh --in-vm "${maven_args[@]}"
