# shellcheck shell=bash
# What the restart scripts share (restart_test.sh, elastic_test.sh), sourced
# after lib.sh: where an attempt of a job in a run directory is (its steps in
# metrics.jsonl, its checkpoints, its members in job.json), a kill -9 that
# lands at a given checkpoint, and the time from it to the next attempt's
# first step.

# top_step DIR ATTEMPT: the highest training step logged by ATTEMPT (0: none yet).
top_step() {
  python3 - "$1/metrics.jsonl" "$2" <<'PY' 2>/dev/null || echo 0
import json, sys
top = 0
for line in open(sys.argv[1]):
    try: j = json.loads(line)
    except ValueError: continue
    if j.get("kind") == "step" and j.get("attempt", 0) == int(sys.argv[2]):
        top = max(top, j["step"])
print(top)
PY
}
past() { (( $(top_step "$1" "$2") >= $3 )); }
# checkpointed DIR STEP: rank 0 wrote the checkpoint of STEP (written at
# once, unlike the metrics, which arrive in batches; --keep-checkpoints 0
# keeps them all).
checkpointed() { [[ -e "$(printf '%s/checkpoints/step-%08d.safetensors' "$1" "$2")" ]]; }
# formed DIR ATTEMPT: ATTEMPT formed (job.json lists its members).
formed() {
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j["attempt"]==int(sys.argv[2]) and j["members"]))' \
    "$1/job.json" "$2" 2>/dev/null
}
# members DIR: the pids of the current attempt's ranks, in rank order.
members() { python3 -c 'import json,sys; print(*[m["pid"] for m in json.load(open(sys.argv[1]))["members"]])' "$1/job.json"; }

# held CMD...: CMD with the hold seam of worker/test_hold.h on: its ranks
# hold after each step in HOLD_AT_STEPS (which the scripts set: each kill's
# STEP + 1) until the test lets them go on, so that each kill lands at its
# step however fast or loaded the machine is. The runs nobody kills (the
# references) go without it, or they would hold for good.
HOLD_DIR="$WORK/hold"
mkdir -p "$HOLD_DIR"
# held is a function, for start_worker; a process started with & whose pid
# the test needs starts as "${HELD[@]}" CMD: env execs CMD, so $! is its pid.
# The scripts set HOLD_AT_STEPS before they source this file.
held() { MDDP_TEST_HOLD_DIR="$HOLD_DIR" MDDP_TEST_HOLD_AT_STEPS="$HOLD_AT_STEPS" "$@"; }
HELD=(env "MDDP_TEST_HOLD_DIR=$HOLD_DIR" "MDDP_TEST_HOLD_AT_STEPS=$HOLD_AT_STEPS")
# all_held N STEP: ranks 0..N-1 all hold after STEP.
all_held() {
  local r
  for (( r = 0; r < $1; ++r )); do [[ -e "$HOLD_DIR/$2.held.$r" ]] || return 1; done
}
# kill_at_step DIR ATTEMPT STEP RANK: once every rank of ATTEMPT holds after
# STEP + 1 (so rank 0 has written STEP's checkpoint), kill -9 RANK and let
# the others go on; KILLED_AT: when.
kill_at_step() {
  local dir="$1" attempt="$2" step="$3" rank="$4" pids
  WAIT_S=120 wait_for formed "$dir" "$attempt" || fail "attempt $attempt did not form"
  read -r -a pids <<<"$(members "$dir")"
  WAIT_S=120 wait_for all_held "${#pids[@]}" $(( step + 1 )) ||
    fail "attempt $attempt did not hold after step $(( step + 1 )) (is it in HOLD_AT_STEPS, and was the run started with held?)"
  checkpointed "$dir" "$step" || fail "attempt $attempt is past step $step without its checkpoint"
  KILLED_AT=$(now_ms)
  kill -9 "${pids[rank]}" || fail "rank $rank (pid ${pids[rank]}) was not running at step $step of attempt $attempt"
  touch "$HOLD_DIR/$(( step + 1 )).go"
  echo "killed rank $rank (pid ${pids[rank]}) in attempt $attempt at step $(( step + 1 ))"
}
# restarted DIR ATTEMPT: waits for ATTEMPT's first step in metrics.jsonl and
# prints the time since the kill (an upper bound: metrics arrive in batches).
restarted() {
  WAIT_S=120 wait_for past "$1" "$2" 1 || fail "attempt $2 took no step"
  echo "restart time: $(( $(now_ms) - KILLED_AT )) ms from the kill to the first step of attempt $2"
}
kill_at() { kill_at_step "$@"; restarted "$1" $(( $2 + 1 )); }
# all_exit WANT PID...: each PID (workers first, then their coordinator)
# exits with status WANT, in bounded time.
all_exit() {
  local want="$1" p
  shift
  for p in "$@"; do
    wait_exit "$p" 300
    [[ $RC -eq $want ]] || fail "process $p exited $RC, want $want (the logs follow)"
  done
}
