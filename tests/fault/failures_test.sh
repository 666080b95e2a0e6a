#!/usr/bin/env bash
# Faults that must end the job with a clear message, never silently, in a
# crash or with a leak (docs/failures.md), each reproduced with real
# processes, one scenario per CTest test:
#   failures_test.sh MICRODDP SCENARIO
# Exit 77 (skipped) where the scenario needs what this machine lacks (the
# Debian dataset, root to mount a tmpfs). Every wait is bounded; every
# process and mount made here is undone on exit.
set -uo pipefail
BIN="$1"
SCENARIO="$2"
WORK="$(mktemp -d)"
PIDS=()
MOUNTS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$WORK"/*.out "$WORK"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }; done; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
expect_in() { grep -q -- "$1" "$2" || fail "expected '$1' in $2"; }
expect_rc() { [[ $RC -eq $1 ]] || fail "$2: exit $RC, want $1"; }

JOB=(--dataset synthetic --synthetic-size 1024 --width 32 --batch 32 --no-eval)
FASHION=/usr/share/datasets/fashion-mnist

source "$(dirname "${BASH_SOURCE[0]}")/../support/wait.sh"  # wait_for, wait_exit
# A tmpfs of SIZE at DIR (root only): skips the scenario where it cannot be mounted.
mount_tmpfs() {
  mkdir -p "$2"
  mount -t tmpfs -o "size=$1" tmpfs "$2" 2>"$WORK/mount.err" || skip "cannot mount a tmpfs ($(cat "$WORK/mount.err")); needs root"
  MOUNTS+=("$2")
}
# Every line of a JSON-lines file is a whole JSON object (no torn record).
all_whole() { /usr/bin/python3 -c '
import json, sys
data = open(sys.argv[1], "rb").read()
assert data == b"" or data.endswith(b"\n"), "the file ends in a torn record"
for n, line in enumerate(data.splitlines(), 1):
    json.loads(line)
' "$1"; }
# Distinct (rank, step) pairs of a metrics.jsonl's step records.
unique_records() { grep '"kind":"step"' "$1" | sed -E 's/.*"rank":([0-9]+),.*"step":([0-9]+),.*/\1 \2/' | sort -u | wc -l; }

case "$SCENARIO" in
  corrupt_dataset)
    # 400 random bytes at offset 5,000,000 of a copy of Fashion-MNIST's
    # training images (the probe's case): gzip -t fails, and so must training.
    [[ -d $FASHION ]] || skip "$FASHION not found (apt-get install dataset-fashion-mnist)"
    cp -r "$FASHION" "$WORK/data"
    /usr/bin/python3 -c '
