#!/usr/bin/env bash
# The network-namespace lab: every "host" is a network namespace with its
# own IP address, all joined by a bridge that lives in a namespace of its
# own, so the root namespace's interfaces are never touched. A link can be
# rate-limited with tc's token bucket filter (tbf; netem is not available
# on these machines). Needs root (or CAP_NET_ADMIN) and iproute2.
#
#   netns_lab.sh up N [--rate 1gbit]   hosts 0..N-1 at 10.77.0.1 .. 10.77.0.N
#   netns_lab.sh down                  removes every namespace of the lab
#   netns_lab.sh status                namespaces and their addresses
#   netns_lab.sh exec I CMD...         runs CMD on host I
#   netns_lab.sh run N [--rate R] [--no-tls] [training flags...]
#                                      coordinator on host 0, one worker on
#                                      each of hosts 1..N; waits for the job.
#                                      A random token, and mutual TLS with a
#                                      lab CA (`microddp certs`, one
#                                      certificate per host's IP) unless
#                                      --no-tls; keys and token stay in the
#                                      log directory, mode 0600
#
# Environment: MICRODDP (the binary; default: microddp on PATH, else
# build/cli/microddp), MDDP_LAB (name prefix, default mddp; use another to
# run two labs side by side), MDDP_LAB_SUBNET (first three octets, default
# 10.77.0), MDDP_LAB_DIR (logs of `run`, default a new temporary directory).
set -euo pipefail

LAB="${MDDP_LAB:-mddp}"
SUBNET="${MDDP_LAB_SUBNET:-10.77.0}"
BRIDGE_NS="$LAB-br"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() { echo "netns_lab: $*" >&2; exit 1; }
host_ns() { echo "$LAB-h$1"; }
host_ip() { echo "$SUBNET.$(($1 + 1))"; }
namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$LAB-(br|h[0-9]+)$" || true; }

microddp_bin() {
  if [[ -n "${MICRODDP:-}" ]]; then echo "$MICRODDP"; return; fi
  if command -v microddp >/dev/null; then command -v microddp; return; fi
  [[ -x "$here/../build/cli/microddp" ]] && { echo "$here/../build/cli/microddp"; return; }
  die "no microddp binary: set MICRODDP=/path/to/microddp"
}

check_tools() {
  [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces and bridges)"
  command -v ip >/dev/null || die "needs iproute2 (ip)"
}

# up N [--rate R]
lab_up() {
  local n="$1"; shift
  local rate=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --rate) rate="$2"; shift 2 ;;
      --rate=*) rate="${1#--rate=}"; shift ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 && "$n" -le 200 ]] || die "up: N must be 1..200"
  check_tools
  [[ -z "$(namespaces)" ]] || die "lab '$LAB' is already up (netns_lab.sh down first, or set MDDP_LAB)"
  ip netns add "$BRIDGE_NS"
  ip -n "$BRIDGE_NS" link set lo up
  ip -n "$BRIDGE_NS" link add br0 type bridge
  ip -n "$BRIDGE_NS" link set br0 up
  for ((i = 0; i < n; i++)); do
    local ns; ns="$(host_ns "$i")"
    ip netns add "$ns"
    # Both ends are created inside namespaces: v<i> on the bridge, eth0 on the host.
    ip -n "$BRIDGE_NS" link add "v$i" type veth peer name eth0 netns "$ns"
    ip -n "$BRIDGE_NS" link set "v$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(host_ip "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [[ -n "$rate" ]]; then  # both directions of the link: host -> bridge and bridge -> host
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
      ip netns exec "$BRIDGE_NS" tc qdisc add dev "v$i" root tbf rate "$rate" burst 256kb latency 50ms
    fi
  done
  echo "lab '$LAB': $n hosts, $(host_ip 0) .. $(host_ip $((n - 1)))${rate:+, links limited to $rate}"
}

lab_down() {
  local ns
  for ns in $(namespaces); do ip netns del "$ns"; done
  echo "lab '$LAB' is down"
}

lab_status() {
  local ns
  [[ -n "$(namespaces)" ]] || { echo "lab '$LAB' is down"; return; }
  for ns in $(namespaces); do
    [[ "$ns" == "$BRIDGE_NS" ]] && continue
    echo "$ns: $(ip -n "$ns" -4 -o addr show dev eth0 | awk '{print $4}')  $(ip netns exec "$ns" tc qdisc show dev eth0 | head -1)"
  done
}

lab_exec() {
  local i="$1"; shift
  ip netns exec "$(host_ns "$i")" "$@"
}

# On exit of `run`: stop what it started, remove the lab if it made it.
RUN_PIDS=()
RUN_CREATED=0
stop_all() {
  local p
  for p in "${RUN_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ $RUN_CREATED -eq 1 ]]; then lab_down >/dev/null; fi
}

