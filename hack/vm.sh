# Shared by hack/quota-vm.sh, hack/nfs-vm.sh, hack/expansion-vm.sh and hack/lvm-vm.sh: boots Debian's kernel (the
# package linux-image-amd64's dependency, from Debian's packages) in qemu, by software emulation
# (x86_64 only; no KVM on these machines), with the host's / shared read-only over 9p, this worktree and
# ~/.m2 read-write, and /tmp a tmpfs, and runs a command (Maven offline) in there: build once on the host
# first (hack/test.sh). Source it after lib.sh, then call
#   vm_run "<kernel modules>" "<guest setup script>" command [arguments...]
# The setup script runs as root in the guest and may export variables; then the command runs in
# this worktree with lib.sh sourced (so `mvn_run -o ...` works). Returns the command's exit
# status; prints the boot and run times. VM_DISKS (optional): raw disk images, space-separated,
# attached as virtio disks the guest sees as /dev/vda, /dev/vdb... (partitions included), with the
# host's page cache bypassed (cache=none, aio=native): a disk of the guest's own for benchmarks.
# VM_KERNEL (optional): the Debian meta-package whose kernel boots instead of linux-image-amd64's
# (Debian 12's 6.1), e.g. linux-image-6.12-amd64 (Debian 12 ships 6.12 too).

# In the guest: Maven offline. protoc.skip: the host's build generated the protocol classes;
# generating them again would have javac recompile them all, which takes over ten minutes under
# emulation. Says when it is done.
vm_guest_maven() {
  local status=0
  mvn_run -o -Dmaven.compiler.useIncrementalCompilation=false -Dprotoc.skip=true "$@" || status=1
  echo "vm: Maven done $(cut -d' ' -f1 /proc/uptime) s after boot"
  return $status
}

