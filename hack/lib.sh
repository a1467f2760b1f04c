# Shared by the hack/ scripts: finds a JDK >= 21 and Maven, so the README commands work on a
# fresh machine whose default java is older. Source it; it exports JAVA_HOME and defines `mvn_run`.

find_jdk() {
  local candidate version
  for candidate in "${JAVA_HOME:-}" /usr/lib/jvm/temurin-2[1-9]* /usr/lib/jvm/java-2[1-9]* /usr/lib/jvm/*; do
    [ -x "$candidate/bin/javac" ] || continue
    version=$("$candidate/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
    if [ "${version%%.*}" -ge 21 ] 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

if ! JAVA_HOME=$(find_jdk); then
  echo "hack: no JDK 21 or newer found (set JAVA_HOME, or install one under /usr/lib/jvm)" >&2
  exit 1
fi
export JAVA_HOME
export PATH="$JAVA_HOME/bin:$PATH"
# Maven's guava and protobuf call sun.misc.Unsafe, which JDK 24 and later warn about on every run;
# the option (unknown before JDK 23) allows it, so the scripts' output holds no such warnings.
# UNSAFE_ALLOW is for the java commands the scripts run themselves; the test JVMs Maven forks get
# the same option from the pom's profile unsafe-memory-access.
java_major=$("$JAVA_HOME/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
UNSAFE_ALLOW=()
if [ "${java_major%%.*}" -ge 24 ] 2>/dev/null; then
  UNSAFE_ALLOW=(--sun-misc-unsafe-memory-access=allow)
  export MAVEN_OPTS="${MAVEN_OPTS:-} ${UNSAFE_ALLOW[*]}"
fi
unset java_major

if ! command -v mvn >/dev/null 2>&1; then
  echo "hack: installing maven" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null
fi

# The node's system layer drives these tools, and its tests run them for real (as root); the
# tests also check effects with findmnt and wipefs, and make agent credentials with openssl.
# On Debian and Ubuntu losetup, mount and umount come in the package "mount", blkid in util-linux.
missing_packages=()
for tool_package in losetup:mount mount:mount umount:mount blkid:util-linux fallocate:util-linux \
    findmnt:util-linux wipefs:util-linux mkfs.ext4:e2fsprogs mkfs.xfs:xfsprogs mkfs.btrfs:btrfs-progs \
    openssl:openssl; do
  command -v "${tool_package%%:*}" >/dev/null 2>&1 || missing_packages+=("${tool_package#*:}")
done
if [ ${#missing_packages[@]} -gt 0 ]; then
  mapfile -t missing_packages < <(printf '%s\n' "${missing_packages[@]}" | sort -u)
  echo "hack: installing ${missing_packages[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_packages[@]}" >/dev/null
fi
unset missing_packages tool_package

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

plain_text() {
  sed -u 's/\x1b\[[0-9;]*m//g'
}

mvn_run() {
  # Maven 3.8 writes ANSI reset codes even with style.color=never; strip them from both streams so
  # that a log of the scripts is plain text. pipefail keeps Maven's exit status.
  (set -o pipefail && cd "$REPO_ROOT" && mvn -B -ntp -Dstyle.color=never "$@" 2> >(plain_text >&2) | plain_text)
}