# run N [--rate R] [--no-tls] [training flags...]: coordinator on host 0, workers on 1..N.
lab_run() {
  local n="$1"; shift
  [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 ]] || die "run: N (workers) must be >= 1"
  local up_args=() flags=() tls=1
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --rate) up_args+=(--rate "$2"); shift 2 ;;
      --rate=*) up_args+=("$1"); shift ;;
      --no-tls) tls=0; shift ;;
      *) flags+=("$1"); shift ;;
    esac
  done
  local bin; bin="$(microddp_bin)"
  local dir="${MDDP_LAB_DIR:-$(mktemp -d)}"
  mkdir -p "$dir"
  RUN_CREATED=0
  if [[ -z "$(namespaces)" ]]; then lab_up $((n + 1)) "${up_args[@]}"; RUN_CREATED=1; fi
  RUN_PIDS=()
  trap stop_all EXIT

  # The data plane crosses the lab's network: tcp (with --transport auto the
  # namespaces, which share a hostname and a kernel, would pick shared memory).
  local transport=(--transport tcp)
  local f; for f in "${flags[@]}"; do [[ "$f" == --transport* ]] && transport=(); done
  # The job's secrets: a token, and (TLS) a CA with one certificate per host,
  # named by its IP (what the workers dial, what each presents).
  (umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token")
  local coord_tls=() hosts=() i
  if [[ $tls -eq 1 ]]; then
    for ((i = 0; i <= n; i++)); do hosts+=("$(host_ip "$i")"); done
    "$bin" certs "$dir/tls" --hosts "$(IFS=,; echo "${hosts[*]}")" --days 2 >/dev/null
    coord_tls=(--tls-cert "$dir/tls/$(host_ip 0).pem" --tls-key "$dir/tls/$(host_ip 0).key"
               --tls-ca "$dir/tls/ca.pem" --tls-client-auth)
  fi
  lab_exec 0 "$bin" coordinator --host "$(host_ip 0)" --port 0 --world-size "$n" --token-file "$dir/token" \
    --address-file "$dir/address" "${coord_tls[@]}" "${transport[@]}" "${flags[@]}" >"$dir/coordinator.log" 2>&1 &
  RUN_PIDS+=($!)
  local t=0
  until [[ -s "$dir/address" ]]; do
    sleep 0.1; t=$((t + 1))
    kill -0 "${RUN_PIDS[0]}" 2>/dev/null || { cat "$dir/coordinator.log" >&2; die "the coordinator did not start"; }
    [[ $t -lt 300 ]] || die "the coordinator did not start within 30 s (log: $dir/coordinator.log)"
  done
  local addr; addr="$(cat "$dir/address")"
  echo "coordinator on host 0 at $addr ($([[ $tls -eq 1 ]] && echo "mutual TLS" || echo "no TLS")); ranks 0..$((n - 1)) on hosts 1..$n; logs in $dir"
  for ((i = 1; i <= n; i++)); do  # host i runs rank i-1
    local worker_tls=()
    [[ $tls -eq 1 ]] && worker_tls=(--tls-ca "$dir/tls/ca.pem" --tls-cert "$dir/tls/$(host_ip "$i").pem"
                                    --tls-key "$dir/tls/$(host_ip "$i").key")
    lab_exec "$i" env RANK=$((i - 1)) "$bin" worker --coordinator "$addr" --token-file "$dir/token" \
      "${worker_tls[@]}" >"$dir/worker-$i.log" 2>&1 &
    RUN_PIDS+=($!)
  done
  local rc=0 p
  for p in "${RUN_PIDS[@]}"; do wait "$p" || rc=1; done
  RUN_PIDS=()
  if [[ $rc -eq 0 ]]; then
    echo "job finished: $(tail -n 1 "$dir/coordinator.log")"
  else
    echo "job failed; last lines:" >&2
    tail -n 3 "$dir/coordinator.log" "$dir"/worker-*.log >&2
  fi
  return $rc
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  up) [[ $# -ge 1 ]] || die "usage: netns_lab.sh up N [--rate 1gbit]"; lab_up "$@" ;;
  down) check_tools; lab_down ;;
  status) lab_status ;;
  exec) [[ $# -ge 2 ]] || die "usage: netns_lab.sh exec I CMD..."; lab_exec "$@" ;;
  run) [[ $# -ge 1 ]] || die "usage: netns_lab.sh run N [--rate R] [flags...]"; check_tools; lab_run "$@" ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    [[ -z "$cmd" || "$cmd" == "-h" || "$cmd" == "--help" ]] || exit 2
    ;;
esac
