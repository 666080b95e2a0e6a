#!/usr/bin/env bash
# The network-namespace lab: every "host" is a network namespace with its
# own IP address, all joined by a bridge that lives in a namespace of its
# own, so the root namespace's interfaces are never touched, and a UTS
# namespace with its own hostname (lab-h0, ...), so that microddp's host
# identity (hostname + boot id) tells the hosts apart: ranks on one host
# share memory, ranks on different hosts do not. A link can be
# rate-limited with tc's token bucket filter (tbf; netem is not available
# on these machines). Needs root (or CAP_NET_ADMIN) and iproute2.
#
#   netns_lab.sh up N [--rate 1gbit]   hosts 0..N-1 at 10.77.0.1 .. 10.77.0.N
#   netns_lab.sh down                  removes every namespace of the lab
#   netns_lab.sh status                namespaces and their addresses
#   netns_lab.sh exec I CMD...         runs CMD on host I
#   netns_lab.sh run LAYOUT [--rate R] [--no-tls] [training flags...]
#                                      coordinator on host 0, the workers on
#                                      hosts 1..; waits for the job.
#                                      A random token, and mutual TLS with a
#                                      lab CA (`microddp certs`, one
#                                      certificate per host's IP) unless
#                                      --no-tls; keys and token stay in the
#                                      log directory, mode 0600
#   netns_lab.sh bench LAYOUT [--rate R] [bench allreduce flags...]
#                                      `microddp bench allreduce` with its
#                                      ranks on hosts 0..; prints rank 0's
#                                      table and the bytes each host's link
#                                      sent and received meanwhile
#
# LAYOUT: N (N hosts, one rank each), HxK (H hosts, K ranks each) or K1+K2+...
# (host i has Ki ranks); ranks are numbered host by host.
#
# Environment: MICRODDP (the binary; default: microddp on PATH, else
# build/cli/microddp), MDDP_LAB (name prefix, default mddp; use another to
# run two labs side by side), MDDP_LAB_SUBNET (first three octets, default
# 10.77.0), MDDP_LAB_DIR (logs of `run` and `bench`, default a new temporary directory).
set -euo pipefail

LAB="${MDDP_LAB:-mddp}"
SUBNET="${MDDP_LAB_SUBNET:-10.77.0}"
BRIDGE_NS="$LAB-br"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() { echo "netns_lab: $*" >&2; exit 1; }
host_ns() { echo "$LAB-h$1"; }
host_uts() { echo "/run/$LAB-uts-h$1"; }  # the host's UTS namespace, kept by a file as ip netns keeps its
host_ip() { echo "$SUBNET.$(($1 + 1))"; }
namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$LAB-(br|h[0-9]+)$" || true; }

# LAYOUT -> the ranks on each host, one number per host: "3" -> 1 1 1,
# "2x2" -> 2 2, "2+3" -> 2 3.
layout_counts() {
  local l="$1"
  if [[ "$l" =~ ^[0-9]+$ ]]; then
    [[ "$l" -ge 1 ]] || die "layout: need at least one host"
    printf '1 %.0s' $(seq "$l")
  elif [[ "$l" =~ ^([0-9]+)x([0-9]+)$ ]]; then
    [[ ${BASH_REMATCH[1]} -ge 1 && ${BASH_REMATCH[2]} -ge 1 ]] || die "layout $l: counts must be >= 1"
    local k="${BASH_REMATCH[2]}"
    printf "$k %.0s" $(seq "${BASH_REMATCH[1]}")
  elif [[ "$l" =~ ^[0-9]+(\+[0-9]+)+$ ]]; then
    local c
    for c in ${l//+/ }; do [[ "$c" -ge 1 ]] || die "layout $l: counts must be >= 1"; printf '%s ' "$c"; done
  else
    die "bad layout '$l' (N, HxK or K1+K2+...: 3, 2x2, 2+3)"
  fi
}

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
    touch "$(host_uts "$i")"
    unshare --uts="$(host_uts "$i")" hostname "lab-h$i"
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
  local ns f
  for ns in $(namespaces); do ip netns del "$ns"; done
  for f in /run/"$LAB"-uts-h*; do
    [[ -e "$f" ]] || continue
    umount "$f" 2>/dev/null || true
    rm -f "$f"
  done
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
  nsenter --uts="$(host_uts "$i")" ip netns exec "$(host_ns "$i")" "$@"
}

