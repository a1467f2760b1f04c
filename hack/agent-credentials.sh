#!/usr/bin/env bash
# Makes the credentials of the agent channel between controller-server and the node agents:
#   token            a random token both sides send (the plaintext channel's only check)
#   ca.crt, ca.key   a CA (keep ca.key offline)
#   controller/      tls.crt, tls.key: controller-server's pair, for the name "strata-controller",
#                    server and client (it serves the agent registry and calls the node agents
#                    with it: the agents take calls with this certificate only)
#   node/            tls.crt, tls.key: the node agents' pair, for the name "strata-agent", server
#                    only (a node cannot use it to call another node's agent)
# Usage: hack/agent-credentials.sh OUT_DIR [DAYS]. In a cluster, each pair goes into a Secret of
# its own (deploy/kustomization.yaml): no node mounts the controller's key.
#
# hack/agent-credentials.sh --renew DIR [DAYS]: new pairs in controller/ and node/ from the CA
# already in DIR (ca.crt, and ca.key brought back from where it is kept offline); token and CA
# stay, so the servers pick the new certificates up without a restart (docs/operations.md
# "Rotating the agent certificates").
set -euo pipefail
renew=false
if [ "${1:-}" = --renew ]; then
  renew=true
  shift
fi
out=${1:?usage: hack/agent-credentials.sh [--renew] OUT_DIR [DAYS]}
days=${2:-825}
mkdir -p "$out"
umask 077
cd "$out"
if $renew; then
  [ -f ca.crt ] && [ -f ca.key ] || { echo "hack: --renew needs ca.crt and ca.key in $out" >&2; exit 1; }
else
  openssl rand -hex 32 > token
  openssl req -x509 -newkey rsa:3072 -nodes -keyout ca.key -out ca.crt -days "$days" \
    -subj "/CN=strata-agent-ca" 2>/dev/null
fi
# pair DIR NAME USAGES: DIR/tls.crt and DIR/tls.key, for NAME, issued by the CA.
pair() {
  mkdir -p "$1"
  openssl req -newkey rsa:3072 -nodes -keyout "$1/tls.key" -out "$1/tls.csr" -subj "/CN=$2" 2>/dev/null
  printf 'subjectAltName=DNS:%s\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$2" "$3" > "$1/tls.ext"
  openssl x509 -req -in "$1/tls.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1/tls.crt" -days "$days" \
    -extfile "$1/tls.ext" 2>/dev/null
  rm -f "$1/tls.csr" "$1/tls.ext"
}
pair controller strata-controller serverAuth,clientAuth
pair node strata-agent serverAuth
rm -f ca.srl
if $renew; then
  echo "wrote controller/tls.crt, controller/tls.key, node/tls.crt, node/tls.key to $out, issued by its ca.crt (keep ca.key offline)"
else
  echo "wrote token, ca.crt, ca.key, controller/tls.crt, controller/tls.key, node/tls.crt, node/tls.key to $out (keep ca.key offline)"
fi
