#!/usr/bin/env bash
# Makes a development CA and a webhook serving certificate for local runs (the demo, manual
# tests). SANs: 127.0.0.1, ::1, localhost and the in-cluster Service names. Never for production:
# in a cluster, cert-manager issues and rotates the certificate.
#
# usage: certs/make-dev-certs.sh [OUT_DIR] [SERVICE_NAME] [NAMESPACE]
set -euo pipefail
out="${1:-$(dirname "$0")/dev}"
svc="${2:-veneer-node-watcher}"
ns="${3:-veneer-system}"
command -v openssl >/dev/null || { echo "openssl is required (Debian: apt-get install openssl)" >&2; exit 3; }
mkdir -p "$out"
cd "$out"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt -days 365 \
  -subj "/CN=veneer-node-watcher dev CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout tls.key -out tls.csr -subj "/CN=$svc.$ns.svc" 2>/dev/null
cat > tls.ext <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost,DNS:$svc,DNS:$svc.$ns,DNS:$svc.$ns.svc,DNS:$svc.$ns.svc.cluster.local
EXT
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 90 -extfile tls.ext 2>/dev/null
rm -f tls.csr tls.ext ca.srl
chmod 600 ca.key tls.key
echo "$out/tls.crt $out/tls.key (CA: $out/ca.crt)"
