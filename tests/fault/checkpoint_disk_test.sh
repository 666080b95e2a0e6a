#!/usr/bin/env bash
# A checkpoint write that fails leaves the earlier checkpoints whole and no
# temporary file, and the job stops with one line naming the file:
#   full_disk   the run directory on a small tmpfs fills up mid-run (`run`, 2 ranks)
#   read_only   the checkpoints directory is a read-only mount when a resumed run writes
# Needs root to mount (CI runs as root); skips (exit 77) otherwise. The same
# failure without root, by the file size limit: tests/unit/checkpoint_test.cc.
#   checkpoint_disk_test.sh MICRODDP SCENARIO
set -uo pipefail
BIN="$1"
SCENARIO="$2"
skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root to mount a small tmpfs (CI runs it as root)"
source "$(dirname "${BASH_SOURCE[0]}")/../support/scenario.sh"
MNT="$WORK/mnt"
mkdir -p "$MNT"
cleanup() {
  umount "$MNT/checkpoints" 2>/dev/null
  umount "$MNT" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
mount -t tmpfs -o size=64k tmpfs "$MNT" 2>/dev/null || skip "cannot mount a tmpfs here"

# Model file 5.8 KB, state file 11.5 KB (Adam: two tensors per weight).
FLAGS=(--dataset synthetic --synthetic-size 384 --width 24 --optimizer adam --batch 12 --no-eval --log-every 1 --seed 3)
no_temp_files() {
  local left
  left=$(find "$MNT" -name '*.tmp.*')
  [[ -z $left ]] || fail "temporary files left behind: $left"
}
# The pair of `step` in $MNT/checkpoints is whole: a run ("${LAUNCH[@]}") resumes from it.
resumable() {
  "${LAUNCH[@]}" "${FLAGS[@]}" --steps 20 --resume "$MNT/checkpoints/step-0000000$1.safetensors" \
    --run-dir "$WORK/resumed$1" >"$WORK/resume.out" 2>&1 || { cat "$WORK/resume.out"; fail "the step-$1 pair does not resume"; }
  expect_in "resuming at step $1 of 20" "$WORK/resume.out"
}

case "$SCENARIO" in
  full_disk)
    # Every pair kept (20 KB each in pages): the 64 KB tmpfs fills at the third.
    LAUNCH=("$BIN" run --nproc 2 --http-port -1)
    "${LAUNCH[@]}" "${FLAGS[@]}" --steps 20 --checkpoint-every 1 --keep-checkpoints 0 \
      --run-dir "$MNT" >"$WORK/out" 2>&1 && fail "the run succeeded on a full disk"
    expect_in "^microddp: error: .*cannot write the checkpoint of step [0-9]* ($MNT/checkpoints/step-0000000[0-9].safetensors): .*No space left on device; the checkpoints written before are intact" "$WORK/out"
    no_temp_files
    last=$(ls "$MNT/checkpoints" | grep -c 'state.safetensors$')
    [[ $last -ge 1 ]] || fail "no checkpoint was written before the disk filled"
    resumable "$last"
    ;;
  read_only)
    LAUNCH=("$BIN" train)
    mount -o remount,size=256k "$MNT" || fail "cannot grow the tmpfs"
    "$BIN" train "${FLAGS[@]}" --steps 2 --checkpoint-every 1 --run-dir "$MNT" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "first run"; }
    sums=$(cd "$MNT/checkpoints" && sha256sum *)
    mount --bind "$MNT/checkpoints" "$MNT/checkpoints" && mount -o remount,ro,bind "$MNT/checkpoints" \
      || skip "cannot make a read-only bind mount here"
    "$BIN" train "${FLAGS[@]}" --steps 6 --checkpoint-every 1 --resume "$MNT" --run-dir "$MNT" >"$WORK/out" 2>&1 \
      && fail "the run succeeded with a read-only checkpoints directory"
    expect_in "resuming at step 2 of 6" "$WORK/out"
    expect_in "^microddp: error: cannot write the checkpoint of step 3 ($MNT/checkpoints/step-00000003.safetensors): .*Read-only file system" "$WORK/out"
    [[ "$(cd "$MNT/checkpoints" && sha256sum *)" == "$sums" ]] || fail "the earlier checkpoints changed"
    no_temp_files
    resumable 2
    ;;
  *)
    fail "unknown scenario $SCENARIO"
    ;;
esac
grep "^microddp: error" "$WORK/out"
echo "OK: $SCENARIO"
