#!/bin/sh
# The image's entrypoint (under tini): `microddp "$@"`, after shaping this
# container's link and adding the compose lab's TLS flags when asked. The
# compose lab's workers start it as root with NET_ADMIN; it puts tc on eth0,
# then drops to the user microddp with no capabilities left.
#   MDDP_LINK_RATE   tbf rate limit on eth0's egress, e.g. 100mbit
#   MDDP_LINK_DELAY  netem delay on eth0's egress, e.g. 5ms (needs the
#                    kernel's netem qdisc, which some kernels lack)
# Each is one value for every rank, or a comma-separated value per rank
# ("1gbit,1gbit,100mbit,1gbit": rank 2's link is slow), picked by $RANK; an
# empty value leaves that link alone.
#   MDDP_TLS=on      (the compose lab's default; unset: off) a coordinator or
#                    worker gets the TLS flags of its host (this container's
#                    host name) for the files deploy/lab-tls.sh made in
#                    MDDP_TLS_DIR (default /tls): the coordinator serves the
#                    control plane and the dashboard (HTTPS, with the token
#                    in http-token) and wants every worker's certificate
#                    (mutual TLS); a worker checks the coordinator's against
#                    the lab CA and presents its own.
#   MDDP_PUBLISHED_DASHBOARD  HOST:PORT where the coordinator's dashboard is
#                    published: the URL it prints (--http-public-url), https://
#                    with TLS.
set -eu
IFACE=eth0  # a container's first (here: only) network

fail() { echo "microddp: error: $*" >&2; exit 1; }

# value_for_rank NAME LIST: LIST's entry for $RANK (the one entry when LIST has one).
value_for_rank() {
  case "$2" in
    *,*)
      case "${RANK:-}" in ''|*[!0-9]*) fail "$1=$2 gives one value per rank, but RANK is '${RANK:-}'" ;; esac
      v="$(echo "$2" | cut -d, -f"$((RANK + 1))")"
      [ "$(echo "$2" | tr -cd , | wc -c)" -ge "$RANK" ] || fail "$1=$2 has no value for rank $RANK"
      echo "$v" ;;
    *) echo "$2" ;;
  esac
}

shape_link() {
  rate="$(value_for_rank MDDP_LINK_RATE "${MDDP_LINK_RATE:-}")"
  delay="$(value_for_rank MDDP_LINK_DELAY "${MDDP_LINK_DELAY:-}")"
  [ -n "$rate$delay" ] || return 0
  [ "$(id -u)" -eq 0 ] || fail "MDDP_LINK_RATE/MDDP_LINK_DELAY need the container to start as root with NET_ADMIN (user: root, cap_add: [NET_ADMIN])"
  if [ -n "$delay" ]; then  # netem delays, and limits the rate itself
    set -- netem delay "$delay" ${rate:+rate "$rate"}
  else  # the same token bucket as deploy/netns_lab.sh --rate
    set -- tbf rate "$rate" burst 256kb latency 50ms
  fi
  if ! out="$(tc qdisc replace dev "$IFACE" root "$@" 2>&1)"; then
    case "$out" in
      *"qdisc kind is unknown"*) fail "cannot shape $IFACE with $1: this kernel has no $1 qdisc${delay:+ (leave MDDP_LINK_DELAY empty; MDDP_LINK_RATE uses tbf)}" ;;
      *"not permitted"*) fail "cannot shape $IFACE: tc needs NET_ADMIN (cap_add: [NET_ADMIN])" ;;
      *) fail "tc qdisc replace dev $IFACE root $*: $out" ;;
    esac
  fi
  echo "microddp-entrypoint: $IFACE: $(tc qdisc show dev "$IFACE" | head -n 1)"
}

# lab_flags SUBCOMMAND: prints the flags to add for the compose lab, one a line.
lab_flags() {
  tls="${MDDP_TLS:-off}"
  case "$tls" in on|off) ;; *) fail "MDDP_TLS=$tls: give on or off" ;; esac
  case "$1" in coordinator|worker) ;; *) return 0 ;; esac
  scheme=http
  if [ "$tls" = on ]; then
    dir="${MDDP_TLS_DIR:-/tls}"
    host="$(cat /proc/sys/kernel/hostname)"
    if [ ! -s "$dir/ca.pem" ] || [ ! -s "$dir/$host.pem" ]; then
      fail "MDDP_TLS=on, but $dir has no ca.pem and $host.pem (the compose lab's tls service makes them: deploy/lab-tls.sh); MDDP_TLS=off runs without TLS"
    fi
    if [ "$1" = coordinator ]; then
      scheme=https
      printf '%s\n' --tls-cert "$dir/$host.pem" --tls-key "$dir/$host.key" --tls-ca "$dir/ca.pem" \
        --tls-client-auth --http-token-file "$dir/http-token"
    else
      printf '%s\n' --tls-ca "$dir/ca.pem" --tls-cert "$dir/$host.pem" --tls-key "$dir/$host.key"
    fi
  fi
  if [ "$1" = coordinator ] && [ -n "${MDDP_PUBLISHED_DASHBOARD:-}" ]; then
    echo "--http-public-url=$scheme://$MDDP_PUBLISHED_DASHBOARD/"
  fi
}

shape_link
# (No flag holds a space or a newline: the paths are this script's own.)
flags="$(lab_flags "${1:-}")"
IFS='
'
# shellcheck disable=SC2086  # split on newlines only
set -- "$@" $flags
unset IFS
if [ "$(id -u)" -eq 0 ]; then
  exec setpriv --reuid=microddp --regid=microddp --init-groups --inh-caps=-all --bounding-set=-all \
    --no-new-privs -- microddp "$@"
fi
exec microddp "$@"
