#!/usr/bin/env bash
# A job across network namespaces: coordinator + 3 workers, each in its own
# namespace with its own IP on a rate-limited bridge (deploy/netns_lab.sh),
# finishes a short job over TCP, with mutual TLS on the control plane
# (each host presents its own certificate of the lab's CA). Skips (exit 77) with the reason where
# network namespaces cannot be made (not root, no iproute2, no netns).
#   netns_test.sh MICRODDP NETNS_LAB_SH
set -uo pipefail
BIN="$1"
LAB_SH="$2"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; for f in "$WORK"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }; done; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces (CI runs it as root)"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
export MDDP_LAB="mddpt$$"
ip netns add "$MDDP_LAB-probe" 2>/dev/null || skip "'ip netns add' fails here (no CAP_SYS_ADMIN / netns support)"
ip netns del "$MDDP_LAB-probe"

WORK="$(mktemp -d)"
export MICRODDP="$BIN" MDDP_LAB_DIR="$WORK"
trap 'bash "$LAB_SH" down >/dev/null 2>&1; rm -rf "$WORK"' EXIT

STEPS=30
timeout 200 bash "$LAB_SH" run 3 --rate 1gbit --dataset synthetic --synthetic-size 1024 --width 32 --batch 48 \
  --steps $STEPS --no-eval --heartbeat-ms 200 --heartbeat-timeout-ms 5000 --run-dir "$WORK/run" \
  >"$WORK/lab.log" 2>&1 || fail "the job failed (lab.log above)"
grep -q "coordinator on host 0 at 10.77.0.1:.* (mutual TLS)" "$WORK/lab.log" || fail "coordinator not on 10.77.0.1 with TLS"
grep -q "listening on 10.77.0.1:[0-9]* (3 workers expected, mutual TLS)" "$WORK/coordinator.log" ||
  fail "the coordinator did not serve mutual TLS"
[[ $(stat -c %a "$WORK/tls/10.77.0.1.key") == 600 && $(stat -c %a "$WORK/token") == 600 ]] ||
  fail "the lab's key or token is readable by others"
for i in 1 2 3; do
  grep -q "data plane address 10.77.0.$((i + 1)) (interface eth0" "$WORK/worker-$i.log" ||
    fail "worker $i did not pick its namespace's address 10.77.0.$((i + 1))"
done
grep -q "tcp transport" "$WORK/worker-1.log" || fail "the data plane did not use tcp"
N=$(wc -l <"$WORK/run/metrics.jsonl")
[[ $N -eq $((3 * STEPS)) ]] || fail "metrics.jsonl has $N records, want $((3 * STEPS))"
[[ -z "$(ip netns list | grep "^$MDDP_LAB-")" ]] || fail "the lab's namespaces were not removed"
echo "PASS: netns (3 workers on 10.77.0.2-4, coordinator on 10.77.0.1 under mutual TLS, $N metrics records)"