vm_run() {
  local modules=$1 setup=$2
  shift 2
  [ "$(uname -m)" = x86_64 ] || { echo "hack: the VM scripts boot an x86_64 kernel" >&2; return 1; }
  local packages=()
  command -v qemu-system-x86_64 >/dev/null || packages+=(qemu-system-x86)
  # grep reads the whole list: with -q it could exit first, and under pipefail busybox's SIGPIPE
  # would then count as no insmod.
  [ -x /bin/busybox ] && /bin/busybox --list | grep -x insmod >/dev/null || packages+=(busybox-static)
  [ -x /sbin/depmod ] || packages+=(kmod)
  if [ ${#packages[@]} -gt 0 ]; then
    echo "hack: installing ${packages[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  fi

  # Below /var/tmp, not /tmp: the guest sees the host's / but has a /tmp of its own.
  local work
  work=$(mktemp -d /var/tmp/strata-vm-XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  (
    set -euo pipefail
    cd "$work"
    package=$(apt-cache depends "${VM_KERNEL:-linux-image-amd64}" | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n 1)
    apt-get download -qq "$package"
    dpkg-deb -x ./*.deb kernel
    version=${package#linux-image-}
    /sbin/depmod -b kernel "$version"

    # An initramfs of busybox and the modules the kernel needs for 9p and the given ones.
    mkdir -p initramfs/bin initramfs/proc initramfs/sys initramfs/dev initramfs/newroot initramfs/modules
    cp /bin/busybox initramfs/bin/
    n=0
    disk_modules=
    [ -z "${VM_DISKS:-}" ] || disk_modules=virtio_blk
    for module in virtio_pci 9pnet_virtio 9p $disk_modules $modules; do
      # Modules built into the kernel are listed as "builtin <name>": nothing to load.
      /sbin/modprobe -d kernel -S "$version" --show-depends "$module" | awk '$1 == "insmod" {print $2}'
    done | awk '!seen[$0]++' | while read -r file; do
      n=$((n + 1))
      # Debian's 6.12 packages compress their modules (.ko.xz), which busybox's insmod cannot load.
      target="initramfs/modules/$(printf %03d $n)-$(basename "$file")"
      case "$file" in
        *.ko.xz) xz -dc "$file" > "${target%.xz}" ;;
        *.ko.zst) zstd -qdc "$file" > "${target%.zst}" ;;
        *) cp "$file" "$target" ;;
      esac
    done

    printf '%s\n' "$setup" > setup.sh
    # In the guest: the JDK copied to the tmpfs (the JIT crashes, under emulation, on a JDK mapped
    # from 9p), the serial collector (the same), and sources not recompiled wholesale.
    cat > guest.sh <<GUEST
echo "vm: guest script starts \$(cut -d' ' -f1 /proc/uptime) s after boot"
cp -a "$JAVA_HOME" /tmp/jdk
export HOME="$HOME" JAVA_HOME=/tmp/jdk PATH="/tmp/jdk/bin:\$PATH" JAVA_TOOL_OPTIONS=-XX:+UseSerialGC
cd "$REPO_ROOT"
source "$work/setup.sh" || { echo 1 > "$work/out/status"; exit 1; }
source hack/lib.sh
$(printf '%q ' "$@")
echo \$? > "$work/out/status"
echo "vm: done \$(cut -d' ' -f1 /proc/uptime) s after boot"
GUEST
    mkdir out
    cat > initramfs/init <<INIT
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for module in /modules/*.ko; do insmod "\$module"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose host /newroot
mount -t proc proc /newroot/proc; mount -t sysfs sys /newroot/sys; mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
# What udev would make: bash's process substitution (mvn_run's) opens /dev/fd/N.
ln -s /proc/self/fd /newroot/dev/fd; ln -s fd/0 /newroot/dev/stdin; ln -s fd/1 /newroot/dev/stdout; ln -s fd/2 /newroot/dev/stderr
mount -t devpts devpts /newroot/dev/pts; mount -t tmpfs tmpfs /newroot/dev/shm
mount -t tmpfs -o size=6g tmpfs /newroot/tmp; mount -t tmpfs tmpfs /newroot/run
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 repo "/newroot$REPO_ROOT"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 m2 "/newroot$HOME/.m2"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out "/newroot$work/out"
ip link set lo up
echo "vm: kernel \$(uname -r)"
chroot /newroot /bin/bash "$work/guest.sh"
poweroff -f
INIT
    chmod +x initramfs/init
    (cd initramfs && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > initramfs.gz

    drives=()
    for disk in ${VM_DISKS:-}; do
      drives+=(-drive "file=$disk,format=raw,if=virtio,cache=none,aio=native")
    done
    start=$SECONDS
    qemu-system-x86_64 -accel tcg -cpu Nehalem -m 6144 -smp 1 -nographic -no-reboot \
      -kernel "kernel/boot/vmlinuz-$version" -initrd initramfs.gz -append "console=ttyS0 quiet panic=-1" \
      -virtfs local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap \
      -virtfs "local,path=$REPO_ROOT,mount_tag=repo,security_model=passthrough" \
      -virtfs "local,path=$HOME/.m2,mount_tag=m2,security_model=passthrough" \
      -virtfs "local,path=$work/out,mount_tag=out,security_model=passthrough" "${drives[@]}"
    echo "hack: the VM ran for $((SECONDS - start)) s" >&2
  )
  local status
  status=$(cat "$work/out/status" 2>/dev/null || echo 1)
  echo "hack: the command in the VM exited with $status" >&2
  return "$status"
}

# The test reports of every module: a suite's classes may live in node-server and system-tests.
vm_reports() {
  echo "$REPO_ROOT"/*/target/surefire-reports
}

# Before a vm_run of Maven tests: compiles the programs and every test module here, where
# compiling is fast (the guest runs this worktree's build), and removes the named classes' old
# reports, so that vm_check_reports reads this run's.
vm_prepare_tests() {
  local class
  echo "hack: compiling the programs and their tests on the host" >&2
  mvn_run -q -pl system-tests -am test-compile
  for class in "$@"; do
    find "$REPO_ROOT" -path '*/target/surefire-reports/*' \( -name "TEST-$class.xml" -o -name "$class.txt" -o -name "$class-output.txt" \) -delete
  done
}

# After a vm_run of Maven tests: checks each class's report (in whichever module ran it),
# printing its summary; returns 1 unless every class ran tests with no failure, error or skip.
vm_check_reports() {
  local class report summary status=0
  for class in "$@"; do
    report=$(find "$REPO_ROOT" -path '*/target/surefire-reports/*' -name "TEST-$class.xml" | head -1)
    if [ -z "$report" ]; then
      echo "hack: FAILED: no test report for $class" >&2
      status=1
      continue
    fi
    summary=$(grep -o '<testsuite [^>]*>' "$report" | grep -o ' \(tests\|failures\|errors\|skipped\|time\)="[^"]*"' | tr -d '\n')
    echo "hack: $class:$summary" >&2
    if ! grep -q ' tests="[1-9]' <<<"$summary" || grep -q ' \(failures\|errors\|skipped\)="[^0]' <<<"$summary"; then
      echo "hack: FAILED: $class did not pass every test it ran, or ran none" >&2
      status=1
    fi
  done
  return "$status"
}

# The lines of the named classes' test output that start with <prefix>.
vm_output_lines() {
  local prefix=$1 class
  shift
  for class in "$@"; do
    find "$REPO_ROOT" -path '*/target/surefire-reports/*' -name "$class-output.txt" -exec grep -h "^$prefix" {} +
  done
}
