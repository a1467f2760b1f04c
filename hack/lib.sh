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

# Reads Maven's output and prints what someone running the tests needs: each module as Maven
# starts it, each test class's result and each module's total, what a test JVM writes to its
# console (a long suite's progress lines, a JDK warning), warnings, and errors with their stack
# traces in full; and, after 20 s without a line, what is still running. Maven's INFO lines are
# left out: the caller keeps the whole output in a log.
maven_progress() {
  local line partial="" doing="" since=$SECONDS printed=$SECONDS status name module=""
  local re_module='^\[INFO\] Building (.+) [^ ]+ +\[([0-9]+/[0-9]+)\]$'
  local re_step='^\[INFO\] --- ([^:]+):[^:]+:([^ ]+) \(([^)]+)\) @ ([^ ]+) ---$'
  local re_tests='Tests run: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+), Skipped: ([0-9]+)(, Time elapsed: ([0-9.,]+) s)?( .*-- in (.+))?$'
  while true; do
    if IFS= read -r -t 5 line; then
      line=$partial$line
      partial=""
    else
      status=$?
      if [ "$status" -le 128 ]; then # end of input; a last line without newline still counts
        [ -n "$line$partial" ] && echo "$partial$line"
        break
      fi
      partial+=$line # timed out in the middle of a line: the rest comes with the next read
      line=""
      if [ -n "$doing" ] && (( SECONDS - printed >= 20 )); then
        echo "hack:     ... $doing, $((SECONDS - since)) s"
        printed=$SECONDS
      fi
      continue
    fi
    if [[ $line =~ $re_module ]]; then
      echo "hack: [${BASH_REMATCH[2]}] ${BASH_REMATCH[1]}"
      doing="building ${BASH_REMATCH[1]%%:*}"
      since=$SECONDS
    elif [[ $line =~ $re_step ]]; then
      module=${BASH_REMATCH[4]}
      doing="${BASH_REMATCH[2]} (${BASH_REMATCH[1]#maven-}) of $module"
      since=$SECONDS
      # A second surefire execution (the containers' run) is worth a line of its own.
      if [ "${BASH_REMATCH[2]}" = test ] && [ "${BASH_REMATCH[3]}" != default-test ]; then
        echo "hack:   tests of ${BASH_REMATCH[4]}, execution ${BASH_REMATCH[3]}"
      fi
    elif [[ $line == "[INFO] Running "* ]]; then
      name=${line#"[INFO] Running "}
      doing="${name##*.} running"
      since=$SECONDS
    elif [[ $line =~ $re_tests ]]; then
      local counts="${BASH_REMATCH[1]} test"
      [ "${BASH_REMATCH[1]}" != 1 ] && counts+=s
      [ "${BASH_REMATCH[2]}" != 0 ] && counts+=", ${BASH_REMATCH[2]} FAILED"
      [ "${BASH_REMATCH[3]}" != 0 ] && counts+=", ${BASH_REMATCH[3]} IN ERROR"
      [ "${BASH_REMATCH[4]}" != 0 ] && counts+=", ${BASH_REMATCH[4]} skipped"
      if [ -n "${BASH_REMATCH[8]}" ]; then
        echo "hack:   ${BASH_REMATCH[8]##*.}: $counts, ${BASH_REMATCH[6]} s"
        doing=""
      else
        echo "hack:   $module, in all: $counts"
      fi
    elif [[ $line == "[WARNING] Overwriting "*"/target/lib/"* ]]; then
      : # copy-dependencies putting this build's own module jars in place of the last build's
    elif [[ $line == "[ERROR]"* || $line == "[WARNING]"* ]]; then
      echo "$line"
    elif [[ $line != "["* && -n $line ]]; then
      echo "$line" # not Maven's own line: a test JVM's console, a stack trace, a compiler message's detail
    else
      continue
    fi
    printed=$SECONDS
  done
  return 0
}
