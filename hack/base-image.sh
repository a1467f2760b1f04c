#!/usr/bin/env bash
# Builds a base image for the Dockerfile where no container registry is reachable (CI): Debian
# trixie from Debian's packages (debootstrap) with a Java runtime made by jlink from the JDK
# hack/lib.sh finds, imported into Docker. Prints the image's tag; an image of that tag already
# present is reused. Usage: hack/base-image.sh [TAG]
#
# Why jlink rather than Debian's openjdk-21-jre-headless: the runtime holds only the modules the
# servers use, about 70 MB against about 200 MB, and every node pulls the image.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

suite=trixie
java_version=$("$JAVA_HOME/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
# The modules the servers need, from hack/java-modules (the one list; deploy's ImageModulesTest
# checks it against what jdeps finds in the jars), and, on JDK 21, the elliptic-curve provider TLS uses.
modules=$(grep -v -e '^#' -e '^[[:space:]]*$' "$REPO_ROOT/hack/java-modules" | paste -sd, -)
if "$JAVA_HOME/bin/java" --list-modules | grep -q '^jdk.crypto.ec@'; then
  modules+=,jdk.crypto.ec
fi
# The tag names the module list, so a base made before the list changed is not reused.
tag=${1:-strata-base:$suite-java$java_version-$(echo "$modules" | sha256sum | cut -c1-8)}
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "hack: installing debootstrap" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

rootfs=$(mktemp -d /tmp/strata-base.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "hack: debootstrap $suite into $rootfs" >&2
debootstrap --variant=minbase "$suite" "$rootfs" http://deb.debian.org/debian >"$rootfs.log" 2>&1 \
  || { tail -20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"

"$JAVA_HOME/bin/jlink" --add-modules "$modules" --strip-debug --no-header-files --no-man-pages \
  --output "$rootfs/opt/java"

# What an image need not carry: downloaded packages, package lists (the Dockerfile updates them),
# documentation and translations.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
tar -C "$rootfs" -c . | docker import \
  --change 'ENV JAVA_HOME=/opt/java' \
  --change 'ENV PATH=/opt/java/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  - "$tag" >/dev/null
echo "$tag"
