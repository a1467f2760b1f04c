#!/usr/bin/env bash
# Makes sure a Docker engine answers here: installs docker.io from Debian's packages and starts
# dockerd in the background when none does. Exits non-zero if no engine can be had.
set -euo pipefail

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
  echo "hack: installing docker.io" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
log=/var/log/strata-dockerd.log
echo "hack: starting dockerd in the background (log: $log)" >&2
# dockerd outlives this script: it must hold no descriptor it inherits beyond stdin, stdout and
# stderr. Started under `flock <lock> ...` it held the lock for as long as it ran, and an open pipe
# of a CI runner would keep the runner waiting.
nohup bash -c 'for fd in /proc/$$/fd/*; do
  n=${fd##*/}
  if [ "$n" -gt 2 ] && [ -e "$fd" ]; then eval "exec $n>&-"; fi
done
exec dockerd' >"$log" 2>&1 </dev/null &
for _ in $(seq 60); do
  if docker info >/dev/null 2>&1; then
    exit 0
  fi
  sleep 1
done
echo "hack: dockerd did not answer within 60 s; its log ends:" >&2
tail -5 "$log" >&2
exit 1
