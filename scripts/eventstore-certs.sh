#!/bin/sh
# Certificates of the production layout's EventStoreDB (secure mode: TLS and logins):
# a private CA, and node certificates it signs for the names the other containers dial.
#
#   scripts/eventstore-certs.sh <dir> [extra DNS name]...       one node
#   scripts/eventstore-certs.sh --nodes <dir> <node name>...     a cluster (docker compose --profile ha)
#
# One node: writes <dir>/ca/ca.crt, <dir>/node/node.crt and <dir>/node/node.key, for the names
# eventstore and localhost, 127.0.0.1 and the extra names.
# A cluster: writes <dir>/ca/ca.crt and, for each node, <dir>/<node name>/node.crt and node.key
# for its name, localhost and 127.0.0.1. Each node presents its own: to clients, which dial the
# name the node advertises in gossip, and to the other nodes, which check the CN.
#
# The CA key is thrown away once the node certificates are signed: nothing can issue another
# certificate the clients would trust. Does nothing when every node certificate exists, so a
# restarted stack keeps its CA (clients that trust it keep connecting), and refuses to add a
# node beside certificates already issued; delete the directory (the volume) to issue new ones.
set -eu

usage='usage: eventstore-certs.sh <dir> [extra DNS name]... | eventstore-certs.sh --nodes <dir> <node name>...'
cluster=false
if [ "${1:-}" = --nodes ]; then
  cluster=true
  shift
fi
dir=${1:?$usage}
shift
if $cluster; then
  [ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
  nodes="$*"
else
  nodes=node
fi
for name in "$@"; do
  # A name becomes a directory and a subjectAltName: nothing that could be read as either.
  case $name in '' | *[!A-Za-z0-9.-]*) echo "eventstore certificates: not a DNS name: $name" >&2; exit 2 ;; esac
done

missing=0
for node in $nodes; do
  [ -s "$dir/$node/node.crt" ] || missing=$((missing + 1))
done
if [ "$missing" = 0 ]; then
  echo "eventstore certificates: $dir already has them"
  exit 0
fi
# A new CA would not be the one the nodes already issued trust, and the old one's key is gone.
for issued in "$dir"/*/node.crt; do
  if [ -s "$issued" ]; then
    echo "eventstore certificates: $dir holds certificates of another CA, whose key is gone: delete $dir to issue all anew" >&2
    exit 1
  fi
done
mkdir -p "$dir/ca"

openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=svc-gateway eventstore CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$dir/ca/ca.key" -out "$dir/ca/ca.crt" 2>/dev/null

# EventStoreDB presents a node certificate to clients and to other nodes, so it needs both
# extended key usages; its CN is what the nodes of a cluster check of each other.
sign() { # <node directory> <subjectAltName>
  mkdir -p "$dir/$1"
  ext="$dir/$1/node.ext"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$2" >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=eventstoredb-node" \
    -keyout "$dir/$1/node.key" -out "$dir/$1/node.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$1/node.csr" -CA "$dir/ca/ca.crt" -CAkey "$dir/ca/ca.key" \
    -CAcreateserial -days 825 -extfile "$ext" -out "$dir/$1/node.crt" 2>/dev/null
  rm -f "$dir/$1/node.csr" "$ext"
  chmod 600 "$dir/$1/node.key"
  chmod 644 "$dir/$1/node.crt"
  echo "eventstore certificates: $dir/$1 ($2)"
}

if $cluster; then
  for node in $nodes; do sign "$node" "DNS:$node,DNS:localhost,IP:127.0.0.1"; done
else
  san="DNS:eventstore,DNS:localhost,IP:127.0.0.1"
  for name in "$@"; do san="$san,DNS:$name"; done
  sign node "$san"
fi
rm -f "$dir/ca/ca.srl" "$dir/ca/ca.key"

# Keys for their owner only. In the compose layout the script runs as root and EventStoreDB
# (and the gateway's node user) run as uid 1000: hand the files over so both can read theirs.
chmod 644 "$dir/ca/ca.crt"
if [ "$(id -u)" = 0 ]; then chown -R 1000:1000 "$dir"; fi
echo "eventstore certificates: written to $dir"
