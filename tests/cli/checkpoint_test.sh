#!/usr/bin/env bash
# Checkpoints and resume through the microddp binary, one scenario per CTest test:
#   checkpoint_test.sh MICRODDP SCENARIO
#
#   resume_single                   `train`: N steps straight == N/2, stop, --resume, N/2 more
#   resume_naive|hooked|bucketed|sharded  the same through `run` on 2 ranks (and 3 for bucketed, sharded)
#   periodic                        --checkpoint-every / --keep-checkpoints, resume from the newest
#   refused                         corrupt, truncated, foreign, torn and mismatched checkpoints,
#                                   bad --init-from: one line naming the file, exit 1
#   damaged                         a flipped bit in a weight or an optimiser state: refused by
#                                   tensor, or skipped with a warning for an older pair
#   coordinator_resume              `coordinator --resume` checks before any worker joins
#   run_console                     `run` shows the coordinator's warnings on its console
#
# "Bitwise" is checked with cmp on both files of the final checkpoint: the
# checkpoint id is a hash of the contents, so equal files mean equal weights,
# optimiser state, step and metadata.
set -uo pipefail
BIN="$1"
SCENARIO="$2"
source "$(dirname "${BASH_SOURCE[0]}")/../support/scenario.sh"
# must_fail LABEL CMD...: exits 1 with one "microddp: error:" line
must_fail() {
  local label="$1"
  shift
  "$@" >"$WORK/out" 2>&1
  local rc=$?
  [[ $rc -eq 1 ]] || { cat "$WORK/out"; fail "$label: exit $rc, want 1"; }
  [[ $(grep -c "^microddp: error: " "$WORK/out") -eq 1 ]] || { cat "$WORK/out"; fail "$label: want one error line"; }
}

MLP=(--dataset synthetic --synthetic-size 384 --width 24 --depth 2)
CNN=(--dataset fashion-mnist --model cnn --channels 2 4 --hidden 8)
SGD=(--optimizer sgd --lr 0.05 --momentum 0.9)
ADAM=(--optimizer adam --lr 0.002)
COMMON=(--batch 12 --accumulate 2 --no-eval --log-every 4 --seed 3)

source "$(dirname "${BASH_SOURCE[0]}")/../support/same_checkpoint.sh"  # same_checkpoint

# resume_case LABEL LAUNCH... -- FLAGS...: 8 steps straight vs 4 + resume 4
resume_case() {
  local label="$1"
  shift
  local launch=()
  while [[ $1 != -- ]]; do launch+=("$1"); shift; done
  shift
  local d="$WORK/$RANDOM$RANDOM"
  "${launch[@]}" "$@" --steps 8 --run-dir "$d/straight" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "$label: straight run"; }
  "${launch[@]}" "$@" --steps 4 --run-dir "$d/half" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "$label: first half"; }
  "${launch[@]}" "$@" --steps 8 --run-dir "$d/half" --resume "$d/half" >"$WORK/out" 2>&1 \
    || { cat "$WORK/out"; fail "$label: resumed run"; }
  expect_in "resuming at step 4 of 8" "$WORK/out"
  same_checkpoint "$d/straight" "$d/half" "$label"
  rm -rf "$d"
}

resume_matrix() {  # resume_matrix LAUNCH...: MLP and CNN, SGD and Adam
  for model in MLP CNN; do
    for opt in SGD ADAM; do
      local -n m=$model o=$opt
      resume_case "$* $model $opt" "$@" -- "${m[@]}" "${o[@]}" "${COMMON[@]}"
    done
  done
}

