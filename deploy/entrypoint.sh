#!/bin/sh
# The image's entrypoint (under tini): `microddp "$@"`, after shaping this
# container's link when asked. The compose lab's workers start it as root
# with NET_ADMIN; it puts tc on eth0, then drops to the user microddp with
# no capabilities left.
#   MDDP_LINK_RATE   tbf rate limit on eth0's egress, e.g. 100mbit
#   MDDP_LINK_DELAY  netem delay on eth0's egress, e.g. 5ms (needs the
#                    kernel's netem qdisc, which some kernels lack)
# Each is one value for every rank, or a comma-separated value per rank
# ("1gbit,1gbit,100mbit,1gbit": rank 2's link is slow), picked by $RANK; an
# empty value leaves that link alone.
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

shape_link
if [ "$(id -u)" -eq 0 ]; then
  exec setpriv --reuid=microddp --regid=microddp --init-groups --inh-caps=-all --bounding-set=-all \
    --no-new-privs -- microddp "$@"
fi
exec microddp "$@"
