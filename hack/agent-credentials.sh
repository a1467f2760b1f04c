#!/usr/bin/env bash
# Makes the credentials controller-server and the node agents authenticate each other with:
# a random token, a CA, and one certificate for the name "strata-agent" that every agent
# server presents. Usage: hack/agent-credentials.sh OUT_DIR [DAYS]
# In a cluster, put the files in a Kubernetes Secret (see deploy/).
#
# hack/agent-credentials.sh --renew DIR [DAYS]: a new tls.crt and tls.key from the CA already in
# DIR (ca.crt, and ca.key brought back from where it is kept offline); token and CA stay, so the
# servers pick the new certificate up without a restart (docs/operations.md "Rotating the agent certificates").
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
openssl req -newkey rsa:3072 -nodes -keyout tls.key -out tls.csr -subj "/CN=strata-agent" 2>/dev/null
printf 'subjectAltName=DNS:strata-agent\nextendedKeyUsage=serverAuth,clientAuth\n' > tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days "$days" \
  -extfile tls.ext 2>/dev/null
rm -f tls.csr tls.ext ca.srl
if $renew; then
  echo "wrote tls.crt, tls.key to $out, issued by its ca.crt (keep ca.key offline)"
else
  echo "wrote token, ca.crt, ca.key, tls.crt, tls.key to $out (keep ca.key offline)"
fi