case "$SCENARIO" in
  resume_single)
    resume_matrix "$BIN" train
    ;;
  resume_naive | resume_hooked | resume_bucketed | resume_sharded)
    mode=${SCENARIO#resume_}
    resume_matrix "$BIN" run --nproc 2 --http-port -1 --ddp "$mode" --bucket-mb 0.004 --first-bucket-mb 0.002
    if [[ $mode == bucketed || $mode == sharded ]]; then  # sharded: 3 uneven shards, the state gathered from 3 ranks
      resume_case "run --nproc 3 $mode MLP ADAM" "$BIN" run --nproc 3 --http-port -1 --ddp "$mode" --bucket-mb 0.004 \
        -- "${MLP[@]}" "${ADAM[@]}" "${COMMON[@]}"
    fi
    ;;
  periodic)
    # Every 2 steps, the newest 2 kept, and the final pair.
    "$BIN" train "${MLP[@]}" "${ADAM[@]}" "${COMMON[@]}" --steps 9 --checkpoint-every 2 --keep-checkpoints 2 \
      --run-dir "$WORK/run" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "train"; }
    (cd "$WORK/run/checkpoints" && ls) >"$WORK/ls"
    [[ "$(cat "$WORK/ls" | tr '\n' ' ')" == "step-00000006.safetensors step-00000006.state.safetensors step-00000008.safetensors step-00000008.state.safetensors " ]] \
      || { cat "$WORK/ls"; fail "want the pairs of steps 6 and 8"; }
    [[ -s "$WORK/run/checkpoint.safetensors" && -s "$WORK/run/checkpoint.state.safetensors" ]] || fail "no final pair"
    # A crash between the final pair's two renames: its state file is newer than its model file.
    # Resuming from the directory passes over that torn pair and takes the newest whole one (step 8).
    cp "$WORK/run/checkpoints/step-00000006.state.safetensors" "$WORK/run/checkpoint.state.safetensors"
    "$BIN" train "${MLP[@]}" "${ADAM[@]}" "${COMMON[@]}" --steps 9 --resume "$WORK/run" --run-dir "$WORK/run" \
      >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "resume from the directory"; }
    expect_in "resuming at step 8 of 9" "$WORK/out"
    # Without --run-dir there is nowhere to write them.
    must_fail "no run dir" "$BIN" train "${MLP[@]}" --steps 2 --checkpoint-every 1
    expect_in "give --run-dir" "$WORK/out"
    ;;
  refused)
    "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 4 --run-dir "$WORK/run" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "train"; }
    ck="$WORK/run/checkpoint.safetensors"
    # Another job: every differing flag is listed.
    must_fail "other job" "$BIN" train "${MLP[@]}" --optimizer sgd --lr 0.1 --momentum 0.9 --batch 16 --accumulate 2 \
      --no-eval --seed 3 --steps 8 --resume "$ck"
    expect_in "cannot resume from '$ck': it was written by a different job (--batch 12 there, 16 here; --lr 0.05 there, 0.1 here)" "$WORK/out"
    must_fail "other world size" "$BIN" run --nproc 2 --http-port -1 "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$ck"
    expect_in "--nproc 1 there, 2 here" "$WORK/out"
    must_fail "nothing left" "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 4 --resume "$ck"
    expect_in "nothing is left to do" "$WORK/out"
    # Damaged files, each named with what is wrong.
    cp -r "$WORK/run" "$WORK/t" && truncate -s -100 "$WORK/t/checkpoint.safetensors"
    must_fail "truncated" "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/t/checkpoint.safetensors"
    expect_in "'$WORK/t/checkpoint.safetensors' is not a valid safetensors file: .*truncated" "$WORK/out"
    cp -r "$WORK/run" "$WORK/c" && printf 'garbage!' | dd of="$WORK/c/checkpoint.state.safetensors" bs=1 seek=0 conv=notrunc 2>/dev/null
    must_fail "corrupt" "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/c/checkpoint.safetensors"
    expect_in "'$WORK/c/checkpoint.state.safetensors' is not a valid safetensors file" "$WORK/out"
    cp -r "$WORK/run" "$WORK/m" && rm "$WORK/m/checkpoint.state.safetensors"
    must_fail "no state file" "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/m/checkpoint.safetensors"
    expect_in "its state file '$WORK/m/checkpoint.state.safetensors' is missing" "$WORK/out"
    must_fail "no pair in dir" "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/m"
    expect_in "no complete checkpoint in it" "$WORK/out"
    echo "not a checkpoint at all" >"$WORK/foreign.safetensors"
    must_fail "foreign" "$BIN" train "${MLP[@]}" --steps 8 --resume "$WORK/foreign.safetensors"
    expect_in "'$WORK/foreign.safetensors' is not a valid safetensors file" "$WORK/out"
    must_fail "missing" "$BIN" train "${MLP[@]}" --steps 8 --resume "$WORK/nowhere"
    expect_in "--resume $WORK/nowhere: no such file or directory" "$WORK/out"
    # --init-from: weights of another shape, or with --resume.
    must_fail "init shape" "$BIN" train --dataset synthetic --synthetic-size 384 --width 32 --steps 1 --init-from "$ck"
    expect_in "--init-from '$ck': tensor '1.weight' has shape \[24, 24\], the model expects \[32, 32\]" "$WORK/out"
    must_fail "init and resume" "$BIN" train "${MLP[@]}" --steps 8 --init-from "$ck" --resume "$ck"
    expect_in "not both" "$WORK/out"
    must_fail "init garbage" "$BIN" run --nproc 2 --http-port -1 "${MLP[@]}" --steps 1 --init-from "$WORK/foreign.safetensors"
    expect_in "foreign.safetensors' is not a valid safetensors file" "$WORK/out"
    ;;
  damaged)
    # One flipped bit in a weight or an optimiser state fails its tensor's
    # checksum: refused naming the file and the tensor by --resume FILE and
    # --init-from; --resume DIR warns about each damaged pair it skips and
    # resumes the newest sound one. A file without checksums (written before
    # they existed) still loads, silently.
    damage="$(dirname "${BASH_SOURCE[0]}")/../support/damage_safetensors.py"
    "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 4 --checkpoint-every 2 --keep-checkpoints 0 \
      --run-dir "$WORK/run" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "train"; }
    cp -r "$WORK/run" "$WORK/w" && python3 "$damage" flip "$WORK/w/checkpoint.safetensors" 1.weight >/dev/null
    must_fail "damaged weight" "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/w/checkpoint.safetensors"
    expect_in "'$WORK/w/checkpoint.safetensors' is damaged: tensor '1.weight' does not match" "$WORK/out"
    must_fail "damaged init" "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 2 --init-from "$WORK/w/checkpoint.safetensors"
    expect_in "'$WORK/w/checkpoint.safetensors' is damaged: tensor '1.weight'" "$WORK/out"
    cp -r "$WORK/run" "$WORK/s" && state=$(python3 "$damage" flip "$WORK/s/checkpoint.state.safetensors")
    must_fail "damaged state" "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/s/checkpoint.safetensors"
    expect_in "'$WORK/s/checkpoint.state.safetensors' is damaged: tensor '$state' does not match" "$WORK/out"
    # Both pairs of step 4 damaged (the final one's weights, the periodic one's state): step 2 it is.
    python3 "$damage" flip "$WORK/w/checkpoints/step-00000004.state.safetensors" >/dev/null
    "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/w" --run-dir "$WORK/w2" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "resume from a directory with damaged pairs"; }
    expect_in "warning: --resume $WORK/w: skipping $WORK/w/checkpoint.safetensors: .* is damaged: tensor '1.weight'" "$WORK/out"
    expect_in "warning: --resume $WORK/w: skipping $WORK/w/checkpoints/step-00000004.safetensors: .*step-00000004.state.safetensors' is damaged" "$WORK/out"
    expect_in "resuming at step 2 of 8" "$WORK/out"
    # Checksums stripped: the pair loads as before, without a word about them.
    cp -r "$WORK/run" "$WORK/old" && rm -r "$WORK/old/checkpoints"
    for f in "$WORK/old/checkpoint.safetensors" "$WORK/old/checkpoint.state.safetensors"; do python3 "$damage" strip "$f"; done
    "$BIN" train "${MLP[@]}" "${SGD[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/old" --run-dir "$WORK/old2" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "resume from a checkpoint without checksums"; }
    expect_in "resuming at step 4 of 8" "$WORK/out"
    ! grep -q "warning" "$WORK/out" || { cat "$WORK/out"; fail "a checkpoint without checksums warned"; }
    ;;
  coordinator_resume)
    "$BIN" run --nproc 2 --http-port -1 "${MLP[@]}" "${ADAM[@]}" "${COMMON[@]}" --steps 4 --run-dir "$WORK/run" \
      >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "run"; }
    # The coordinator refuses a mismatch before any worker joins ...
    must_fail "coordinator mismatch" timeout 20 "$BIN" coordinator --world-size 3 --port 0 --http-port -1 \
      "${MLP[@]}" "${ADAM[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/run"
    expect_in "--nproc 2 there, 3 here" "$WORK/out"
    # ... and announces the pair it resolved the directory to.
    timeout 60 "$BIN" coordinator --world-size 2 --port 0 --http-port -1 --address-file "$WORK/addr" \
      "${MLP[@]}" "${ADAM[@]}" "${COMMON[@]}" --steps 8 --resume "$WORK/run" --run-dir "$WORK/run" >"$WORK/coord" 2>&1 &
    coord=$!
    for _ in $(seq 100); do [[ -s "$WORK/addr" ]] && break; sleep 0.1; done
    [[ -s "$WORK/addr" ]] || { cat "$WORK/coord"; fail "the coordinator did not start"; }
    for r in 0 1; do
      RANK=$r timeout 60 "$BIN" worker --coordinator "$(cat "$WORK/addr")" >"$WORK/w$r" 2>&1 &
    done
    wait "$coord" || { cat "$WORK/coord" "$WORK/w0" "$WORK/w1"; fail "the resumed job failed"; }
    wait
    expect_in "resuming from $WORK/run/checkpoint.safetensors at step 4" "$WORK/coord"
    expect_in "resuming at step 4 of 8" "$WORK/w0"
    "$BIN" run --nproc 2 --http-port -1 "${MLP[@]}" "${ADAM[@]}" "${COMMON[@]}" --steps 8 --run-dir "$WORK/straight" \
      >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "straight run"; }
    same_checkpoint "$WORK/straight" "$WORK/run" "coordinator --resume"
    ;;
  run_console)
    # More compute threads than CPUs: the coordinator warns, and run's console shows it.
    "$BIN" run --nproc 2 --threads "$(nproc)" --http-port -1 "${MLP[@]}" --steps 2 >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "run"; }
    expect_in "\[coordinator\] warning: .*oversubscribed" "$WORK/out"
    ;;
  *)
    fail "unknown scenario $SCENARIO"
    ;;
esac
echo "OK: $SCENARIO"
