#!/usr/bin/env bash
# The control plane under a connection flood, with real processes on
# loopback: a coordinator limited to 1024 descriptors (soft and hard, so
# raising the soft limit cannot help), 1100 idle connections held by one
# local process (conn_flood.py, from 127.0.0.2), one worker joining during
# the flood (from 127.0.0.1) and one after it: both join and the job
# succeeds, and the coordinator says it turned connections away.
#   flood_test.sh MICRODDP
set -uo pipefail
BIN="$1"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
FLOOD="$(dirname "${BASH_SOURCE[0]}")/conn_flood.py"

(ulimit -n 1024 && exec "$BIN" coordinator --world-size 2 --port 0 --host 127.0.0.1 \
  --address-file "$WORK/addr" "${JOB[@]}" --steps 20 --rendezvous-timeout-s 90 \
  --run-dir "$WORK/run") >"$WORK/coordinator.out" 2>&1 &
COORD_PID=$!; PIDS+=("$COORD_PID")
WAIT_S=30 wait_for test -s "$WORK/addr" || fail "the coordinator did not start"
ADDR="$(cat "$WORK/addr")"

python3 "$FLOOD" 127.0.0.1 "${ADDR##*:}" 127.0.0.2 1100 "$WORK/flood.ready" "$WORK/flood.stop" \
  >"$WORK/flood.out" 2>&1 &
FLOOD_PID=$!; PIDS+=("$FLOOD_PID")
WAIT_S=60 wait_for test -s "$WORK/flood.ready" || fail "the flood did not start"
echo "flood: $(cat "$WORK/flood.ready") of 1100 connections opened"

start_worker during
WAIT_S=60 wait_for grep -q "join from" "$WORK/coordinator.out" ||
  fail "no worker joined during the flood"
touch "$WORK/flood.stop"
wait_exit "$FLOOD_PID" 30
start_worker after
wait_exit "$COORD_PID" 120
[[ $RC -eq 0 ]] || fail "the coordinator exited $RC, want 0 (the job's success)"
expect_in "succeeded: all 2 ranks finished" "$WORK/coordinator.out"
expect_in "turned away" "$WORK/coordinator.out"
echo "PASS"