# Bytes host I's link has sent and received: "TX RX".
link_bytes() {
  local d=/sys/class/net/eth0/statistics
  lab_exec "$1" sh -c "echo \$(cat $d/tx_bytes) \$(cat $d/rx_bytes)"
}

# On exit of `run`: stop what it started, remove the lab if it made it.
RUN_PIDS=()
RUN_CREATED=0
stop_all() {
  local p
  for p in "${RUN_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ $RUN_CREATED -eq 1 ]]; then lab_down >/dev/null; fi
}

# Splits "[--rate R] [--no-tls] [flags...]" into UP_ARGS (for lab_up),
# TLS (1 unless --no-tls) and FLAGS.
split_rate() {
  UP_ARGS=() FLAGS=() TLS=1
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --rate) UP_ARGS+=(--rate "$2"); shift 2 ;;
      --rate=*) UP_ARGS+=("$1"); shift ;;
      --no-tls) TLS=0; shift ;;
      *) FLAGS+=("$1"); shift ;;
    esac
  done
}

# Brings the lab up with N hosts unless it is up already (then it is left up).
ensure_up() {
  RUN_CREATED=0
  if [[ -z "$(namespaces)" ]]; then lab_up "$1" "${UP_ARGS[@]}"; RUN_CREATED=1; fi
  RUN_PIDS=()
  trap stop_all EXIT
}

# Waits for every process in RUN_PIDS; 0 when all succeeded.
wait_all() {
  local rc=0 p
  for p in "${RUN_PIDS[@]}"; do wait "$p" || rc=1; done
  RUN_PIDS=()
  return $rc
}

