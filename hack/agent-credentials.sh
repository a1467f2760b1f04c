#!/usr/bin/env bash
# Makes the credentials controller-server and the node agents authenticate each other with:
# a random token, a CA, and one certificate for the name "strata-agent" that every agent
# server presents. Usage: hack/agent-credentials.sh OUT_DIR [DAYS]
# In a cluster, put the files in a Kubernetes Secret (see deploy/).
set -euo pipefail
out=${1:?usage: hack/agent-credentials.sh OUT_DIR [DAYS]}
days=${2:-825}
mkdir -p "$out"
umask 077
cd "$out"
openssl rand -hex 32 > token
openssl req -x509 -newkey rsa:3072 -nodes -keyout ca.key -out ca.crt -days "$days" \
  -subj "/CN=strata-agent-ca" 2>/dev/null
openssl req -newkey rsa:3072 -nodes -keyout tls.key -out tls.csr -subj "/CN=strata-agent" 2>/dev/null
printf 'subjectAltName=DNS:strata-agent\nextendedKeyUsage=serverAuth,clientAuth\n' > tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days "$days" \
  -extfile tls.ext 2>/dev/null
rm -f tls.csr tls.ext ca.srl
echo "wrote token, ca.crt, ca.key, tls.crt, tls.key to $out (keep ca.key offline)"
