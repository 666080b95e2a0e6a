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
#   shrink_test.sh MICRODDP heal RANK DATA   --on-failure heal: as kill, then with the 2 survivors held
#                                            after step 41 a new worker joins: the job grows back to 3
#                                            ranks (the newcomer last), which take the state from the
#                                            survivors' memory, and ends byte for byte where a 3-rank
#                                            job resumed on 2 ranks, then on 3, at the same steps ends.
#   shrink_test.sh MICRODDP heal_run         `run --on-failure heal --max-restarts 1`: a worker
#                                            killed is started again, heals, and all 3 finish.
#   shrink_test.sh MICRODDP replay           --on-failure heal, three kills (after steps 21, 41 and 61)
#                                            and two newcomers (after 31 and 51): `run --replay` of its membership log
#                                            ends byte for byte where the job ended; a replay with
#                                            another job's flags is refused.
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
[[ $SCENARIO =~ ^(twice|heal|heal_run)$ ]] && HOLD_AT_STEPS+=",41"  # its second kill, or the heal
[[ $SCENARIO == replay ]] && HOLD_AT_STEPS+=",31,41,51,61"  # kills after 21, 41, 61; heals after 31, 51
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
# last_attempt DIR ATTEMPT [HOW]: the job ended in ATTEMPT, whose restart entry says it was a
# HOW (shrink, or grow).
last_attempt() {
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); a=int(sys.argv[2]); assert j["attempt"]==a and j["restarts"][-1]["attempt"]==a and j["restarts"][-1][sys.argv[3]], j' \
    "$1/job.json" "$2" "${3:-shrink}" || fail "job.json does not end in attempt $2, a ${3:-shrink}"
}

