#!/usr/bin/env bash
# Restarts (docs/recovery.md), with real processes on 127.0.0.1: a worker killed
# with -9 mid-run, the job re-forms (a new attempt) and resumes from its last
# checkpoint, and its final checkpoint is bit-identical to a run that was never
# interrupted; one scenario per CTest test:
#   restart_test.sh MICRODDP kill TRANSPORT   `run --max-restarts 1`, rank 1 killed once
#   restart_test.sh MICRODDP three_kills      `run --max-restarts 3`, three kills of random ranks
#   restart_test.sh MICRODDP budget_spent     `run --max-restarts 1`, two kills: the job fails, saying so
#   restart_test.sh MICRODDP worker_restart   coordinator --max-restarts + `worker --restart`; the killed
#                                             worker started again by hand (as a supervisor would)
# No assertion on wall-clock time; the time from each kill to the next
# attempt's first step is printed.
set -uo pipefail
BIN="$1"
SCENARIO="$2"
TRANSPORT="${3:-shm}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../support/same_checkpoint.sh"  # same_checkpoint
case "$SCENARIO" in  # the kills' steps + 1 (held, restart_lib.sh): a hold nobody releases is a hang
  three_kills) HOLD_AT_STEPS=101,401,701 ;;
  budget_spent) HOLD_AT_STEPS=101,401 ;;
  *) HOLD_AT_STEPS=101 ;;
esac
source "$(dirname "${BASH_SOURCE[0]}")/restart_lib.sh"  # kill_at_step, kill_at, restarted, ...

STEPS=1500
TRAIN=(--dataset synthetic --synthetic-size 1024 --width 32 --batch 60 --no-eval --log-every 1000000
       --optimizer adam --lr 0.002 --seed 5 --steps "$STEPS" --checkpoint-every 50 --keep-checkpoints 0
       --transport "$TRANSPORT" --http-port -1)
RUN=("$BIN" run --nproc 3 "${HB[@]}")

# straight DIR: the uninterrupted reference run.
straight() { "${RUN[@]}" "${TRAIN[@]}" --run-dir "$1" >"$WORK/straight.out" 2>&1 || fail "the straight run failed"; }


# exactly_once DIR RESTARTS: metrics.jsonl has RESTARTS restart lines, and
# once the superseded records are left out (a resume from S supersedes the
# earlier attempts' records past S), at most one record per (rank, step),
# every step after the last resume. (A killed rank's records it had not sent
# yet are gone with it: those steps before its checkpoint may be missing.)
exactly_once() {
  python3 - "$1/metrics.jsonl" "$2" "$STEPS" <<'PY' || fail "metrics.jsonl is not exactly-once"
import json, sys, collections
path, restarts, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
records, n_restart, last_from = [], 0, 0
for line in open(path):
    j = json.loads(line)
    kind = j.get("kind")
    if kind == "restart":
        n_restart += 1
        assert j["cause"] and j["rank"] >= 0 and j["pid"] > 0, j
    elif kind == "resume":
        records = [r for r in records if not (r["attempt"] < j["attempt"] and r["step"] > j["from_step"])]
        last_from = j["from_step"]
    elif kind in ("step", "eval"):
        assert "attempt" in j, j
        records.append(j)
assert n_restart == restarts, (n_restart, restarts)
count = collections.Counter((r["rank"], r["step"]) for r in records if r["kind"] == "step")
dups = [k for k, n in count.items() if n != 1]
assert not dups, dups[:5]
missing = 0
for rank in range(3):
    have = set(s for (r, s) in count if r == rank)
    assert have <= set(range(1, steps + 1)), rank
    assert set(range(last_from + 1, steps + 1)) <= have, (rank, last_from)
    missing += steps - len(have)
print("exactly once:", len(count), "records,", n_restart, "restarts,", missing, "records lost with the killed ranks")
PY
}

case "$SCENARIO" in
  kill | three_kills)
    straight "$WORK/straight"
    kills=1
    [[ $SCENARIO == three_kills ]] && kills=3
    "${HELD[@]}" "${RUN[@]}" "${TRAIN[@]}" --max-restarts "$kills" --run-dir "$WORK/run" >"$WORK/run.out" 2>&1 &
    RUN_PID=$!
    PIDS+=("$RUN_PID")
    for (( k = 0; k < kills; ++k )); do
      rank=1
      [[ $SCENARIO == three_kills ]] && rank=$(( RANDOM % 3 ))
      kill_at "$WORK/run" "$k" $(( 100 + 300 * k )) "$rank"
    done
    wait_exit "$RUN_PID" 300
    [[ $RC -eq 0 ]] || fail "the restarted run exited $RC"
    expect_in "starting it again" "$WORK/run.out"
    same_checkpoint "$WORK/straight" "$WORK/run" "the restarted run"
    exactly_once "$WORK/run" "$kills"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert len(j["restarts"])==int(sys.argv[2]) and j["attempt"]==int(sys.argv[2]), j["restarts"]' \
      "$WORK/run/job.json" "$kills" || fail "job.json does not list the restarts"
    "$BIN" analyze "$WORK/run" --no-report >"$WORK/analyze.out" 2>&1 || fail "analyze failed"
    expect_in "^restarts: $kills" "$WORK/analyze.out"
    expect_in "attempt 1: rank [0-9] (host .*) died .*; resumed from step [0-9]*, [0-9]* steps\? lost" "$WORK/analyze.out"
    ;;
  budget_spent)
    "${HELD[@]}" "${RUN[@]}" "${TRAIN[@]}" --max-restarts 1 --run-dir "$WORK/run" >"$WORK/run.out" 2>&1 &
    RUN_PID=$!
    PIDS+=("$RUN_PID")
    kill_at "$WORK/run" 0 100 1
    kill_at_step "$WORK/run" 1 400 2
    wait_exit "$RUN_PID" 120
    [[ $RC -eq 1 ]] || fail "the run exited $RC, want 1"
    # run's own line (the last; rank 0's, on the same console, comes before it).
    tail -n 1 "$WORK/run.out" | grep -q "^microddp: error: .*no restart left: all 1 of --max-restarts used" \
      || fail "run's error does not say the restarts are spent"
    ;;
  worker_restart)
    straight "$WORK/straight"
    start_coordinator 3 "${TRAIN[@]}" "${HB[@]}" --token s3cret --max-restarts 1 --run-dir "$WORK/run"
    for r in 0 1 2; do RANK=$r held start_worker "w$r" --token s3cret --restart; W[r]=$W_PID; done
    kill_at_step "$WORK/run" 0 100 1
    # The killed rank's supervisor (a container's restart policy, systemd) starts it again;
    # the survivors start themselves again (--restart).
    RANK=1 held start_worker "w1-again" --token s3cret --restart
    W[1]=$W_PID
    restarted "$WORK/run" 1
    all_exit 0 "${W[@]}" "$COORD_PID"
    expect_in "joining the job again (--restart)" "$WORK/w0.out"
    expect_in "joining the job again (--restart)" "$WORK/w2.out"
    same_checkpoint "$WORK/straight" "$WORK/run" "the restarted run"
    exactly_once "$WORK/run" 1
    ;;
  *)
    fail "unknown scenario $SCENARIO"
    ;;
esac
echo "PASS: $SCENARIO"
