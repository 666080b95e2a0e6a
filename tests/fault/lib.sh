# shellcheck shell=bash
# What the fault scripts share (fault_test.sh, crash_test.sh), sourced after
# BIN (the microddp binary) is set: a work directory removed on exit, every
# process started through these helpers killed on exit (SIGCONT first, for
# the paused ones), bounded waits, and the coordinator and workers in the
# background.
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$WORK"/*.out "$WORK"/*.log "$WORK"/run/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 30 "$f"; }; done; exit 1; }
expect_in() { grep -q -- "$1" "$2" || fail "expected '$1' in $2"; }
now_ms() { date +%s%3N; }

# A small, fast job on synthetic data; training flags for coordinator / run
# (the batch splits over 1, 2, 3 or 4 ranks).
JOB=(--dataset synthetic --synthetic-size 1024 --width 32 --batch 60 --no-eval --log-every 1000000)
# Fast failure detection for the tests.
HB=(--heartbeat-ms 200 --heartbeat-timeout-ms 2000)

source "$(dirname "${BASH_SOURCE[0]}")/../support/wait.sh"  # wait_for, wait_exit
lines() { [[ -f "$1" ]] && wc -l <"$1" || echo 0; }
has_lines() { (( $(lines "$1") >= $2 )); }
gone() { for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }

# start_coordinator WORLD [flags...]: runs `coordinator` in the background; sets COORD_PID and ADDR.
start_coordinator() {
  local n="$1"; shift
  "$BIN" coordinator --world-size "$n" --port 0 --address-file "$WORK/addr" "$@" >"$WORK/coordinator.out" 2>&1 &
  COORD_PID=$!
  PIDS+=("$COORD_PID")
  WAIT_S=30 wait_for test -s "$WORK/addr" || fail "the coordinator did not start"
  ADDR="$(cat "$WORK/addr")"
}
# start_worker NAME [flags...]: a worker of the coordinator at $ADDR; its pid in W_PID.
start_worker() {
  local name="$1"; shift
  "$BIN" worker --coordinator "$ADDR" "$@" >"$WORK/$name.out" 2>&1 &
  W_PID=$!
  PIDS+=("$W_PID")
}
# The worker of `run` (child of RUN_PID) with RANK=$1.
worker_pid() {
  local p
  for p in $(pgrep -P "$RUN_PID"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$1" && { echo "$p"; return; }
  done
}
