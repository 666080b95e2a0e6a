#!/usr/bin/env bash
# --on-failure shrink (docs/recovery.md, "Survivors train on"), with real
# processes on 127.0.0.1; one scenario per CTest test:
#   shrink_test.sh MICRODDP kill RANK DATA   a coordinator and 3 workers; rank RANK killed -9 after
#                                            step 21 (all ranks held there): the other two re-form
#                                            attempt 1 in their own processes (the same pids), go
#                                            on from step 21 with no checkpoint read (at most the
#                                            step in flight lost), and end byte for byte where a
#                                            plain 2-rank job resumed from step 21's checkpoint
#                                            ends. RANK 0 is the process that wrote the
#                                            checkpoints. DATA: shm, tcp or gloo (--backend gloo).
#   shrink_test.sh MICRODDP twice            3 ranks, two kills: down to 1 rank, which finishes.
#   shrink_test.sh MICRODDP min              --min-nproc 3: a kill fails the job, saying why.
#   shrink_test.sh MICRODDP run              `run --on-failure shrink`: a worker killed, the run
#                                            ends 0 without it, saying so.
#   shrink_test.sh MICRODDP hang             `run`: a worker SIGSTOPped: the others go on without it,
#                                            and once the job is done `run` kills the stopped one.
#   shrink_test.sh MICRODDP flags            shrink with --ddp sharded or --local-sgd, fail with
#                                            --max-restarts: refused.
# No assertion on wall-clock time (the kill-to-step time is printed).
set -uo pipefail
BIN="$1"
SCENARIO="$2"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../support/same_checkpoint.sh"  # same_checkpoint
KILL=20                       # the kill lands once every rank holds after step KILL + 1
HOLD_AT_STEPS=$(( KILL + 1 ))
[[ $SCENARIO == twice ]] && HOLD_AT_STEPS+=",41"  # its second kill
source "$(dirname "${BASH_SOURCE[0]}")/restart_lib.sh"  # kill_at_step, restarted, ...

STEPS=80
# --batch 64 over 3 ranks is 22, 21, 21 (Note [Uneven shares]); over 2, 32 each.
# A checkpoint at every step, so the reference can resume from where the
# survivors went on; the replica check would take part in each (it is a
# collective), so it is left to the end.
TRAIN=(--dataset synthetic --synthetic-size 1024 --width 32 --batch 64 --no-eval --log-every 1000000
       --optimizer adam --lr 0.002 --seed 5 --http-port -1
       --checkpoint-every 1 --keep-checkpoints 0 --check-replicas-every -1)
ckpt_file() { printf '%s/checkpoints/step-%08d.safetensors' "$1" "$2"; }
data_plane() { if [[ $1 == gloo ]]; then echo "--backend gloo"; else echo "--transport $1"; fi; }
three_workers() {
  for r in 0 1 2; do RANK=$r held start_worker "w$r" --token s3cret "$@"; W[r]=$W_PID; done
}
# first_step DIR ATTEMPT: the lowest training step ATTEMPT logged.
first_step() {
  python3 -c 'import json,sys; print(min(j["step"] for j in map(json.loads, open(sys.argv[1])) if j.get("kind") == "step" and j.get("attempt") == int(sys.argv[2])))' \
    "$1/metrics.jsonl" "$2"
}
# last_attempt DIR ATTEMPT: the job ended in ATTEMPT, whose restart entry says it was a shrink.
last_attempt() {
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); a=int(sys.argv[2]); assert j["attempt"]==a and j["restarts"][-1]["attempt"]==a and j["restarts"][-1]["shrink"], j' \
    "$1/job.json" "$2" || fail "job.json does not end in shrunk attempt $2"
}

# held_run: `run --on-failure shrink` of the job in the background, its
# ranks held after step KILL + 1; RUN_PID.
held_run() {
  "${HELD[@]}" "$BIN" run --nproc 3 --on-failure shrink "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" \
    --run-dir "$WORK/run" >"$WORK/run.out" 2>&1 &
  RUN_PID=$!
  PIDS+=("$RUN_PID")
}
# run_ends_without RANK: the run exits 0, saying the job finished without RANK (ended by SIGKILL).
run_ends_without() {
  wait_exit "$RUN_PID" 300
  [[ $RC -eq 0 ]] || fail "run exited $RC, want 0"
  expect_in "the job finished without rank $1 (signal 9): --on-failure shrink let it go on with fewer ranks" "$WORK/run.out"
}