import random, sys
r = random.Random(1)
with open(sys.argv[1], "r+b") as f:
    f.seek(5_000_000)
    f.write(bytes(r.randrange(256) for _ in range(400)))' "$WORK/data/train-images-idx3-ubyte.gz"
    gzip -t "$WORK/data/train-images-idx3-ubyte.gz" 2>/dev/null && fail "the damage did not break the gzip CRC"
    "$BIN" train --dataset "idx:$WORK/data" --steps 1 --no-eval >"$WORK/train.out" 2>&1; RC=$?
    expect_rc 1 "train on the damaged copy"
    expect_in "microddp: error: $WORK/data/train-images-idx3-ubyte.gz: corrupt file" "$WORK/train.out"
    # The same through `run`: every rank reads the file; the job fails naming it.
    timeout 120 "$BIN" run --nproc 2 --http-port -1 --dataset "idx:$WORK/data" --steps 1 --no-eval >"$WORK/run.out" 2>&1; RC=$?
    expect_rc 1 "run on the damaged copy"
    expect_in "train-images-idx3-ubyte.gz: corrupt file" "$WORK/run.out"
    "$BIN" data verify "$WORK/data" >"$WORK/verify.out" 2>&1; RC=$?
    expect_rc 1 "data verify of the damaged copy"
    expect_in "BAD      train-images-idx3-ubyte" "$WORK/verify.out"
    expect_in "1 of 4 files failed the checks: $WORK/data/train-images-idx3-ubyte.gz" "$WORK/verify.out"
    # A well-formed gzip of altered data (one byte changed, recompressed): only
    # the known SHA-256 sum can tell; the file is named.
    zcat "$FASHION/train-images-idx3-ubyte.gz" >"$WORK/raw"
    printf '\x7f' | dd of="$WORK/raw" bs=1 seek=1000 conv=notrunc status=none
    gzip -n -c "$WORK/raw" >"$WORK/data/train-images-idx3-ubyte.gz"
    "$BIN" train --dataset "idx:$WORK/data" --steps 1 --no-eval >"$WORK/train2.out" 2>&1; RC=$?
    expect_rc 1 "train on the altered copy"
    expect_in "train-images-idx3-ubyte.gz: not the Fashion-MNIST file it should be" "$WORK/train2.out"
    # The installed dataset passes, unpacked or not.
    "$BIN" data verify "$FASHION" >"$WORK/verify.out" 2>&1 || fail "data verify of $FASHION failed"
    expect_in "Fashion-MNIST, all 4 files intact" "$WORK/verify.out"
    ;;

  disk_full)
    # The probe's case: the run directory on a 200 KB tmpfs. The job trains
    # to the end; run does not claim success: it names the metrics records
    # that are not on disk by rank and step (and the checkpoint that did not
    # fit either: exit 1). No file ends in a torn record, and analyze reads
    # what is there.
    mount_tmpfs 200k "$WORK/small"
    STEPS=3000
    timeout 300 "$BIN" run --nproc 2 --http-port -1 "${JOB[@]}" --steps $STEPS --run-dir "$WORK/small/run" >"$WORK/run.out" 2>&1; RC=$?
    [[ $RC -eq 1 || $RC -eq 3 ]] || fail "run on a full disk exited $RC, want 1 (the checkpoint did not fit) or 3"
    grep -q "all 2 ranks finished, metrics in" "$WORK/run.out" && fail "run claimed success"
    expect_in "[0-9]* of $((2 * STEPS)) metrics records are not in $WORK/small/run/metrics.jsonl (No space left on device): rank 0 steps [0-9]*-$STEPS; rank 1 steps [0-9]*-$STEPS" "$WORK/run.out"
    for f in metrics.jsonl train.jsonl; do
      [[ -f "$WORK/small/run/$f" ]] && { all_whole "$WORK/small/run/$f" || fail "$f ends in a torn record"; }
    done
    # Whole records in the file plus the ones named lost are every record.
    LOST=$(grep -o "[0-9]* of [0-9]* metrics records are not in" "$WORK/run.out" | head -1 | cut -d' ' -f1)
    N=$(unique_records "$WORK/small/run/metrics.jsonl")
    [[ $((N + LOST)) -eq $((2 * STEPS)) ]] || fail "$N records in the file + $LOST lost != $((2 * STEPS))"
    # analyze reads every whole record (it exits 1 only when no step has all ranks' records).
    "$BIN" analyze "$WORK/small/run" --no-report >"$WORK/analyze.out" 2>&1; RC=$?
    [[ $RC -eq 0 ]] || expect_in "holds no complete training step" "$WORK/analyze.out"
    grep -q "not a JSON object\|internal" "$WORK/analyze.out" && fail "analyze choked on the file"
    ;;

  disk_full_recovers)
    # Space runs out mid-run and comes back: each record is whole or absent,
    # writing resumes, the missing steps are named exactly, and run exits 3
    # (done, records lost), not 0.
    mount_tmpfs 64m "$WORK/small"  # room for every record (about 30 MB) once the filler is gone
    STEPS=40000
    "$BIN" run --nproc 2 --http-port -1 "${JOB[@]}" --log-every 1000000 --steps $STEPS \
      --run-dir "$WORK/small/run" >"$WORK/run.out" 2>&1 &
    RUN=$!; PIDS+=("$RUN")
    WAIT_S=60 wait_for grep -q '"step"' "$WORK/small/run/metrics.jsonl" 2>/dev/null || fail "no progress"
    # Fill the disk, leave it full for a second of training, free it.
    dd if=/dev/zero of="$WORK/small/filler" bs=4k 2>/dev/null
    full() { [[ $(df --output=avail -k "$WORK/small" | tail -1) -eq 0 ]]; }
    WAIT_S=10 wait_for full || fail "the tmpfs did not fill"
    sleep 1
    kill -0 "$RUN" 2>/dev/null || fail "the run ended before space came back; make STEPS larger"
    rm -f "$WORK/small/filler"
    wait_exit "$RUN" 300
    expect_rc 3 "run after a full disk"
    expect_in "microddp: error: all 2 ranks finished, but records were lost: coordinator: the job succeeded, but [0-9]* of $((2 * STEPS)) metrics records are not in" "$WORK/run.out"
    all_whole "$WORK/small/run/metrics.jsonl" || fail "metrics.jsonl holds a torn record"
    LOST=$(grep -o "[0-9]* of [0-9]* metrics records" "$WORK/run.out" | tail -1 | cut -d' ' -f1)
    N=$(unique_records "$WORK/small/run/metrics.jsonl")
    echo "metrics.jsonl: $N records, $LOST named lost"
    (( LOST > 0 )) || fail "nothing was lost: the disk never filled"
    [[ $((N + LOST)) -eq $((2 * STEPS)) ]] || fail "$N records in the file + $LOST lost != $((2 * STEPS))"
    grep -q "\"step\":$STEPS[,}]" "$WORK/small/run/metrics.jsonl" || fail "writing did not resume after space came back"
    [[ -s "$WORK/small/run/checkpoint.safetensors" ]] || fail "no checkpoint after space came back"
    ;;

  replicas_diverged)
    # A bit flipped on rank 1 (MDDP_LAB_FAULT=flip:RANK:STEP, after the
    # step's update) is named by the replica check on every rank: at the
    # next --check-replicas-every step; by default before the next
    # checkpoint, which is then not written, so a resume starts from replicas
    # that agreed and finishes.
    JOB3=(--dataset synthetic --synthetic-size 1024 --width 32 --batch 30 --no-eval)  # 3 ranks
    MDDP_LAB_FAULT=flip:1:3 timeout 120 "$BIN" run --nproc 3 --http-port -1 "${JOB3[@]}" --steps 20 \
      --check-replicas-every 2 --run-dir "$WORK/every" >"$WORK/every.out" 2>&1; RC=$?
    expect_rc 1 "a flipped bit with --check-replicas-every 2"
    expect_in "microddp: error: .*the replicas diverged by step 4: rank 1 differs from ranks 0, 2 in " "$WORK/every.out"
    for r in 1 2; do expect_in "the replicas diverged by step 4: rank 1 differs" "$WORK/every/worker-$r.log"; done  # rank 0: every.out
    MDDP_LAB_FAULT=flip:1:6 timeout 120 "$BIN" run --nproc 3 --http-port -1 "${JOB3[@]}" --steps 20 \
      --checkpoint-every 5 --run-dir "$WORK/ckpt" >"$WORK/ckpt.out" 2>&1; RC=$?
    expect_rc 1 "a flipped bit before a checkpoint"
    expect_in "the replicas diverged by step 10: rank 1 differs" "$WORK/ckpt.out"
    [[ -s "$WORK/ckpt/checkpoints/step-00000005.safetensors" ]] || fail "no checkpoint of step 5"
    ! compgen -G "$WORK/ckpt/checkpoints/step-00000010.*" >/dev/null || fail "the checkpoint of step 10 was written from replicas that differ"
    timeout 120 "$BIN" run --nproc 3 --http-port -1 "${JOB3[@]}" --steps 20 --checkpoint-every 5 \
      --resume "$WORK/ckpt" --run-dir "$WORK/ckpt" >"$WORK/resume.out" 2>&1 || fail "the resume from step 5 failed"
    expect_in "resuming at step 5 of 20" "$WORK/resume.out"
    ;;

  nan_loss)
    # A diverging run stops at the step its loss turns NaN or inf, exit 1,
    # naming the step: in one process, and in a job where every rank stops.
    "$BIN" train "${JOB[@]}" --optimizer sgd --lr 1e30 --steps 200 >"$WORK/train.out" 2>&1; RC=$?
    expect_rc 1 "train with --lr 1e30"
    expect_in "microddp: error: the training loss is [-a-z]* at step [0-9]*: training diverged" "$WORK/train.out"
    "$BIN" train "${JOB[@]}" --optimizer sgd --lr 1e30 --steps 20 --allow-nonfinite-loss >"$WORK/allow.out" 2>&1 \
      || fail "--allow-nonfinite-loss did not train on"
    "$BIN" train "${JOB[@]}" --lr nan --steps 5 >"$WORK/nan.out" 2>&1; RC=$?
    expect_rc 1 "--lr nan"
    expect_in "microddp: error: --lr: 'nan' is not a finite number" "$WORK/nan.out"
    timeout 120 "$BIN" run --nproc 2 --http-port -1 --heartbeat-ms 200 --heartbeat-timeout-ms 3000 "${JOB[@]}" \
      --optimizer sgd --lr 1e30 --steps 200 --run-dir "$WORK/run" >"$WORK/run.out" 2>&1; RC=$?
    expect_rc 1 "run with --lr 1e30"
    STEP=$(grep -o "training loss is [-a-z]* at step [0-9]*" "$WORK/run.out" | head -1 | grep -o "[0-9]*$")
    [[ -n $STEP ]] || fail "run's output names no step"
    # Every rank stopped with the same verdict: the step, non-zero.
    expect_in "microddp: error: .*training loss is [-a-z]* at step $STEP" "$WORK/run/worker-1.log"
    expect_in "failed: rank [01]" "$WORK/run/coordinator.log"
    ;;

  wrong_port)
    # A worker pointed at the dashboard's HTTP port is told so at once, not
    # after the 60 s connect timeout.
    "$BIN" coordinator --world-size 1 --port 0 --address-file "$WORK/addr" --http-url-file "$WORK/url" \
      "${JOB[@]}" --steps 5 >"$WORK/coordinator.out" 2>&1 &
    PIDS+=("$!")
    WAIT_S=30 wait_for test -s "$WORK/addr" || fail "the coordinator did not start"
    HTTP=$(sed -E 's#http://([^/]*)/#\1#' "$WORK/url")
    "$BIN" worker --coordinator "$HTTP" --connect-timeout-s 60 >"$WORK/worker.out" 2>&1 &
    W=$!; PIDS+=("$W")
    wait_exit "$W" 30
    [[ $RC -ne 124 ]] || fail "the worker still waits 30 s after dialling an HTTP port"
    expect_rc 1 "worker at the dashboard's port"
    expect_in "microddp: error: --coordinator $HTTP is not a microddp coordinator: an HTTP/1 server" "$WORK/worker.out"
    ;;

  no_token)
    # No token at all is not a "wrong token": the worker is told how to give one.
    "$BIN" coordinator --world-size 1 --port 0 --http-port -1 --address-file "$WORK/addr" --token sekrit \
      "${JOB[@]}" --steps 5 >"$WORK/coordinator.out" 2>&1 &
    PIDS+=("$!")
    WAIT_S=30 wait_for test -s "$WORK/addr" || fail "the coordinator did not start"
    env -u MDDP_TOKEN "$BIN" worker --coordinator "$(cat "$WORK/addr")" >"$WORK/worker.out" 2>&1; RC=$?
    expect_rc 1 "worker without a token"
    expect_in "no token given, and this job needs one: give the worker the coordinator's token with --token-file" "$WORK/worker.out"
    "$BIN" worker --coordinator "$(cat "$WORK/addr")" --token wrong >"$WORK/wrong.out" 2>&1; RC=$?
    expect_rc 1 "worker with a wrong token"
    expect_in "wrong token" "$WORK/wrong.out"
    ;;

  run_tempdir)
    # run's private directory (the 0600 token) goes on every way out, with
    # or without --run-dir; the ones of dead runs are removed at start.
    export TMPDIR="$WORK/tmp"
    mkdir -p "$TMPDIR"
    left() { compgen -G "$TMPDIR/microddp-run-*" >/dev/null; }
    "$BIN" run --nproc 2 --http-port -1 "${JOB[@]}" --steps 5 >"$WORK/ok.out" 2>&1 || fail "a short run failed"
    left && fail "success left $(ls -d "$TMPDIR"/microddp-run-*)"
    "$BIN" run --nproc 2 --http-port -1 "${JOB[@]}" --steps 5 --run-dir "$WORK/run" >"$WORK/ok2.out" 2>&1 || fail "a run with --run-dir failed"
    left && fail "success with --run-dir left $(ls -d "$TMPDIR"/microddp-run-*)"
    # A worker killed mid-run (the job fails), then Ctrl-C and SIGTERM of run.
    for how in worker SIGINT SIGTERM; do
      "$BIN" run --nproc 2 --http-port -1 --heartbeat-ms 200 --heartbeat-timeout-ms 2000 "${JOB[@]}" \
        --steps 10000000 --log-every 1000000 --run-dir "$WORK/run-$how" >"$WORK/$how.out" 2>&1 &
      RUN=$!; PIDS+=("$RUN")
      WAIT_S=60 wait_for test -s "$WORK/run-$how/metrics.jsonl" || fail "$how: no progress"
      left || fail "$how: no private directory while running"
      [[ $(stat -c %a "$TMPDIR"/microddp-run-*/token) == 600 ]] || fail "$how: the token file is not 0600"
      if [[ $how == worker ]]; then
        kill -9 "$(pgrep -P "$RUN" | while read -r p; do tr '\0' '\n' <"/proc/$p/environ" | grep -qx RANK=1 && echo "$p"; done)"
      else
        kill -"${how#SIG}" "$RUN"
      fi
      wait_exit "$RUN" 60
      [[ $RC -ne 0 && $RC -ne 124 ]] || fail "$how: run exited $RC"
      left && fail "$how: left $(ls -d "$TMPDIR"/microddp-run-*)"
    done
    # Stale ones: a dead process's is removed at the next start, a live one's kept.
    sleep 0 & DEAD=$!; wait "$DEAD"
    mkdir -p "$TMPDIR/microddp-run-$DEAD-abcdef" "$TMPDIR/microddp-run-$$-ghijkl"
    echo secret >"$TMPDIR/microddp-run-$DEAD-abcdef/token"
    "$BIN" run --nproc 1 --http-port -1 "${JOB[@]}" --steps 1 >"$WORK/stale.out" 2>&1 || fail "a short run failed"
    [[ -e "$TMPDIR/microddp-run-$DEAD-abcdef" ]] && fail "the dead run's directory is still there"
    [[ -d "$TMPDIR/microddp-run-$$-ghijkl" ]] || fail "a live process's directory was removed"
    ;;

  *) fail "unknown scenario $SCENARIO" ;;
esac
echo "PASS: $SCENARIO"
