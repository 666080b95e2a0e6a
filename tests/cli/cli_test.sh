#!/usr/bin/env bash
# Process-level tests of the microddp binary, one scenario per CTest test:
#   cli_test.sh MICRODDP SCENARIO
# Each scenario runs real commands and checks exit codes, output and files.
set -uo pipefail
BIN="$1"
SCENARIO="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect_in() { grep -q -- "$1" "$2" || { echo "--- output:"; cat "$2"; fail "expected '$1'"; }; }

case "$SCENARIO" in
  help)
    "$BIN" --help >"$WORK/out" 2>&1 || fail "--help exited non-zero"
    for cmd in train bench demo verify; do expect_in "$cmd" "$WORK/out"; done
    "$BIN" train --help >"$WORK/out" 2>&1 || fail "train --help"
    expect_in "--batch" "$WORK/out"
    ;;
  bad_flags)
    # Unknown flag, unknown dataset, impossible batch: a clear one-line error and a non-zero exit.
    "$BIN" train --no-such-flag >"$WORK/out" 2>&1 && fail "unknown flag accepted"
    expect_in "no-such-flag" "$WORK/out"
    "$BIN" train --dataset nope --steps 1 >"$WORK/out" 2>&1 && fail "unknown dataset accepted"
    expect_in "unknown dataset 'nope'" "$WORK/out"
    "$BIN" train --dataset synthetic --batch 0 --steps 1 >"$WORK/out" 2>&1 && fail "batch 0 accepted"
    expect_in "--batch" "$WORK/out"
    "$BIN" train --device cuda:0 --steps 1 --dataset synthetic >"$WORK/out" 2>&1 && fail "cuda accepted without a GPU"
    expect_in "cuda" "$WORK/out"
    ;;
  train_run_dir)
    # A short run writes its log and a readable checkpoint; same seed, same bytes.
    for i in 1 2; do
      "$BIN" train --dataset synthetic --synthetic-size 512 --width 32 --steps 40 --optimizer sgd --lr 0.1 \
        --run-dir "$WORK/run$i" >"$WORK/out$i" 2>&1 || { cat "$WORK/out$i"; fail "train run $i failed"; }
    done
    expect_in "test accuracy" "$WORK/out1"
    [[ -s "$WORK/run1/checkpoint.safetensors" ]] || fail "no checkpoint"
    [[ $(grep -c '"step"' "$WORK/run1/train.jsonl") -ge 2 ]] || fail "train.jsonl has too few records"
    cmp -s "$WORK/run1/checkpoint.safetensors" "$WORK/run2/checkpoint.safetensors" || fail "same seed gave different checkpoints"
    ;;
  verify)
    "$BIN" verify --nproc 2 --steps 4 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "verify failed"; }
    [[ $(grep -c " OK$" "$WORK/out") -eq 3 ]] || { cat "$WORK/out"; fail "expected 3 OK rows"; }
    ;;
  demos)
    "$BIN" demo manual --steps 5 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "demo manual"; }
    expect_in "OK: two half-batch replicas" "$WORK/out"
    "$BIN" demo hooks --nproc 2 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "demo hooks"; }
    expect_in "bucket 0 launched" "$WORK/out"
    expect_in "grad ready   #33" "$WORK/out"
    ;;
  bench_train)
    "$BIN" bench train --nproc 2 --width 64 --batch 32 --warmup 1 --iters 2 --json "$WORK/b.json" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "bench train"; }
    expect_in "samples/s" "$WORK/out"
    grep -q '"samples_per_s"' "$WORK/b.json" || fail "no samples_per_s in the JSON"
    ;;
  *) fail "unknown scenario $SCENARIO" ;;
esac
echo "PASS: $SCENARIO"
