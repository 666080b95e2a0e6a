#!/usr/bin/env bash
# Crashes, stops and cut links, with real processes on 127.0.0.1 and the
# default heartbeat flags unless a scenario says otherwise; one scenario per
# CTest test (docs/failures.md says what each fault looks like):
#   crash_test.sh MICRODDP kill9 DATA RANK        kill -9 of one of 3 workers: seen at once
#                                                 (DATA: tcp, shm, or gloo for --backend gloo)
#   crash_test.sh MICRODDP sigstop                a stopped worker: named after the heartbeat timeout
#   crash_test.sh MICRODDP coordinator_stalled    the coordinator stopped longer than the timeout
#   crash_test.sh MICRODDP link_cut DATA          one data-plane connection killed (ss -K, root; DATA: tcp or gloo)
#   crash_test.sh MICRODDP gloo_device_thread     an exception on gloo's device thread (test seam): a broken link
#   crash_test.sh MICRODDP shm_setup_kill         kill -9 during shared-memory set-up: nothing left in /dev/shm
#   crash_test.sh MICRODDP shm_orphans_reclaimed  segments of dead processes removed by the next job
# No assertion on wall-clock time: the messages say which path found the
# fault (a timeout would say "stopped sending heartbeats"); the times are
# printed (bench/detection.py measures them properly).
set -uo pipefail
BIN="$1"
SCENARIO="$2"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HOST="$(hostname)"
SPIN=(--steps 100000000 --http-port -1)  # runs until a fault ends it

# data_plane DATA: the job's flags for microddp's own transport DATA (tcp,
# shm) or for gloo (--backend gloo, its own TCP).
data_plane() { if [[ $1 == gloo ]]; then echo "--backend gloo"; else echo "--transport $1"; fi; }

# exit_times PID...: waits (30 s at most) until every PID has exited;
# EXIT_MS[pid] = ms from T0 to its exit as seen by polling every 50 ms.
declare -A EXIT_MS
exit_times() {
  local deadline=$(( $(date +%s) + 30 )) p left
  while :; do
    left=0
    for p in "$@"; do
      [[ -n "${EXIT_MS[$p]:-}" ]] && continue
      if kill -0 "$p" 2>/dev/null; then left=1; else EXIT_MS[$p]=$(( $(now_ms) - T0 )); fi
    done
    (( left == 0 )) && return 0
    (( $(date +%s) >= deadline )) && fail "still running 30 s after the fault: $*"
    sleep 0.05
  done
}
# exits_with_error PID: it exited non-zero (it must have exited already).
exits_with_error() { wait "$1"; local rc=$?; (( rc != 0 )) || fail "pid $1 exited 0, want a failure"; }
# one_error_line FILE PATTERN: FILE has exactly one "microddp: error:" line and it matches PATTERN.
one_error_line() {
  [[ $(grep -c "^microddp: error:" "$1") -eq 1 ]] || fail "want exactly one error line in $1"
  grep "^microddp: error:" "$1" | grep -q -- "$2" || fail "the error line of $1 does not match '$2'"
}
# no_line FILE PATTERN
no_line() { ! grep -q -- "$2" "$1" || fail "unexpected '$2' in $1"; }
# start_workers N [flags]: ranks 0..N-1 (RANK set), pids in W[rank].
# link_broke_everywhere: the coordinator and both workers ended with one
# error line naming the link between ranks 0 and 1, not a dead rank.
link_broke_everywhere() {
  local r link="the data-plane connection between rank 0 (host $HOST) and rank 1 (host $HOST) broke while both ranks were alive: a network fault, not a lost rank"
  exits_with_error "$COORD_PID"
  one_error_line "$WORK/coordinator.out" "^microddp: error: $link"
  for r in 0 1; do
    exits_with_error "${W[r]}"
    one_error_line "$WORK/w$r.out" "the job failed: $link"
    no_line "$WORK/w$r.out" "died"
  done
}
declare -a W
start_workers() {
  local n="$1" r; shift
  for (( r = 0; r < n; ++r )); do RANK=$r start_worker "w$r" "$@"; W[r]=$W_PID; done
}
# training: waits until every rank is a few heartbeats into training (the
# verdict can then say what the rank was doing).
training() {
  progress() { kill -0 "$COORD_PID" 2>/dev/null || fail "the coordinator ended"; has_lines "$WORK/run/metrics.jsonl" "$1"; }
  WAIT_S=60 wait_for progress "$1" || fail "no progress"
  sleep 2.5
}
# segments_of PID...: /dev/shm names made by these processes (Note [Orphaned segments]).
segments_of() {
  local p
  for p in "$@"; do ls /dev/shm 2>/dev/null | grep -E "^mddp-[0-9a-f]+-[0-9]+-$p-" ; done
}
# has_segments N PID...: the PIDs made N segments.
has_segments() { local n="$1"; shift; [[ $(segments_of "$@" | wc -l) -eq $n ]]; }

