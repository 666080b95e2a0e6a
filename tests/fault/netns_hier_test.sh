#!/usr/bin/env bash
# The hierarchical all-reduce with real processes on emulated hosts: the
# netns lab (deploy/netns_lab.sh) gives each host its own network and UTS
# namespace (its own IP and hostname), ranks on one host share memory, the
# links between hosts are rate-limited TCP. For each layout (2x2, 3x2, the
# uneven 2+3), `microddp bench allreduce --algo hierarchical` on sizes that
# divide evenly by nothing must be exact (#wrong 0), run hierarchical, and
# send 2(H-1)S bytes between hosts per all-reduce (the spec's formula); a
# 2x2 training job with --algo auto must pick it and finish. Skips (exit 77)
# with the reason where network namespaces cannot be made.
#   netns_hier_test.sh MICRODDP NETNS_LAB_SH
set -uo pipefail
BIN="$1"
LAB_SH="$2"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; for f in "$WORK"/*.log "$WORK"/*/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }; done; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces (CI runs it as root)"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
command -v nsenter >/dev/null || skip "util-linux (nsenter, unshare) is not installed"
export MDDP_LAB="mddph$$"
ip netns add "$MDDP_LAB-probe" 2>/dev/null || skip "'ip netns add' fails here (no CAP_SYS_ADMIN / netns support)"
ip netns del "$MDDP_LAB-probe"

WORK="$(mktemp -d)"
export MICRODDP="$BIN"
trap 'bash "$LAB_SH" down >/dev/null 2>&1; rm -rf "$WORK"' EXIT

# bench LAYOUT HOSTS: the sweep's rows must be exact, hierarchical, and
# cross hosts with 2(H-1)S bytes.
bench() {
  local layout="$1" hosts="$2"
  mkdir -p "$WORK/$layout"
  MDDP_LAB_DIR="$WORK/$layout" timeout 300 bash "$LAB_SH" bench "$layout" --rate 1gbit --algo hierarchical \
    -b 4 -e 2M -f 13 --iters 2 --warmup 1 --timeout-ms 60000 >"$WORK/bench-$layout.log" 2>&1 ||
    fail "$layout: the bench failed"
  grep -q "^# $hosts hosts: " "$WORK/bench-$layout.log" || fail "$layout: not seen as $hosts hosts"
  grep -q "^OK$" "$WORK/bench-$layout.log" || fail "$layout: wrong elements"
  local rows
  rows=$(awk -v h="$hosts" '
    /^ +[0-9]/ {
      n++
      if ($5 != "hierarchical") { print "row " $1 ": algo " $5; bad = 1 }
      if ($9 != 0) { print "row " $1 ": " $9 " wrong"; bad = 1 }
      if ($10 != 2 * (h - 1) * $1) { print "row " $1 ": xhost " $10 " B, formula 2(H-1)S = " 2 * (h - 1) * $1; bad = 1 }
    }
    END { if (bad) exit 1; print n }' "$WORK/bench-$layout.log") || fail "$layout: $rows"
  [[ $rows -ge 5 ]] || fail "$layout: only $rows rows"
  grep -q "^# link of host $((hosts - 1))" "$WORK/bench-$layout.log" || fail "$layout: no link bytes"
  echo "ok: $layout ($rows sizes, exact, hierarchical, 2(H-1)S bytes across hosts)"
}

bench 2x2 2
bench 3x2 3
bench 2+3 2

STEPS=12
MDDP_LAB_DIR="$WORK/train" timeout 300 bash "$LAB_SH" run 2x2 --rate 1gbit --dataset synthetic --synthetic-size 1024 \
  --width 32 --batch 48 --steps $STEPS --no-eval --heartbeat-ms 200 --heartbeat-timeout-ms 10000 \
  --run-dir "$WORK/train/run" >"$WORK/train.log" 2>&1 || fail "the 2x2 job failed"
grep -q "ranks 0..3 on hosts 1..2 (2+2 per host)" "$WORK/train.log" || fail "not 2 hosts x 2 ranks"
for log in "$WORK"/train/worker-*.log; do
  grep -q "data plane: 2 hosts: 2+2 ranks over tcp, shared memory within each host" "$log" ||
    fail "$(basename "$log"): the hierarchical all-reduce was not set up"
done
N=$(grep -c '"kind":"step"' "$WORK/train/run/metrics.jsonl")  # event lines (the attempt) left out
[[ $N -eq $((4 * STEPS)) ]] || fail "metrics.jsonl has $N records, want $((4 * STEPS))"
grep -q '"host reduce-scatter"' "$WORK/train/run/metrics.jsonl" || fail "no host-level steps in the traced records"
# Any cross-host phase: the level's algorithm is auto's choice for each piece (this
# job's small buckets go by recursive doubling, whose steps are "reduce").
grep -qE '"cross-host (reduce-scatter|all-gather|reduce|broadcast)"' "$WORK/train/run/metrics.jsonl" ||
  fail "no cross-host steps in the traced records"
[[ -z "$(ip netns list | grep "^$MDDP_LAB-")" ]] || fail "the lab's namespaces were not removed"
echo "PASS: netns hierarchical (2x2, 3x2, 2+3 exact with the formula's bytes; a 2x2 job picked it)"
