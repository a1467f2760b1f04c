#!/usr/bin/env bash
# Runs the project-quota tests on a kernel with quota support, for machines whose own kernel has
# none (there they are reported as skipped): Debian's kernel (the package linux-image-amd64's
# dependency, from Debian's packages) boots in qemu, by software emulation (x86_64 only; about ten
# minutes), with the host's / shared read-only over 9p, this worktree and ~/.m2 read-write, and
# /tmp a tmpfs; Maven runs in there offline, so build once on the host first (hack/test.sh).
# Usage (as root):
#   hack/quota-vm.sh [maven arguments...]
# Default: the quota tests of controller-server and node-server. The exit status is Maven's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(uname -m)" = x86_64 ] || { echo "hack: quota-vm.sh boots an x86_64 kernel" >&2; exit 1; }
packages=()
command -v qemu-system-x86_64 >/dev/null || packages+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list | grep -qx insmod || packages+=(busybox-static)
[ -x /sbin/depmod ] || packages+=(kmod)
if [ ${#packages[@]} -gt 0 ]; then
  echo "hack: installing ${packages[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

# Below /var/tmp, not /tmp: the guest sees the host's / but has a /tmp of its own.
work=$(mktemp -d /var/tmp/strata-quota-vm-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
package=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n 1)
apt-get download -qq "$package"
dpkg-deb -x ./*.deb kernel
version=${package#linux-image-}
/sbin/depmod -b kernel "$version"

# An initramfs of busybox and the modules the kernel needs for 9p, loop devices, xfs and ext4 quotas.
mkdir -p initramfs/bin initramfs/proc initramfs/sys initramfs/dev initramfs/newroot initramfs/modules
cp /bin/busybox initramfs/bin/
n=0
for module in virtio_pci 9pnet_virtio 9p loop xfs ext4 quota_v2; do
  /sbin/modprobe -d kernel -S "$version" --show-depends "$module" | awk '{print $2}'
done | awk '!seen[$0]++' | while read -r file; do
  n=$((n + 1))
  cp "$file" "initramfs/modules/$(printf %02d $n)-$(basename "$file")"
done

maven_args=("$@")
if [ ${#maven_args[@]} -eq 0 ]; then
  maven_args=(test -pl node-server -am -Dtest='SystemProjectQuotasTest,NfsQuotaTest' -Dsurefire.failIfNoSpecifiedTests=false)
fi
# In the guest: the JDK copied to the tmpfs (the JIT crashes, under emulation, on a JDK mapped from
# 9p), the serial collector (the same), and sources not recompiled wholesale.
cat > guest.sh <<EOF
cp -a "$JAVA_HOME" /tmp/jdk
export HOME="$HOME" JAVA_HOME=/tmp/jdk PATH="/tmp/jdk/bin:\$PATH" JAVA_TOOL_OPTIONS=-XX:+UseSerialGC
cd "$REPO_ROOT"
source hack/lib.sh
mvn_run -o -Dmaven.compiler.useIncrementalCompilation=false $(printf '%q ' "${maven_args[@]}")
echo \$? > "$work/out/status"
EOF
mkdir out
cat > initramfs/init <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for module in /modules/*.ko; do insmod "\$module"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose host /newroot
mount -t proc proc /newroot/proc; mount -t sysfs sys /newroot/sys; mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts; mount -t tmpfs tmpfs /newroot/dev/shm
mount -t tmpfs -o size=6g tmpfs /newroot/tmp; mount -t tmpfs tmpfs /newroot/run
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 repo "/newroot$REPO_ROOT"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 m2 "/newroot$HOME/.m2"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out "/newroot$work/out"
ip link set lo up
echo "quota-vm: kernel \$(uname -r)"
chroot /newroot /bin/bash "$work/guest.sh"
poweroff -f
EOF
chmod +x initramfs/init
(cd initramfs && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > initramfs.gz

qemu-system-x86_64 -accel tcg -cpu Nehalem -m 6144 -smp 1 -nographic -no-reboot \
  -kernel "kernel/boot/vmlinuz-$version" -initrd initramfs.gz -append "console=ttyS0 quiet panic=-1" \
  -virtfs local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap \
  -virtfs "local,path=$REPO_ROOT,mount_tag=repo,security_model=passthrough" \
  -virtfs "local,path=$HOME/.m2,mount_tag=m2,security_model=passthrough" \
  -virtfs "local,path=$work/out,mount_tag=out,security_model=passthrough"
status=$(cat out/status 2>/dev/null || echo 1)
echo "hack: Maven in the VM exited with $status" >&2
exit "$status"