# What `run` and `bench` share: "LAYOUT [--rate R] [flags...]" -> counts
# (ranks per host), hosts, n (ranks), UP_ARGS and FLAGS (split_rate), bin
# and the log directory dir; the caller declares them local.
prepare() {
  counts=($(layout_counts "$1")); shift
  hosts=${#counts[@]} n=0
  local c
  for c in "${counts[@]}"; do n=$((n + c)); done
  split_rate "$@"
  bin="$(microddp_bin)"
  dir="${MDDP_LAB_DIR:-$(mktemp -d)}"
  mkdir -p "$dir"
}

# run LAYOUT [--rate R] [--no-tls] [training flags...]: coordinator on host
# 0, the workers host by host on hosts 1.. (rank numbers contiguous per host).
lab_run() {
  local counts hosts n bin dir
  prepare "$@"
  ensure_up $((hosts + 1))

  # The data plane crosses the lab's network: tcp (each host has its own
  # hostname, so --transport auto picks tcp too; a flag given wins).
  local transport=(--transport tcp)
  local f; for f in "${FLAGS[@]}"; do [[ "$f" == --transport* ]] && transport=(); done
  # The job's secrets: a token, and (TLS) a CA with one certificate per host,
  # named by its IP (what the workers dial, what each presents).
  (umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token")
  local coord_tls=() ips=() i
  if [[ $TLS -eq 1 ]]; then
    for ((i = 0; i <= hosts; i++)); do ips+=("$(host_ip "$i")"); done
    "$bin" certs "$dir/tls" --hosts "$(IFS=,; echo "${ips[*]}")" --days 2 >/dev/null
    coord_tls=(--tls-cert "$dir/tls/$(host_ip 0).pem" --tls-key "$dir/tls/$(host_ip 0).key"
               --tls-ca "$dir/tls/ca.pem" --tls-client-auth)
  fi
  lab_exec 0 "$bin" coordinator --host "$(host_ip 0)" --port 0 --world-size "$n" --token-file "$dir/token" \
    --address-file "$dir/address" "${coord_tls[@]}" "${transport[@]}" "${FLAGS[@]}" >"$dir/coordinator.log" 2>&1 &
  RUN_PIDS+=($!)
  local t=0
  until [[ -s "$dir/address" ]]; do
    sleep 0.1; t=$((t + 1))
    kill -0 "${RUN_PIDS[0]}" 2>/dev/null || { cat "$dir/coordinator.log" >&2; die "the coordinator did not start"; }
    [[ $t -lt 300 ]] || die "the coordinator did not start within 30 s (log: $dir/coordinator.log)"
  done
  local addr; addr="$(cat "$dir/address")"
  echo "coordinator on host 0 at $addr ($([[ $TLS -eq 1 ]] && echo "mutual TLS" || echo "no TLS")); ranks 0..$((n - 1)) on hosts 1..$hosts ($(echo "${counts[@]}" | tr ' ' '+') per host); logs in $dir"
  local rank=0 h k
  for ((h = 1; h <= hosts; h++)); do
    local worker_tls=()
    [[ $TLS -eq 1 ]] && worker_tls=(--tls-ca "$dir/tls/ca.pem" --tls-cert "$dir/tls/$(host_ip "$h").pem"
                                    --tls-key "$dir/tls/$(host_ip "$h").key")
    for ((k = 0; k < counts[h - 1]; k++)); do  # worker-<host>.log, or worker-<host>-<k>.log with several
      local log="$dir/worker-$h.log"
      [[ ${counts[h - 1]} -gt 1 ]] && log="$dir/worker-$h-$k.log"
      lab_exec "$h" env RANK=$rank "$bin" worker --coordinator "$addr" --token-file "$dir/token" \
        "${worker_tls[@]}" >"$log" 2>&1 &
      RUN_PIDS+=($!)
      rank=$((rank + 1))
    done
  done
  if wait_all; then
    echo "job finished: $(tail -n 1 "$dir/coordinator.log")"
  else
    echo "job failed; last lines:" >&2
    tail -n 3 "$dir/coordinator.log" "$dir"/worker-*.log >&2
    return 1
  fi
}

# bench LAYOUT [--rate R] [bench allreduce flags...]: rank r of `microddp
# bench allreduce` on its host (hosts 0.., ranks contiguous per host), the
# ranks meeting through a fresh directory; then each host's link bytes.
lab_bench() {
  local counts hosts n bin dir
  prepare "$@"
  ensure_up "$hosts"
  local meet; meet="$(mktemp -d "$dir/rendezvous.XXXXXX")"
  local before=() h k rank=0
  for ((h = 0; h < hosts; h++)); do before+=("$(link_bytes "$h")"); done
  for ((h = 0; h < hosts; h++)); do
    for ((k = 0; k < counts[h]; k++)); do
      lab_exec "$h" "$bin" bench allreduce --rank $rank --nproc "$n" --rendezvous "$meet" \
        --bind-host "$(host_ip "$h")" "${FLAGS[@]}" >"$dir/rank-$rank.log" 2>&1 &
      RUN_PIDS+=($!)
      rank=$((rank + 1))
    done
  done
  local rc=0
  wait_all || rc=1
  cat "$dir/rank-0.log"
  for ((h = 0; h < hosts; h++)); do
    local b=(${before[h]}) a=($(link_bytes "$h"))
    echo "# link of host $h ($(echo "${counts[h]}") rank(s)): sent $((a[0] - b[0])) B, received $((a[1] - b[1])) B"
  done
  if [[ $rc -ne 0 ]]; then
    echo "bench failed; last lines:" >&2
    tail -n 3 "$dir"/rank-*.log >&2
  fi
  rm -rf "$meet"
  return $rc
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  up) [[ $# -ge 1 ]] || die "usage: netns_lab.sh up N [--rate 1gbit]"; lab_up "$@" ;;
  down) check_tools; lab_down ;;
  status) lab_status ;;
  exec) [[ $# -ge 2 ]] || die "usage: netns_lab.sh exec I CMD..."; lab_exec "$@" ;;
  run) [[ $# -ge 1 ]] || die "usage: netns_lab.sh run LAYOUT [--rate R] [--no-tls] [flags...]"; check_tools; lab_run "$@" ;;
  bench) [[ $# -ge 1 ]] || die "usage: netns_lab.sh bench LAYOUT [--rate R] [flags...]"; check_tools; lab_bench "$@" ;;
  *)
    sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'
    [[ -z "$cmd" || "$cmd" == "-h" || "$cmd" == "--help" ]] || exit 2
    ;;
esac
