#!/usr/bin/env bash
# deploy/slurm/microddp.sbatch run as sbatch would, with a fake `srun` that
# starts its tasks as local processes with srun's per-task variables
# (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID; block distribution over the
# nodes of SLURM_JOB_NODELIST). The two "nodes" are 127.0.0.1 and 127.0.0.2
# (both loopback), written in SLURM's compressed syntax, so the workers must
# expand the list to find the coordinator on the first node.
#   slurm_test.sh MICRODDP SBATCH_SCRIPT batch|world_mismatch
#     batch           the job trains and finishes: exit 0, 4 ranks' records, the coordinator's success line
#     world_mismatch  workers under srun with SLURM_NTASKS=3 join a job of --world-size 2: each says so in one line
set -uo pipefail
BIN="$(realpath "$1")"
SBATCH="$(realpath "$2")"
SCENARIO="$3"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mkdir -p "$WORK/bin"
cat >"$WORK/bin/srun" <<'SRUN'
#!/usr/bin/env bash
# fake srun: options are ignored; SLURM_NTASKS tasks of the command, SLURM_NTASKS_PER_NODE per node.
while [[ ${1:-} == -* ]]; do shift; done
pids=()
for ((r = 0; r < SLURM_NTASKS; r++)); do
  SLURM_PROCID=$r SLURM_LOCALID=$((r % SLURM_NTASKS_PER_NODE)) SLURM_NODEID=$((r / SLURM_NTASKS_PER_NODE)) \
    "$@" >"$SLURM_SUBMIT_DIR/task-$r.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
exit "$status"
SRUN
chmod +x "$WORK/bin/srun"
PORT="$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

case "$SCENARIO" in
  batch)
    # What sbatch --nodes=2 --ntasks-per-node=2 sets for the batch script.
    (cd "$WORK" && env PATH="$WORK/bin:$PATH" MICRODDP="$BIN" MDDP_PORT="$PORT" SLURM_JOB_ID=4242 \
      SLURM_SUBMIT_DIR="$WORK" SLURM_JOB_NODELIST="127.0.0.[1-2]" SLURM_NNODES=2 SLURM_NTASKS=4 \
      SLURM_NTASKS_PER_NODE=2 timeout 150 bash "$SBATCH" "${JOB[@]}" --steps 12 >"$WORK/sbatch.out" 2>&1)
    rc=$?
    run="$WORK/microddp-4242"
    cp "$run/coordinator.log" "$WORK/coordinator.log" 2>/dev/null
    [[ $rc -eq 0 ]] || fail "the batch script exited $rc"
    expect_in "job 'local' succeeded: 4 ranks finished" "$run/coordinator.log"
    for r in 0 1 2 3; do
      expect_in "SLURM task $r (local $((r % 2))) of 4 on 2 node(s)" "$WORK/task-$r.log"
      expect_in "joining job 'local' at 127.0.0.1:$PORT" "$WORK/task-$r.log"
      grep -q "\"rank\":$r," "$run/metrics.jsonl" || fail "no metrics record of rank $r in $run/metrics.jsonl"
    done
    [[ $(stat -c %a "$run/token") == 600 ]] || fail "the token file is not mode 600"
    ;;
  world_mismatch)
    start_coordinator 2 "${JOB[@]}" --steps 5 "${HB[@]}"
    for r in 0 1; do
      SLURM_PROCID=$r SLURM_NTASKS=3 SLURM_JOB_NODELIST="127.0.0.[1-3]" \
        start_worker "w$r" --connect-timeout-s 20
      eval "W$r=\$W_PID"
    done
    for r in 0 1; do
      eval "pid=\$W$r"
      wait_exit "$pid" 60
      [[ $RC -eq 1 ]] || fail "worker $r exited $RC, not 1"
      expect_in "microddp: error: srun started 3 tasks (SLURM_NTASKS) but the job at .* has --world-size 2" \
        "$WORK/w$r.out"
    done
    ;;
  *) fail "unknown scenario $SCENARIO" ;;
esac
echo "PASS slurm $SCENARIO"
