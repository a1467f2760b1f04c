#!/usr/bin/env bash
# The unit tests: every test class not tagged root (Maven's default run, see the root pom), as a
# user without root, and how long they took; hack/test.sh --unit runs this. Run by root, it makes
# a throwaway user and runs them as that user in a copy of the work tree, so that a test that
# needs root but lacks the tag fails here instead of passing because CI happens to be root. The
# user, the copy and anything the user left in /tmp are removed at the end, whatever happened;
# the work tree itself is only read.
# Maven arguments pass through (hack/test.sh --unit -pl node-server -am).
set -euo pipefail
maven_opts_given=${MAVEN_OPTS:-} # lib.sh adds to it; the run as the user sources lib.sh again
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
  start=$(date +%s%N)
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  status=0
  # The terminal gets what maven_progress (lib.sh) keeps of Maven's output: modules, each test
  # class's result, progress, warnings and errors in full.
  mvn_run test "$@" | tee "$log" | maven_progress || status=$?
  # Each module's summary line (the per-class lines end with "-- in <class>").
  tests=$(awk '/^\[[A-Z]+\] Tests run: [0-9]+, / && !/ -- in / { sub(/.*Tests run: /, ""); n += $0 + 0 } END { print n + 0 }' "$log")
  # The classes' own times: the rest is Maven, the build and starting a test JVM per module.
  in_tests=$(awk '/ -- in / && match($0, /Time elapsed: [0-9.]+ s/) { t += substr($0, RSTART + 14, RLENGTH - 16) } END { printf "%.1f", t }' "$log")
  seconds=$(( ($(date +%s%N) - start) / 1000000 ))
  printf 'hack: unit tests as %s (uid %s): %s tests, %d.%01d s with the build, %s s of them in test classes; %s\n' "$(id -un)" \
    "$(id -u)" "${tests:-0}" $((seconds / 1000)) $((seconds % 1000 / 100)) "$in_tests" \
    "$([ "$status" -eq 0 ] && echo passed || echo FAILED)"
  exit "$status"
fi

# As root: a user of its own, which the cleanup removes with everything it made.
work=$(mktemp -d /tmp/strata-unit.XXXXXX)
user="strata-unit-$$"
cleanup() {
  if id "$user" >/dev/null 2>&1; then
    # A run stopped early leaves Maven and its test JVMs running as the user: they go first.
    pkill -KILL -u "$user" 2>/dev/null && sleep 1
    # JUnit removes its temporary directories; should a stopped run have left any, they go too.
    find /tmp -xdev -mindepth 1 -maxdepth 1 -user "$user" -exec rm -rf {} + 2>/dev/null || true
    userdel "$user" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
useradd --system --user-group --no-create-home --home-dir "$work/home" --shell /usr/sbin/nologin "$user"

echo "hack: running the unit tests as $user, a throwaway user without root, on a copy of the work tree" >&2
# The work tree as it stands, uncommitted changes included, with its build output (times kept).
mkdir "$work/src" "$work/home"
tar -C "$REPO_ROOT" --exclude=./.git -cf - . | tar -C "$work/src" -xf -
# Maven's repository: hard links to root's files (which the user can read but not change) in
# directories of the user's own, where Maven may add what it downloads.
if [ -d "$HOME/.m2/repository" ]; then
  mkdir "$work/home/.m2"
  if cp -al "$HOME/.m2/repository" "$work/home/.m2/repository" 2>/dev/null; then
    find "$work/home/.m2" -type d -exec chown "$user:$user" {} +
    # A file that only root may read is copied for the user instead of linked.
    find "$work/home/.m2" -type f ! -perm -o+r -exec sh -c 'user=$1; shift
      for f; do cp "$f" "$f.copy" && chown "$user:$user" "$f.copy" && mv "$f.copy" "$f"; done' sh "$user" {} +
  else # on another filesystem than /tmp: a copy, the user's own
    rm -rf "$work/home/.m2/repository"
    cp -a "$HOME/.m2/repository" "$work/home/.m2/repository"
    chown -R "$user:$user" "$work/home/.m2"
  fi
fi
chown -R "$user:$user" "$work/src"
chown "$user:$user" "$work" "$work/home"

# The copy appears at the work tree's own path, in a mount namespace of this run only (gone with
# it): Maven's incremental build state names absolute paths, so there it builds again only what
# changed, and nothing of the user's is written into the real work tree.
# In the background, so that an interrupt reaches the trap at once (bash waits for a command in
# the foreground before it runs a trap); the cleanup then stops the run.
unshare --mount --propagation private \
  bash -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' bind "$work/src" "$REPO_ROOT" \
  setpriv --reuid="$user" --regid="$user" --init-groups \
  env HOME="$work/home" USER="$user" LOGNAME="$user" MAVEN_OPTS="$maven_opts_given" bash "$REPO_ROOT/hack/unit.sh" "$@" &
wait $!
