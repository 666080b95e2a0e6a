#!/bin/sh
# The compose lab's secrets, made once by its `tls` service into the tls
# volume, which the coordinator and the workers mount read-only
# (deploy/README.md, "TLS and the dashboard's token"):
#   microddp-lab-tls DIR COORDINATOR WORKER...
# a CA and one certificate per host from `microddp certs` (the
# coordinator's also names 127.0.0.1 and localhost: the browser on the
# Docker host reaches it there), and a random token for the dashboard. The
# CA's key is deleted once the certificates exist, so no container of the
# job holds it. A volume that holds them all already is kept as it is (a
# second `up` keeps the certificate a browser was told to trust); one that
# holds only part of them is made anew. With MDDP_TLS=off it makes nothing.
set -eu
fail() { echo "microddp: error: $*" >&2; exit 1; }
[ $# -ge 2 ] || fail "usage: microddp-lab-tls DIR COORDINATOR WORKER..."
dir="$1"
shift
case "${MDDP_TLS:-on}" in
  on) ;;
  off) echo "microddp-lab-tls: MDDP_TLS=off: no certificates, no dashboard token"; exit 0 ;;
  *) fail "MDDP_TLS=${MDDP_TLS}: give on or off" ;;
esac

complete=1
for host in "$@"; do
  [ -s "$dir/$host.pem" ] && [ -s "$dir/$host.key" ] || complete=0
done
[ -s "$dir/ca.pem" ] && [ -s "$dir/http-token" ] || complete=0
if [ "$complete" = 1 ]; then
  echo "microddp-lab-tls: kept the certificates and the dashboard token in $dir"
  exit 0
fi

umask 077
rm -f "$dir"/*.pem "$dir"/*.key "$dir/http-token"
hosts="$1+127.0.0.1+localhost"
shift
for host in "$@"; do hosts="$hosts,$host"; done
microddp certs "$dir" --hosts "$hosts" >/dev/null
rm -f "$dir/ca.key"
# 24 random bytes in hex: a token the dashboard accepts (16+ of [A-Za-z0-9-._~]).
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/http-token"
echo "microddp-lab-tls: made a CA, certificates for $hosts and a dashboard token in $dir (the CA's key deleted)"
