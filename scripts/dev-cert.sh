#!/bin/sh
# A TLS certificate for trying the gateway over HTTPS and WSS on this machine (the realtime SDK
# always dials wss://): a private CA, and a certificate it signs for localhost and 127.0.0.1.
#
#   npm run dev-cert [-- <dir>]        (default: $SVC_DATA_DIR/tls, else ./.svc-data/tls)
#
# Then: SVC_TLS_CERT=<dir>/localhost.pem SVC_TLS_KEY=<dir>/localhost-key.pem npm start, and
# clients trust the CA with NODE_EXTRA_CA_CERTS=<dir>/ca.pem. For development only: the CA's
# key is thrown away, so it cannot sign anything else.
set -eu

dir=${1:-${SVC_DATA_DIR:-./.svc-data}/tls}
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=svc-gateway dev CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$tmp/ca-key.pem" -out "$dir/ca.pem" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n' >"$tmp/ext"
openssl req -new -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$dir/localhost-key.pem" -out "$tmp/csr" 2>/dev/null
openssl x509 -req -in "$tmp/csr" -CA "$dir/ca.pem" -CAkey "$tmp/ca-key.pem" -CAcreateserial -CAserial "$tmp/serial" \
  -days 825 -extfile "$tmp/ext" -out "$dir/localhost.pem" 2>/dev/null
chmod 600 "$dir/localhost-key.pem"

echo "dev certificate for localhost written to $dir:"
echo "  SVC_TLS_CERT=$dir/localhost.pem SVC_TLS_KEY=$dir/localhost-key.pem npm start"
echo "  NODE_EXTRA_CA_CERTS=$dir/ca.pem node your-client.mjs"
