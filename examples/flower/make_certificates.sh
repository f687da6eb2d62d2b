#!/usr/bin/env bash
# Make the TLS files of a loopback Flower deployment with openssl (no network):
# a throw-away certificate authority and one SuperLink certificate signed by it.
#
#   make_certificates.sh OUT_DIR
#
# OUT_DIR/ca.crt      CA certificate: given to the SuperNodes (--root-certificates),
#                     to the SuperLink (--ssl-ca-certfile) and to `flwr`
#                     (root-certificates in config.toml) to verify the SuperLink.
# OUT_DIR/server.crt  SuperLink certificate (--ssl-certfile), valid for
#                     127.0.0.1, ::1 and localhost only: the deployment is loopback.
# OUT_DIR/server.key  its private key (--ssl-keyfile).
# ca.key, server.csr and the extension file are intermediates, kept for inspection.
set -euo pipefail

if [ "$#" -ne 1 ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
out=$1
mkdir -p "$out"
cd "$out"

# The keys must not be readable by others even for the instant before a chmod.
umask 077

days=2  # A loopback run lasts minutes; short validity limits a leaked key's use.

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" \
    -keyout ca.key -out ca.crt -subj "/CN=uldp loopback CA" 2>/dev/null

openssl req -newkey rsa:2048 -nodes -sha256 \
    -keyout server.key -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null

# gRPC and HTTPS clients check the subjectAltName, not the CN: it must name every
# address a client dials (SuperNodes, SuperExec and flwr all dial 127.0.0.1).
cat > server.ext <<'EXT'
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, IP:::1, DNS:localhost
EXT

openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out server.crt -days "$days" -sha256 -extfile server.ext 2>/dev/null

chmod 600 ca.key server.key
echo "$out"
