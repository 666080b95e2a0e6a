#!/usr/bin/env bash
# Deaths at awkward moments, with real processes on 127.0.0.1:
#   setup_death_test.sh MICRODDP SCENARIO
#  mesh_forming  rank 2 of 3 is killed -9 while ranks 0 and 1 wait for it in
#                the TCP mesh's set-up (ordered with the test seam of
#                worker/test_hold.h): they end with the coordinator's
#                verdict (rank 2 died), not with their own timeout
#                (--comm-timeout-ms, far beyond the wait).
#  after_join    rank 1 of 2 is held just after its join was accepted (before
#                its heartbeat and Watch stream start) and killed -9, in 8
#                tries: while held (odd tries), or released and killed a
#                random 0-100 ms later: the job fails naming rank 1 as died,
#                with a heartbeat timeout far beyond the wait, so only its
#                closed connections can tell.
set -uo pipefail
BIN="$1"
SCENARIO="$2"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "$SCENARIO" in
  mesh_forming)
    # Ranks 0 and 1 hold before their data plane; rank 2 goes on into the
    # set-up (it publishes its host and waits for theirs) and is stopped
    # there; then 0 and 1 go on into the TCP mesh, where they wait for rank
    # 2's connections, and rank 2 is killed. (The sleeps only order these
    # steps: were one too short, the survivors would hear the verdict in a
    # store wait instead, which proves less but fails nothing.)
    mkdir -p "$WORK/hold"
    start_coordinator 3 "${JOB[@]}" --steps 20 --transport tcp --comm-timeout-ms 600000 \
      --heartbeat-ms 200 --heartbeat-timeout-ms 590000
    RANK=0 MDDP_TEST_HOLD_AT_STEPS=-1 MDDP_TEST_HOLD_DIR="$WORK/hold" start_worker w0; W0=$W_PID
    RANK=1 MDDP_TEST_HOLD_AT_STEPS=-1 MDDP_TEST_HOLD_DIR="$WORK/hold" start_worker w1; W1=$W_PID
    RANK=2 start_worker w2; W2=$W_PID
    WAIT_S=60 wait_for test -e "$WORK/hold/-1.held.0" -a -e "$WORK/hold/-1.held.1" || fail "ranks 0 and 1 never reached the data plane"
    WAIT_S=60 wait_for grep -q "running on" "$WORK/w2.out" || fail "rank 2 never reached the data plane"
    sleep 1
    kill -STOP "$W2"
    touch "$WORK/hold/-1.go"
    sleep 2
    T0=$(now_ms); kill -9 "$W2"
    for w in "$W0" "$W1"; do
      wait_exit "$w" 60
      [[ $RC -ne 0 && $RC -ne 124 ]] || fail "a surviving worker exited $RC, want a failure within 60 s"
      echo "a survivor exited $(( $(now_ms) - T0 )) ms after the kill"
    done
    for w in w0 w1; do
      expect_in "the job failed: rank 2 .*died" "$WORK/$w.out"
      grep -q "timed out" "$WORK/$w.out" && fail "$w timed out instead of hearing the verdict"
    done
    ;;
  after_join)
    for try in 1 2 3 4 5 6 7 8; do
      rm -rf "$WORK/hold" "$WORK"/*.out "$WORK/addr"; mkdir -p "$WORK/hold"
      start_coordinator 2 "${JOB[@]}" --steps 100000000 --heartbeat-ms 1000 --heartbeat-timeout-ms 600000 \
        --comm-timeout-ms 610000
      RANK=0 start_worker w0; W0=$W_PID
      RANK=1 MDDP_TEST_HOLD_AT_STEPS=-2 MDDP_TEST_HOLD_DIR="$WORK/hold" start_worker w1; W1=$W_PID
      WAIT_S=60 wait_for test -e "$WORK/hold/-2.held.1" || fail "try $try: rank 1 never joined"
      if (( try % 2 )); then  # while held: its Watch stream never opened
        WHEN="while held after its join"
      else
        DELAY_MS=$(( RANDOM % 101 ))
        touch "$WORK/hold/-2.go"
        sleep "$(printf '0.%03d' "$DELAY_MS")"
        WHEN="${DELAY_MS} ms after the release"
      fi
      T0=$(now_ms); kill -9 "$W1"
      wait_exit "$COORD_PID" 60
      [[ $RC -ne 0 && $RC -ne 124 ]] || fail "try $try (killed $WHEN): the coordinator exited $RC, want the job's failure within 60 s"
      expect_in "failed: rank 1 .*died" "$WORK/coordinator.out"
      wait_exit "$W0" 30
      [[ $RC -ne 0 && $RC -ne 124 ]] || fail "try $try: rank 0 exited $RC, want a failure"
      echo "try $try: killed $WHEN; rank 1 named as died, the job over $(( $(now_ms) - T0 )) ms after the kill"
    done
    ;;
  *) echo "unknown scenario $SCENARIO"; exit 2 ;;
esac
echo PASS
