#!/bin/sh
# Certificates of the production layout's EventStoreDB (secure mode: TLS and logins):
# a private CA, and a node certificate it signs for the names the other containers dial.
#
#   scripts/eventstore-certs.sh <dir> [extra DNS name]...
#
# Writes <dir>/ca/ca.crt, <dir>/node/node.crt and <dir>/node/node.key. The CA key is thrown
# away once the node certificate is signed: nothing can issue another certificate the clients
# would trust, and a single node needs none.
# Does nothing when <dir>/node/node.crt exists, so a restarted stack keeps its CA (clients
# that trust it keep connecting); delete the directory (the volume) to issue new ones.
set -eu

dir=${1:?usage: eventstore-certs.sh <dir> [extra DNS name]...}
shift
if [ -s "$dir/node/node.crt" ]; then
  echo "eventstore certificates: $dir already has them"
  exit 0
fi
mkdir -p "$dir/ca" "$dir/node"

san="DNS:eventstore,DNS:localhost,IP:127.0.0.1"
for name in "$@"; do san="$san,DNS:$name"; done

openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=svc-gateway eventstore CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$dir/ca/ca.key" -out "$dir/ca/ca.crt" 2>/dev/null

# EventStoreDB presents the node certificate to clients and to other nodes, so it needs both
# extended key usages; its CN is what the nodes of a cluster check of each other.
ext="$dir/node/node.ext"
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$san" >"$ext"
openssl req -new -newkey rsa:2048 -nodes -subj "/CN=eventstoredb-node" \
  -keyout "$dir/node/node.key" -out "$dir/node/node.csr" 2>/dev/null
openssl x509 -req -in "$dir/node/node.csr" -CA "$dir/ca/ca.crt" -CAkey "$dir/ca/ca.key" \
  -CAcreateserial -days 825 -extfile "$ext" -out "$dir/node/node.crt" 2>/dev/null
rm -f "$dir/node/node.csr" "$ext" "$dir/ca/ca.srl" "$dir/ca/ca.key"

# Keys for their owner only. In the compose layout the script runs as root and EventStoreDB
# (and the gateway's node user) run as uid 1000: hand the files over so both can read theirs.
chmod 600 "$dir/node/node.key"
chmod 644 "$dir/ca/ca.crt" "$dir/node/node.crt"
if [ "$(id -u)" = 0 ]; then chown -R 1000:1000 "$dir"; fi
echo "eventstore certificates: written to $dir ($san)"