# held_run [FLAGS...]: `run --on-failure shrink` (or FLAGS) of the job in the background, its
# ranks held after step KILL + 1; RUN_PID.
held_run() {
  (( $# )) || set -- --on-failure shrink
  "${HELD[@]}" "$BIN" run --nproc 3 "$@" "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" \
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

# grow_while_held STEP ATTEMPT LOG CMD...: with the 2 survivors held after STEP,
# CMD starts a newcomer; once LOG (the coordinator's) says that ATTEMPT forms
# (the survivors hear it while held), they are let go and re-join. Held ranks
# take no step, so the grow lands at STEP however fast the survivors or slow
# the newcomer's start: left free, survivors that reached their next hold (or
# the end) before the newcomer joined would hear of ATTEMPT only once let go,
# and ATTEMPT would form without them.
grow_while_held() {
  local step="$1" attempt="$2" log="$3"
  shift 3
  WAIT_S=120 wait_for all_held 2 "$step" || fail "the survivors did not hold after step $step"
  HEAL_AT=$(now_ms)
  "$@"
  WAIT_S=60 wait_for grep -q "attempt $attempt forms now" "$log" || fail "no newcomer made the job grow"
  touch "$HOLD_DIR/$step.go"
}
# newcomer NAME RANK: a worker that asks for RANK (it gets the last).
newcomer() { RANK="$2" held start_worker "$1" --token s3cret; }

# kill_one POLICY: a coordinator (--on-failure POLICY, over DATA) and 3 workers;
# rank RANK killed -9 after step KILL + 1, and attempt 1's first step; before: the pids.
kill_one() {
  # shellcheck disable=SC2046
  start_coordinator 3 "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" $(data_plane "$DATA") --token s3cret --on-failure "$1" \
    --run-dir "$WORK/run"
  three_workers
  read -r -a before <<<"$(WAIT_S=60 wait_for formed "$WORK/run" 0 && members "$WORK/run")"
  kill_at_step "$WORK/run" 0 "$KILL" "$RANK"
  restarted "$WORK/run" 1
}

case "$SCENARIO" in
  kill)
    RANK="$3" DATA="$4"
    kill_one shrink
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
  heal)
    RANK="$3" DATA="$4"
    kill_one heal
    grow_while_held 41 2 "$WORK/coordinator.out" newcomer newcomer "$RANK"
    restarted "$WORK/run" 2
    echo "heal time: $(( $(now_ms) - HEAL_AT )) ms from the newcomer's start to the first step of attempt 2"
    survivors=()
    for r in 0 1 2; do (( r == RANK )) || survivors+=("${W[r]}"); done
    all_exit 0 "${survivors[@]}" "$W_PID" "$COORD_PID"
    expect_in "attempt 2 forms now with the 2 ranks and 1 newcomer, which take the state from them" "$WORK/coordinator.out"
    last_attempt "$WORK/run" 2 grow
    [[ "$(members "$WORK/run")" == "${survivors[*]} $W_PID" ]] ||
      fail "attempt 2's members are $(members "$WORK/run"), want the survivors ${survivors[*]} and the newcomer $W_PID"
    F1=$(( $(first_step "$WORK/run" 1) - 1 )) F2=$(( $(first_step "$WORK/run" 2) - 1 ))
    (( F1 == KILL + 1 && F2 >= 41 && F2 <= 42 )) || fail "the shrink went on from step $F1 and the grow from $F2"
    "$BIN" analyze "$WORK/run" --no-report >"$WORK/analyze.out" 2>&1 || fail "analyze failed"
    expect_in "from step $F2, 0 steps lost; the world size changed from 2 to 3 ranks (--on-failure heal: the newcomers took the state from live ranks)" "$WORK/analyze.out"
    # The reference: 3 plain ranks to F1, 2 resumed from there to F2, 3 resumed from there to the end.
    leg=0 from=""
    for nproc_to in "3:$F1" "2:$F2" "3:$STEPS"; do
      leg=$(( leg + 1 ))
      # shellcheck disable=SC2046
      "$BIN" run --nproc "${nproc_to%%:*}" --min-nproc 2 "${TRAIN[@]}" --steps "${nproc_to#*:}" "${HB[@]}" $(data_plane "$DATA") \
        ${from:+--resume "$from"} --run-dir "$WORK/ref$leg" >"$WORK/ref$leg.out" 2>&1 ||
        { cat "$WORK/ref$leg.out"; fail "reference leg $leg ($nproc_to) failed"; }
      from="$WORK/ref$leg"
    done
    same_checkpoint "$WORK/ref3" "$WORK/run" "the job that shrank to 2 ranks and healed back to 3"
    ;;
  heal_run)
    held_run --on-failure heal --max-restarts 1
    kill_at_step "$WORK/run" 0 "$KILL" 2
    grow_while_held 41 2 "$WORK/run/coordinator.log" :  # run starts the newcomer
    wait_exit "$RUN_PID" 300
    [[ $RC -eq 0 ]] || fail "run exited $RC, want 0"
    expect_in "rank 2 died (signal 9); starting it again" "$WORK/run.out"
    expect_in "all 3 ranks finished" "$WORK/run.out"
    expect_in "1 newcomer, which take the state from them" "$WORK/run/coordinator.log"
    last_attempt "$WORK/run" 2 grow
    ;;
  replay)
    start_coordinator 3 "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" --token s3cret --on-failure heal --run-dir "$WORK/run"
    three_workers
    kill_at_step "$WORK/run" 0 "$KILL" 1
    grow_while_held 31 2 "$WORK/coordinator.out" newcomer newcomer1 1
    kill_at_step "$WORK/run" 2 40 2
    grow_while_held 51 4 "$WORK/coordinator.out" newcomer newcomer2 2
    kill_at_step "$WORK/run" 4 60 0
    WAIT_S=300 wait_for grep -q "job 'local' succeeded" "$WORK/coordinator.out" || fail "the job did not finish"
    wait_exit "$COORD_PID" 60
    python3 - "$WORK/run/membership.jsonl" <<'PY' || fail "membership.jsonl is not three kills and two heals"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
print("membership:", [(j["attempt"], j["from_step"], j["how"], j["world_size"]) for j in lines])
# An attempt that took no step (the grow came first) has no line: count who left and joined.
left = sum(len(j["left"]) for j in lines)
joined = sum(len(j["joined"]) for j in lines[1:])
assert lines[0]["how"] == "start" and len(lines[0]["joined"]) == 3, lines[0]
assert (left, joined, lines[-1]["world_size"]) == (3, 2, 2), (left, joined, lines[-1])
PY
    "$BIN" run --on-failure heal "${TRAIN[@]}" --steps "$STEPS" "${HB[@]}" --replay "$WORK/run" --run-dir "$WORK/replay" \
      >"$WORK/replay.out" 2>&1 || { cat "$WORK/replay.out"; fail "the replay failed"; }
    expect_in "microddp run --replay: leg [0-9] of [0-9]: steps .* to the end on 2 ranks" "$WORK/replay.out"
    same_checkpoint "$WORK/replay" "$WORK/run" "the replay of three kills and two heals"
    # Another job's flags: refused, naming the difference.
    out=$("$BIN" run --on-failure heal "${TRAIN[@]}" --weight-decay 0.5 --steps "$STEPS" --replay "$WORK/run" \
      --run-dir "$WORK/replay2" 2>&1)
    [[ $? -eq 1 ]] || fail "a replay with another --weight-decay was not refused"
    grep -q "^microddp: error: --replay: this job is not the one in .*optim.weight_decay" <<<"$out" ||
      fail "the refusal does not name the flag: '$out'"
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