case "$SCENARIO" in
  kill9)
    # kill -9 of one rank of 3 mid-run: every survivor and the coordinator
    # end by themselves, each with one line naming the dead rank, its host
    # and pid and where it was, found by its connections closing ("died"),
    # not by the heartbeat timeout (10 s with these default flags).
    TRANSPORT="$3"; VICTIM="$4"
    # shellcheck disable=SC2046  # two words
    start_coordinator 3 "${JOB[@]}" "${SPIN[@]}" $(data_plane "$TRANSPORT") --run-dir "$WORK/run"
    start_workers 3
    training 60
    SURVIVORS=()
    for r in 0 1 2; do (( r != VICTIM )) && SURVIVORS+=("${W[r]}"); done
    T0=$(now_ms)
    kill -9 "${W[VICTIM]}"
    exit_times "${SURVIVORS[@]}" "$COORD_PID"
    echo "kill -9 of rank $VICTIM ($TRANSPORT): survivors exited $(for p in "${SURVIVORS[@]}"; do printf '%s ms ' "${EXIT_MS[$p]}"; done)after it, the coordinator ${EXIT_MS[$COORD_PID]} ms"
    WHO="rank $VICTIM (host $HOST, pid ${W[VICTIM]})"
    exits_with_error "$COORD_PID"
    one_error_line "$WORK/coordinator.out" "^microddp: error: $WHO died (last seen in [a-z]"
    for r in 0 1 2; do
      (( r == VICTIM )) && continue
      exits_with_error "${W[r]}"
      one_error_line "$WORK/w$r.out" "^microddp: error: the job failed: $WHO died (last seen in [a-z]"
      no_line "$WORK/w$r.out" "stopped sending heartbeats"
    done
    ;;

  sigstop)
    # A stopped rank (SIGSTOP) keeps its connections open: only the
    # heartbeat timeout can see it, and the verdict says so.
    start_coordinator 3 "${JOB[@]}" "${HB[@]}" "${SPIN[@]}" --run-dir "$WORK/run"
    start_workers 3
    training 60
    T0=$(now_ms)
    kill -STOP "${W[1]}"
    exit_times "${W[0]}" "${W[2]}" "$COORD_PID"
    echo "SIGSTOP of rank 1: survivors exited ${EXIT_MS[${W[0]}]} and ${EXIT_MS[${W[2]}]} ms after it (heartbeat timeout 2000 ms)"
    WHO="rank 1 (host $HOST, pid ${W[1]})"
    exits_with_error "$COORD_PID"
    one_error_line "$WORK/coordinator.out" "^microddp: error: $WHO stopped sending heartbeats"
    for r in 0 2; do
      exits_with_error "${W[r]}"
      one_error_line "$WORK/w$r.out" "the job failed: $WHO stopped sending heartbeats"
    done
    ;;

  coordinator_stalled)
    # The coordinator stopped (SIGSTOP) for longer than the heartbeat
    # timeout: the workers give up on it, and once it runs again it says
    # that it was itself not running, blaming no rank.
    start_coordinator 2 "${JOB[@]}" "${HB[@]}" "${SPIN[@]}" --run-dir "$WORK/run"
    start_workers 2
    training 20
    kill -STOP "$COORD_PID"
    T0=$(now_ms)
    exit_times "${W[0]}" "${W[1]}"
    kill -CONT "$COORD_PID"
    echo "workers gave up ${EXIT_MS[${W[0]}]} and ${EXIT_MS[${W[1]}]} ms into the coordinator's stop"
    for r in 0 1; do
      exits_with_error "${W[r]}"
      one_error_line "$WORK/w$r.out" "lost the coordinator at $ADDR"
    done
    exit_times "$COORD_PID"
    exits_with_error "$COORD_PID"
    one_error_line "$WORK/coordinator.out" "^microddp: error: the coordinator itself did not run for [0-9.]* s"
    no_line "$WORK/coordinator.out" "stopped sending heartbeats"
    no_line "$WORK/coordinator.out" "died"
    ;;

  link_cut)
    # One data-plane connection between two live ranks killed by `ss -K`:
    # a network fault, named as such, not a death.
    (( EUID == 0 )) || { echo "SKIP: ss -K needs root"; exit 77; }
    # gloo's own blocked wait is not woken by the verdict's abort
    # (Note [Aborting gloo] in core/comm/gloo/gloo_group.cc): a rank whose end saw
    # nothing leaves at the collective timeout, so it is short here.
    TIMEOUT=()
    [[ $3 == gloo ]] && TIMEOUT=(--comm-timeout-ms 8000 --heartbeat-timeout-ms 5000)
    # shellcheck disable=SC2046  # two words
    start_coordinator 2 "${JOB[@]}" "${SPIN[@]}" $(data_plane "$3") "${TIMEOUT[@]}" --run-dir "$WORK/run"
    start_workers 2
    training 20
    # Rank 0's end of its connection to rank 1: its one established socket
    # that does not go to the coordinator.
    read -r LOCAL PEER < <(ss -Htnp | grep "pid=${W[0]}," | awk -v c=":${ADDR##*:}" \
      '$1 == "ESTAB" && substr($5, length($5) - length(c) + 1) != c { print $4, $5 }')
    [[ -n "${PEER:-}" ]] || fail "cannot find the data-plane connection of rank 0"
    T0=$(now_ms)
    KILLED=$(ss -HK state established "( src $LOCAL and dst $PEER )" | wc -l)
    (( KILLED > 0 )) || { echo "SKIP: ss -K cannot destroy sockets here (CONFIG_INET_DIAG_DESTROY)"; exit 77; }
    exit_times "${W[0]}" "${W[1]}" "$COORD_PID"
    echo "connection cut: workers exited ${EXIT_MS[${W[0]}]} and ${EXIT_MS[${W[1]}]} ms after it, the coordinator ${EXIT_MS[$COORD_PID]} ms"
    link_broke_everywhere
    ;;

  gloo_device_thread)
    # gloo's own device thread throws on rank 0, as it does when one of its
    # control messages meets a connection that just broke (here the test
    # seam makes it, at rank 0's collective #300): a broken link between
    # live ranks as above, not a crash (Note [gloo's device thread dies] in
    # core/comm/gloo/device_thread.h). Rank 1 leaves at the collective timeout.
    start_coordinator 2 "${JOB[@]}" "${SPIN[@]}" --backend gloo --comm-timeout-ms 8000 --heartbeat-timeout-ms 5000 --run-dir "$WORK/run"
    MDDP_TEST_GLOO_DEVICE_THROW=0:300 start_workers 2
    T0=$(now_ms)
    exit_times "${W[0]}" "${W[1]}" "$COORD_PID"
    no_line "$WORK/w0.out" "terminate called"
    link_broke_everywhere
    ;;

  shm_setup_kill)
    # kill -9 of one rank while its shared-memory segment exists and its name
    # is published (the set-up paused there by the test seam), three times:
    # no segment of the job is left in /dev/shm once everything has ended.
    for VICTIM in 0 1 2; do
      rm -f "$WORK/addr"
      start_coordinator 3 "${JOB[@]}" "${SPIN[@]}" --transport shm
      MDDP_TEST_SHM_SETUP_PAUSE_MS=3000 start_workers 3
      WAIT_S=30 wait_for has_segments 3 "${W[@]}" || fail "the segments never appeared"
      sleep "0.$(( RANDOM % 10 ))"
      T0=$(now_ms)
      kill -9 "${W[VICTIM]}"
      exit_times "${W[@]}" "$COORD_PID"
      LEFT=$(segments_of "${W[@]}")
      echo "round $VICTIM: kill -9 of rank $VICTIM in set-up; left in /dev/shm: ${LEFT:-nothing}"
      [[ -z "$LEFT" ]] || fail "segments outlived the job: $LEFT"
      grep -q "died" "$WORK/coordinator.out" || fail "the coordinator did not name the dead rank"
    done
    ;;

  shm_orphans_reclaimed)
    # Every process of a job killed during shared-memory set-up (no survivor
    # to clean up): the next job on the host removes what they left.
    start_coordinator 2 "${JOB[@]}" "${SPIN[@]}" --transport shm
    MDDP_TEST_SHM_SETUP_PAUSE_MS=5000 start_workers 2
    WAIT_S=30 wait_for has_segments 2 "${W[@]}" || fail "the segments never appeared"
    # Listed before the kill: a shared-memory job of a test running beside
    # this one may reclaim them as soon as their makers are dead.
    ORPHANS=$(segments_of "${W[@]}")
    kill -9 "${W[0]}" "${W[1]}" "$COORD_PID"
    T0=$(now_ms)
    exit_times "${W[0]}" "${W[1]}" "$COORD_PID"
    "$BIN" run --nproc 2 --transport shm "${JOB[@]}" --steps 5 --http-port -1 >"$WORK/run.out" 2>&1 \
      || fail "the next job failed"
    LEFT=$(segments_of "${W[@]}")
    echo "orphans: $(echo $ORPHANS); after the next job: ${LEFT:-none}"
    [[ -z "$LEFT" ]] || fail "the next job did not remove the orphaned segments: $LEFT"
    ;;

  *) fail "unknown scenario $SCENARIO" ;;
esac
echo "PASS: $SCENARIO"
