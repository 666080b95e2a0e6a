#!/usr/bin/env bash
# Fault tests of the service with real processes on 127.0.0.1, one scenario
# per CTest test:
#   fault_test.sh MICRODDP SCENARIO
# MICRODDP must have the coordinator, worker and run commands. Every wait is
# bounded; every process started here is killed on exit.
set -uo pipefail
BIN="$1"
SCENARIO="$2"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Distinct (rank, step) pairs in a metrics.jsonl.
# (Keys are written sorted, so "rank" comes before "step" on every line.)
unique_records() { grep '"kind":"step"' "$1" | sed -E 's/.*"rank":([0-9]+),.*"step":([0-9]+),.*/\1 \2/' | sort -u | wc -l; }

case "$SCENARIO" in
  run_metrics)
    # 4 ranks through `run`: every rank's every step lands in metrics.jsonl.
    "$BIN" run --nproc 4 "${JOB[@]}" --steps 25 --run-dir "$WORK/run" >"$WORK/run.out" 2>&1 &
    RUN_PID=$!; PIDS+=("$RUN_PID")
    wait_exit "$RUN_PID" 120
    [[ $RC -eq 0 ]] || fail "run exited $RC"
    expect_in "coordinator at 127.0.0.1:" "$WORK/run.out"
    expect_in "all 4 ranks finished" "$WORK/run.out"
    [[ $(lines "$WORK/run/metrics.jsonl") -eq 100 ]] || fail "metrics.jsonl has $(lines "$WORK/run/metrics.jsonl") records, want 4 x 25"
    [[ $(unique_records "$WORK/run/metrics.jsonl") -eq 100 ]] || fail "metrics.jsonl lacks some (rank, step)"
    for r in 0 1 2 3; do
      [[ $(grep -c "\"rank\":$r," "$WORK/run/metrics.jsonl") -eq 25 ]] || fail "rank $r does not have 25 records"
    done
    [[ -s "$WORK/run/checkpoint.safetensors" ]] || fail "rank 0 wrote no checkpoint"
    ;;

  kill_worker)
    # kill -9 of rank 2 mid-run: the job fails naming rank 2, and every other
    # worker exits non-zero within 10 s saying so.
    "$BIN" run --nproc 4 "${JOB[@]}" "${HB[@]}" --steps 10000000 --run-dir "$WORK/run" >"$WORK/run.out" 2>&1 &
    RUN_PID=$!; PIDS+=("$RUN_PID")
    WAIT_S=60 wait_for has_lines "$WORK/run/metrics.jsonl" 40 || fail "no progress"
    VICTIM=$(worker_pid 2)
    OTHERS="$(worker_pid 0) $(worker_pid 1) $(worker_pid 3)"
    [[ -n "$VICTIM" && $(echo $OTHERS | wc -w) -eq 3 ]] || fail "cannot find the worker processes"
    T0=$(now_ms)
    kill -9 "$VICTIM"
    # shellcheck disable=SC2086
    WAIT_S=10 wait_for gone $OTHERS || fail "the other workers still run 10 s after kill -9 of rank 2"
    echo "other workers exited $(( $(now_ms) - T0 )) ms after the kill"
    wait_exit "$RUN_PID" 30
    [[ $RC -ne 0 && $RC -ne 124 ]] || fail "run exited $RC, want a failure"
    expect_in "job 'local' failed: rank 2" "$WORK/run/coordinator.log"
    expect_in "microddp: error: .*rank 2" "$WORK/run.out"   # rank 0's line, and run's
    for r in 1 3; do
      [[ $(grep -c "microddp: error:" "$WORK/run/worker-$r.log") -eq 1 ]] || fail "rank $r: want exactly one error line"
      expect_in "microddp: error: the job failed: rank 2" "$WORK/run/worker-$r.log"
    done
    ;;

  coordinator_killed)
    # The coordinator dies: workers give up once it has been unreachable for
    # longer than the heartbeat timeout, with a clear message.
    start_coordinator 2 "${JOB[@]}" "${HB[@]}" --steps 10000000 --run-dir "$WORK/run"
    start_worker w0; W0=$W_PID
    start_worker w1; W1=$W_PID
    WAIT_S=60 wait_for has_lines "$WORK/run/metrics.jsonl" 20 || fail "no progress"
    T0=$(now_ms)
    kill -9 "$COORD_PID"
    WAIT_S=15 wait_for gone "$W0" "$W1" || fail "workers still run 15 s after the coordinator died"
    DT=$(( $(now_ms) - T0 ))
    echo "workers exited $DT ms after the coordinator died"
    (( DT >= 1500 )) || fail "workers gave up after $DT ms, before the 2 s heartbeat timeout"
    for w in w0 w1; do
      wait_exit "$([[ $w == w0 ]] && echo "$W0" || echo "$W1")" 5
      [[ $RC -ne 0 ]] || fail "$w exited 0"
      expect_in "microddp: error: lost the coordinator at $ADDR" "$WORK/$w.out"
    done
    ;;

  coordinator_paused)
    # SIGSTOP of the coordinator for less than the heartbeat timeout: the job
    # goes on, metrics are only delayed (none lost, none doubled).
    STEPS=30000  # long enough that the pause lands mid-run, even on a fast idle machine
    start_coordinator 2 "${JOB[@]}" --heartbeat-ms 200 --heartbeat-timeout-ms 5000 --steps $STEPS --run-dir "$WORK/run"
    start_worker w0; W0=$W_PID
    start_worker w1; W1=$W_PID
    WAIT_S=60 wait_for has_lines "$WORK/run/metrics.jsonl" 20 || fail "no progress"
    kill -STOP "$COORD_PID"
    sleep 2
    kill -CONT "$COORD_PID"
    wait_exit "$W0" 120; [[ $RC -eq 0 ]] || fail "worker 0 exited $RC"
    wait_exit "$W1" 60; [[ $RC -eq 0 ]] || fail "worker 1 exited $RC"
    wait_exit "$COORD_PID" 30; [[ $RC -eq 0 ]] || fail "coordinator exited $RC"
    N=$(lines "$WORK/run/metrics.jsonl")
    U=$(unique_records "$WORK/run/metrics.jsonl")
    echo "metrics.jsonl: $N records, $U distinct"
    [[ $U -eq $((2 * STEPS)) ]] || fail "metrics lost: $U distinct (rank, step) of $((2 * STEPS))"
    [[ $N -eq $((2 * STEPS)) ]] || fail "metrics doubled: $N records for $((2 * STEPS))"
    ;;

  rendezvous_timeout)
    # 1 of 3 workers shows up: the rendezvous times out saying how many joined.
    start_coordinator 3 "${JOB[@]}" --rendezvous-timeout-s 2 --steps 5
    start_worker w0; W0=$W_PID
    wait_exit "$W0" 30
    [[ $RC -ne 0 && $RC -ne 124 ]] || fail "worker exited $RC"
    expect_in "microddp: error: .*1 of 3 workers joined" "$WORK/w0.out"
    wait_exit "$COORD_PID" 30
    [[ $RC -ne 0 && $RC -ne 124 ]] || fail "coordinator exited $RC"
    expect_in "1 of 3 workers joined" "$WORK/coordinator.out"
    ;;

  wrong_token)
    # A stranger with a wrong token is refused, both while the job forms and
    # while it runs; the job is untouched and finishes with all its metrics.
    STEPS=40000  # long enough that bad2 arrives while the job runs, even on a fast idle machine
    start_coordinator 2 "${JOB[@]}" "${HB[@]}" --token right-token --steps $STEPS --run-dir "$WORK/run"
    start_worker w0 --token right-token; W0=$W_PID
    start_worker bad1 --token wrong-token; BAD=$W_PID
    wait_exit "$BAD" 30
    [[ $RC -ne 0 && $RC -ne 124 ]] || fail "the wrong-token worker exited $RC"
    expect_in "microddp: error: .*wrong token" "$WORK/bad1.out"
    start_worker w1 --token right-token; W1=$W_PID
    WAIT_S=60 wait_for has_lines "$WORK/run/metrics.jsonl" 10 || fail "no progress"
    start_worker bad2 --token wrong-token; BAD=$W_PID
    wait_exit "$BAD" 30
    [[ $RC -ne 0 && $RC -ne 124 ]] || fail "the wrong-token worker exited $RC"
    expect_in "microddp: error: .*wrong token" "$WORK/bad2.out"
    wait_exit "$W0" 120; [[ $RC -eq 0 ]] || fail "worker 0 exited $RC"
    wait_exit "$W1" 60; [[ $RC -eq 0 ]] || fail "worker 1 exited $RC"
    wait_exit "$COORD_PID" 30; [[ $RC -eq 0 ]] || fail "coordinator exited $RC"
    [[ $(unique_records "$WORK/run/metrics.jsonl") -eq $((2 * STEPS)) ]] || fail "metrics incomplete"
    ;;

  worker_interrupted)
    # Ctrl-C on one worker: it leaves with "interrupted", the job fails naming
    # it, the other worker exits non-zero naming it.
    start_coordinator 2 "${JOB[@]}" "${HB[@]}" --steps 10000000 --run-dir "$WORK/run"
    start_worker w0; W0=$W_PID
    start_worker w1; W1=$W_PID
    WAIT_S=60 wait_for has_lines "$WORK/run/metrics.jsonl" 20 || fail "no progress"
    kill -INT "$W1"
    wait_exit "$W1" 10; [[ $RC -ne 0 && $RC -ne 124 ]] || fail "interrupted worker exited $RC"
    wait_exit "$W0" 10; [[ $RC -ne 0 && $RC -ne 124 ]] || fail "worker 0 exited $RC"
    RANK1=$(grep -o "rank [01] of 2" "$WORK/w1.out" | head -1 | cut -d' ' -f2)
    expect_in "rank $RANK1 was interrupted (SIGINT)" "$WORK/w0.out"
    wait_exit "$COORD_PID" 30; [[ $RC -ne 0 && $RC -ne 124 ]] || fail "coordinator exited $RC"
    expect_in "failed: rank $RANK1" "$WORK/coordinator.out"
    ;;

  run_interrupted)
    # SIGINT to `run`: everything stops, exit 130, no process left behind.
    "$BIN" run --nproc 4 "${JOB[@]}" --steps 10000000 --run-dir "$WORK/run" >"$WORK/run.out" 2>&1 &
    RUN_PID=$!; PIDS+=("$RUN_PID")
    WAIT_S=60 wait_for has_lines "$WORK/run/metrics.jsonl" 20 || fail "no progress"
    CHILDREN=$(pgrep -P "$RUN_PID" | tr '\n' ' ')
    [[ $(echo $CHILDREN | wc -w) -eq 5 ]] || fail "want 5 children (coordinator + 4 workers), got '$CHILDREN'"
    kill -INT "$RUN_PID"
    wait_exit "$RUN_PID" 15
    [[ $RC -eq 130 ]] || fail "run exited $RC after SIGINT, want 130"
    # shellcheck disable=SC2086
    WAIT_S=5 wait_for gone $CHILDREN || fail "children left behind: $CHILDREN"
    expect_in "interrupted (SIGINT)" "$WORK/run.out"
    ;;

  resources)
    # What each worker runs on reaches the coordinator's members in job.json:
    # the device it resolved, its compute threads (the job's --threads 2) and
    # the CPUs its process may use (rank 0 is pinned to one CPU by taskset).
    # A host with more compute threads than CPUs gets the coordinator's warning.
    start_coordinator 2 "${JOB[@]}" "${HB[@]}" --threads 2 --steps 10000000 --run-dir "$WORK/run"
    RANK=0 taskset -c 0 "$BIN" worker --coordinator "$ADDR" >"$WORK/w0.out" 2>&1 &
    PIDS+=("$!")
    RANK=1 "$BIN" worker --coordinator "$ADDR" >"$WORK/w1.out" 2>&1 &
    PIDS+=("$!")
    reported() {  # every member of job.json has its CPU count
      [[ -s "$WORK/run/job.json" ]] && /usr/bin/python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["members"]
sys.exit(0 if len(m) == 2 and all(x["cpus"] is not None for x in m) else 1)' "$WORK/run/job.json"
    }
    WAIT_S=60 wait_for reported || fail "job.json's members never got their CPU counts"
    MAXC=$(/usr/bin/python3 - "$WORK/run/job.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["members"]
assert [x["rank"] for x in m] == [0, 1], m
for x in m:
    assert x["device"] == "cpu" and x["threads"] == 2 and x["cpus"] >= 1 and x["pid"] > 0, x
assert m[0]["cpus"] == 1, f"rank 0 runs under taskset -c 0 but reports {m[0]['cpus']} CPUs"
print(max(x["cpus"] for x in m))
PY
) || fail "job.json's members: $(cat "$WORK/run/job.json")"
    echo "job.json members: threads 2 each, CPUs 1 (pinned) and $MAXC"
    expect_in "running on cpu with 2 compute threads; this process may use 1 CPU" "$WORK/w0.out"
    if (( 4 > MAXC )); then
      WAIT_S=10 wait_for grep -Eq "4 threads on $MAXC CPUs?, [0-9.]+x oversubscribed" "$WORK/coordinator.out" \
        || fail "no oversubscription warning for 4 compute threads on $MAXC CPUs"
    fi
    ;;

  *) fail "unknown scenario $SCENARIO" ;;
esac
echo "PASS: $SCENARIO"
