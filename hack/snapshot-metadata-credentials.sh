#!/usr/bin/env bash
# Makes the TLS certificate the external-snapshot-metadata sidecar serves backup tools with: a CA
# of its own (backup tools trust it through the SnapshotMetadataService's caCert) and a server
# certificate for the sidecar's Service, strata-snapshot-metadata in strata-system.
# Usage: hack/snapshot-metadata-credentials.sh OUT_DIR [DAYS]
# For deploy/: OUT_DIR deploy/components/snapshot-metadata/credentials (git-ignored), whose files
# the component's secretGenerator reads. Keep ca.key offline; renewing: run it again with the same
# OUT_DIR and the CA in place (--renew, as hack/agent-credentials.sh).
set -euo pipefail
renew=false
if [ "${1:-}" = --renew ]; then
  renew=true
  shift
fi
out=${1:?usage: hack/snapshot-metadata-credentials.sh [--renew] OUT_DIR [DAYS]}
days=${2:-825}
service=strata-snapshot-metadata
namespace=strata-system
mkdir -p "$out"
umask 077
cd "$out"
if $renew; then
  [ -f ca.crt ] && [ -f ca.key ] || { echo "hack: --renew needs ca.crt and ca.key in $out" >&2; exit 1; }
else
  openssl req -x509 -newkey rsa:3072 -nodes -keyout ca.key -out ca.crt -days "$days" \
    -subj "/CN=strata-snapshot-metadata-ca" 2>/dev/null
fi
openssl req -newkey rsa:3072 -nodes -keyout tls.key -out tls.csr -subj "/CN=$service.$namespace" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
  "$service" "$service" "$namespace" "$service" "$namespace" "$service" "$namespace" > tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days "$days" -extfile tls.ext 2>/dev/null
rm -f tls.csr tls.ext ca.srl
echo "wrote ca.crt, ca.key, tls.crt, tls.key to $out for $service.$namespace (keep ca.key offline)"