case "$SCENARIO" in
  kill)
    RANK="$3" DATA="$4"
    # shellcheck disable=SC2046
    start_coordinator 3 "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" $(data_plane "$DATA") --token s3cret --on-failure shrink \
      --run-dir "$WORK/run"
    three_workers
    read -r -a before <<<"$(WAIT_S=60 wait_for formed "$WORK/run" 0 && members "$WORK/run")"
    kill_at_step "$WORK/run" 0 "$KILL" "$RANK"
    restarted "$WORK/run" 1
    survivors=()
    for r in 0 1 2; do (( r == RANK )) || survivors+=("${W[r]}"); done
    all_exit 0 "${survivors[@]}" "$COORD_PID"
    expect_in "the other 2 ranks form attempt 1 now and train on from the state they hold" "$WORK/coordinator.out"
    expect_in "attempt 1 of job 'local' formed with 2 of 3 workers (--on-failure shrink)" "$WORK/coordinator.out"
    # The same processes, in the order of their old ranks: nobody restarted.
    expected=()
    for r in 0 1 2; do (( r == RANK )) || expected+=("${before[r]}"); done
    last_attempt "$WORK/run" 1
    [[ "$(members "$WORK/run")" == "${expected[*]}" ]] ||
      fail "attempt 1's members are $(members "$WORK/run"), want the survivors ${expected[*]}"
    # From the step every rank completed: the one in flight (KILL + 2) is the only one lost.
    FROM=$(( $(first_step "$WORK/run" 1) - 1 ))
    (( FROM == KILL + 1 )) || fail "the survivors went on from step $FROM, want $(( KILL + 1 ))"
    grep -q "going on from step $FROM as rank 0 of 2" "$WORK"/w*.out || fail "no survivor went on from step $FROM"
    "$BIN" analyze "$WORK/run" --no-report >"$WORK/analyze.out" 2>&1 || fail "analyze failed"
    expect_in "the survivors went on in their processes from step $FROM, 0 steps lost; the world size changed from 3 to 2 ranks (--on-failure shrink)" "$WORK/analyze.out"
    # The reference: a plain 3-rank job to step FROM (rank 0, killed, may not
    # have written that checkpoint), then a plain 2-rank job resumed from it.
    mkdir -p "$WORK/ref3" "$WORK/ref"
    # shellcheck disable=SC2046
    "$BIN" run --nproc 3 "${TRAIN[@]}" --steps "$FROM" "${HB[@]}" $(data_plane "$DATA") --run-dir "$WORK/ref3" \
      >"$WORK/ref3.out" 2>&1 || { cat "$WORK/ref3.out"; fail "the 3-rank reference run failed"; }
    # shellcheck disable=SC2046
    "$BIN" run --nproc 2 --min-nproc 2 "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" $(data_plane "$DATA") --resume "$WORK/ref3" \
      --run-dir "$WORK/ref" >"$WORK/ref.out" 2>&1 || { cat "$WORK/ref.out"; fail "the 2-rank reference run failed"; }
    same_checkpoint "$WORK/ref" "$WORK/run" "the job that shrank to 2 ranks in its processes"
    ;;
  twice)
    start_coordinator 3 "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" --token s3cret --on-failure shrink --run-dir "$WORK/run"
    three_workers
    kill_at_step "$WORK/run" 0 "$KILL" 2
    restarted "$WORK/run" 1
    kill_at_step "$WORK/run" 1 40 0
    restarted "$WORK/run" 2
    all_exit 0 "${W[1]}" "$COORD_PID"
    expect_in "attempt 2 of job 'local' formed with 1 of 3 workers (--on-failure shrink)" "$WORK/coordinator.out"
    expect_in "job 'local' succeeded: 1 ranks finished" "$WORK/coordinator.out"
    last_attempt "$WORK/run" 2
    [[ "$(members "$WORK/run")" == "${W[1]}" ]] || fail "attempt 2 is not the last survivor's process"
    ;;
  min)
    start_coordinator 3 "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" --token s3cret --on-failure shrink --min-nproc 3 \
      --run-dir "$WORK/run"
    three_workers
    kill_at_step "$WORK/run" 0 "$KILL" 1
    all_exit 1 "${W[0]}" "${W[2]}" "$COORD_PID"
    expect_in "(--on-failure shrink: 2 ranks left, fewer than --min-nproc 3)" "$WORK/coordinator.out"
    ;;
  run)
    held_run
    kill_at_step "$WORK/run" 0 "$KILL" 2
    run_ends_without 2
    expect_in "the other 2 ranks form attempt 1 now" "$WORK/run/coordinator.log"
    ;;
  hang)
    held_run
    WAIT_S=120 wait_for formed "$WORK/run" 0 || fail "attempt 0 did not form"
    read -r -a pids <<<"$(members "$WORK/run")"
    WAIT_S=120 wait_for all_held 3 $(( KILL + 1 )) || fail "the ranks did not hold after step $(( KILL + 1 ))"
    kill -STOP "${pids[1]}"
    touch "$HOLD_DIR/$(( KILL + 1 )).go"
    run_ends_without 1
    expect_in "rank 1 (host .*) stopped sending heartbeats" "$WORK/run/coordinator.log"
    ;;
  flags)
    for bad in "--ddp sharded:--ddp sharded holds 1/n of it" "--local-sgd 4:--local-sgd leaves the replicas"; do
      out=$("$BIN" run --nproc 2 --on-failure shrink ${bad%%:*} --steps 1 2>&1)
      [[ $? -eq 1 ]] || fail "--on-failure shrink ${bad%%:*}: not refused"
      grep -q "^microddp: error: --on-failure shrink keeps the survivors' state, and ${bad#*:}" <<<"$out" ||
        fail "--on-failure shrink ${bad%%:*}: got '$out'"
    done
    out=$("$BIN" coordinator --world-size 2 --port 0 --on-failure fail --max-restarts 2 2>&1)
    [[ $? -eq 1 ]] || fail "--on-failure fail --max-restarts 2: not refused"
    grep -q "^microddp: error: --on-failure fail and --max-restarts 2 contradict each other" <<<"$out" ||
      fail "--on-failure fail --max-restarts 2: got '$out'"
    ;;
  *)
    fail "unknown scenario $SCENARIO"
    ;;
esac
echo "PASS: $SCENARIO $*"
