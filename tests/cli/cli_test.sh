#!/usr/bin/env bash
# Process-level tests of the microddp binary, one scenario per CTest test:
#   cli_test.sh MICRODDP SCENARIO
# Each scenario runs real commands and checks exit codes, output and files.
set -uo pipefail
BIN="$1"
SCENARIO="$2"
source "$(dirname "${BASH_SOURCE[0]}")/../support/scenario.sh"

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
    # A GPU the machine lacks: refused at once, on every machine (cuda:99), and
    # cuda:0 too where no GPU exists (with one, cuda:0 trains: tests/gpu).
    "$BIN" train --device cuda:99 --steps 1 --dataset synthetic >"$WORK/out" 2>&1 && fail "cuda:99 accepted"
    expect_in "--device cuda:99" "$WORK/out"
    if ! compgen -G "/dev/nvidia[0-9]*" >/dev/null; then
      "$BIN" train --device cuda:0 --steps 1 --dataset synthetic >"$WORK/out" 2>&1 && fail "cuda accepted without a GPU"
      grep -Eq -- "--device cuda:0: (no CUDA GPU|this microddp was built without CUDA)" "$WORK/out" \
        || { cat "$WORK/out"; fail "no clear error for cuda:0 without a GPU"; }
      "$BIN" bench allreduce --backend nccl --nproc 2 >"$WORK/out" 2>&1 && fail "nccl bench ran without a GPU"
      expect_in "NCCL needs a CUDA GPU" "$WORK/out"
    fi
    # Two ranks on one named GPU: NCCL cannot, so run and bench train refuse
    # before starting anything, with the fix, on every machine.
    for cmd in "run --http-port -1" "bench train"; do
      timeout 20 "$BIN" $cmd --nproc 2 --device cuda:0 --steps 1 >"$WORK/out" 2>&1 && fail "$cmd: 2 ranks on cuda:0 accepted"
      expect_in "puts all 2 ranks on one GPU.*use --device cuda" "$WORK/out"
    done
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
    [[ $(grep -c " OK$" "$WORK/out") -eq 4 ]] || { cat "$WORK/out"; fail "expected 4 OK rows"; }
    grep -q "^sharded .* OK$" "$WORK/out" || { cat "$WORK/out"; fail "no sharded (ZeRO-1) row"; }
    # 16-bit gradients on the wire, on 3 ranks (uneven shards): every mode,
    # the sharded one reduce-scattering them, matches one process.
    for c in fp16 bf16; do
      "$BIN" verify --nproc 3 --batch 36 --steps 4 --compress "$c" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "verify --compress $c failed"; }
      expect_in "gradients sent as $c" "$WORK/out"
      [[ $(grep -c " OK$" "$WORK/out") -eq 4 ]] || { cat "$WORK/out"; fail "verify --compress $c: expected 4 OK rows"; }
      grep -q "^sharded .* OK$" "$WORK/out" || { cat "$WORK/out"; fail "verify --compress $c: no sharded row"; }
    done
    # A batch the ranks share unevenly (32 over 3: 11, 11, 10) still trains the
    # one process's model, every mode within fp32's bound.
    "$BIN" verify --nproc 3 --batch 32 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "verify --nproc 3 --batch 32 failed"; }
    expect_in "global batch 32 on 3 ranks" "$WORK/out"
    [[ $(grep -c " OK$" "$WORK/out") -eq 4 ]] || { cat "$WORK/out"; fail "verify --batch 32 over 3 ranks: expected 4 OK rows"; }
    ;;
  gpt)
    # --model gpt through the binary: it trains on synthetic tokens (the loss
    # falls, tokens/s on the progress line and in train.jsonl), trains on 2
    # worker processes (metrics.jsonl carries the tokens), and verify passes
    # every DDP mode.
    GPT=(--model gpt --layers 2 --embd 32 --block 16 --batch 16 --synthetic-size 512)
    "$BIN" train "${GPT[@]}" --steps 40 --lr 1e-2 --log-every 10 --run-dir "$WORK/train" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "train --model gpt failed"; }
    expect_in "tokens/s" "$WORK/out"
    python3 -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1]) if "\"step\"" in x]; assert l[-1]["loss"] < l[0]["loss"] - 1, l; assert l[-1]["tokens_per_s"] > 0' \
      "$WORK/train/train.jsonl" || { cat "$WORK/train/train.jsonl"; fail "the GPT's loss did not fall"; }
    "$BIN" run --nproc 2 --http-port -1 "${GPT[@]}" --steps 10 --run-dir "$WORK/run" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "run --model gpt failed"; }
    expect_in '"tokens_per_s"' "$WORK/run/metrics.jsonl"
    "$BIN" analyze "$WORK/run" --no-report >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "analyze of the GPT run failed"; }
    expect_in "tokens: [0-9]* tokens/s" "$WORK/out"
    "$BIN" verify --nproc 2 --model gpt --layers 2 --embd 16 --block 8 --steps 4 >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "verify --model gpt failed"; }
    [[ $(grep -c " OK$" "$WORK/out") -eq 4 ]] || { cat "$WORK/out"; fail "expected 4 OK rows"; }
    # Resumed from a periodic checkpoint, a sharded GPT with dropout, warm-up
    # and clipping ends bitwise as the run that was not interrupted.
    source "$(dirname "${BASH_SOURCE[0]}")/../support/same_checkpoint.sh"
    R=("${GPT[@]}" --dropout 0.1 --warmup-steps 2 --no-eval --http-port -1 --nproc 2 --ddp sharded --steps 8)
    "$BIN" run "${R[@]}" --checkpoint-every 4 --keep-checkpoints 0 --run-dir "$WORK/straight" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "run --model gpt --ddp sharded failed"; }
    "$BIN" run "${R[@]}" --resume "$WORK/straight/checkpoints/step-00000004.safetensors" --run-dir "$WORK/resumed" \
      >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "the GPT's resume failed"; }
    same_checkpoint "$WORK/straight" "$WORK/resumed" "gpt sharded resume"
    ;;
  demos)
    "$BIN" demo manual --steps 5 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "demo manual"; }
    expect_in "OK: two half-batch replicas" "$WORK/out"
    "$BIN" demo hooks --nproc 2 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "demo hooks"; }
    expect_in "bucket 0 launched" "$WORK/out"
    expect_in "grad ready   #33" "$WORK/out"
    # the GPT's tied embedding fires twice: first after the head, last after the embedding lookup
    "$BIN" demo hooks --nproc 2 --model gpt --layers 1 --embd 16 --heads 2 --block 8 >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "demo hooks --model gpt"; }
    grep "grad ready" "$WORK/out" | head -1 | grep -q "transformer.wte.weight .*contribution 1 of 2" \
      || { cat "$WORK/out"; fail "the tied weight's first contribution is not backward's first"; }
    grep "grad ready" "$WORK/out" | tail -1 | grep -q "transformer.wte.weight .*contribution 2 of 2" \
      || { cat "$WORK/out"; fail "the tied weight's second contribution is not backward's last"; }
    # demo collectives checks every value against the one worked out by hand (non-zero exit when one is wrong);
    # recursive doubling on 3 ranks folds rank 1 into rank 0
    "$BIN" demo collectives --nproc 3 --algo doubling >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "demo collectives --algo doubling"; }
    expect_in "all_reduce(sum, doubling)" "$WORK/out"
    ;;
  bench_train)
    "$BIN" bench train --nproc 2 --width 64 --batch 32 --warmup 1 --iters 2 --json "$WORK/b.json" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "bench train"; }
    expect_in "samples/s" "$WORK/out"
    grep -q '"samples_per_s"' "$WORK/b.json" || fail "no samples_per_s in the JSON"
    # AdamW's two states: 8 bytes per parameter on every rank, and ZeRO-1 keeps half on each of 2
    for mode in bucketed sharded; do
      "$BIN" bench train --nproc 2 --model gpt --layers 1 --embd 16 --heads 2 --block 8 --batch 4 --warmup 0 \
        --iters 1 --optimizer adamw --ddp $mode --json "$WORK/$mode.json" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "bench train --ddp $mode"; }
    done
    expect_in "optimiser state per rank (MB), of" "$WORK/out"
    python3 - "$WORK/bucketed.json" "$WORK/sharded.json" <<'PY' || fail "optimiser state per rank"
import json, sys
full, zero = (json.load(open(f)) for f in sys.argv[1:])
whole = 8 * full["parameters"] / 2**20
assert all(abs(r["optimizer_state_mb"] - whole) < 1e-9 for r in full["ranks"]), (whole, full["ranks"])
for r in zero["ranks"]:  # half, plus at most a few padding elements per bucket
    assert whole / 2 <= r["optimizer_state_mb"] < whole / 2 + 1e-3, (whole, r)
PY
    ;;
  compress)
    # --compress: bad spellings and impossible combinations are one clear line;
    # top-k and PowerSGD jobs of 2 real ranks train, and `analyze` reports the
    # ratio achieved (top-k at 10 %: (4 bytes x n) / (8 bytes x n/10) = 5x).
    for bad in topk:0 topk:2 powersgd:0 gzip; do
      "$BIN" run --nproc 2 --http-port -1 --compress "$bad" >"$WORK/out" 2>&1 && fail "--compress $bad accepted"
      expect_in "error: --compress: '$bad'" "$WORK/out"
    done
    "$BIN" run --nproc 2 --http-port -1 --compress powersgd:2 --device cuda >"$WORK/out" 2>&1 && fail "powersgd on cuda accepted"
    expect_in "runs on the CPU backend only" "$WORK/out"
    "$BIN" run --nproc 2 --http-port -1 --compress topk:0.1 --local-sgd 2 >"$WORK/out" 2>&1 && fail "topk with local SGD accepted"
    expect_in "has nothing to compress with --local-sgd" "$WORK/out"
    for c in topk:0.1 powersgd:2; do
      "$BIN" run --nproc 2 --http-port -1 --dataset synthetic --width 64 --batch 32 --steps 30 --compress "$c" \
        --run-dir "$WORK/$c" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "run --compress $c failed"; }
      "$BIN" analyze "$WORK/$c" --no-report >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "analyze $c failed"; }
      expect_in "compress $c" "$WORK/out"
      expect_in "compression: .* (ratio [0-9.]*x)" "$WORK/out"
    done
    "$BIN" analyze "$WORK/topk:0.1" --no-report >"$WORK/out" 2>&1
    expect_in "ratio 5.0x" "$WORK/out"
    # The collective and the round crossed the coordinator's wire into the log.
    expect_in '"op":"all_gather"' "$WORK/topk:0.1/metrics.jsonl"
    expect_in '"round":1' "$WORK/powersgd:2/metrics.jsonl"
    ;;
  uneven)
    # Uneven inputs with real processes: 98 samples, global batch 12, kept
    # last step of 2 samples over 3 ranks (1, 1, 0: rank 2 has none and takes
    # part with a zero contribution). verify: the one process's model; run:
    # the job finishes, every sample is trained once per epoch, and the step
    # count and the option travel into the checkpoint.
    U=(--dataset synthetic --synthetic-size 98 --width 32 --batch 12 --last-batch keep)
    "$BIN" verify --nproc 3 "${U[@]}" --steps 10 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "verify --last-batch keep failed"; }
    expect_in "last step of each epoch: 2 samples, shared 1, 1, 0 (--last-batch keep)" "$WORK/out"
    [[ $(grep -c " OK$" "$WORK/out") -eq 4 ]] || { cat "$WORK/out"; fail "verify --last-batch keep: expected 4 OK rows"; }
    "$BIN" run --nproc 3 --http-port -1 "${U[@]}" --epochs 2 --no-eval --run-dir "$WORK/keep" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "run --last-batch keep failed"; }
    python3 - "$WORK/keep/metrics.jsonl" <<'PY' || fail "metrics.jsonl: the epochs did not see every sample once"
import json, sys
samples = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    if j.get("kind") == "step": samples[(j["step"], j["rank"])] = j.get("samples", 0)  # 0 is left out
assert sorted({s for s, _ in samples}) == list(range(1, 19)), "9 steps an epoch, 2 epochs"
for epoch in (0, 1):
    assert sum(n for (s, _), n in samples.items() if (s - 1) // 9 == epoch) == 98, epoch
assert [samples[(9, r)] for r in range(3)] == [1, 1, 0], [samples[(9, r)] for r in range(3)]
assert [samples[(8, r)] for r in range(3)] == [4, 4, 4]
PY
    "$BIN" run --nproc 3 --http-port -1 "${U[@]/keep/drop}" --epochs 3 --no-eval --resume "$WORK/keep" >"$WORK/out" 2>&1 \
      && fail "a --last-batch keep checkpoint resumed with drop"
    expect_in "--last-batch keep there, drop here" "$WORK/out"
    ;;
  sharded)
    # --ddp sharded (ZeRO-1) as real worker processes: what it cannot be
    # combined with (top-k: fp16/bf16 are checked by `verify`) is one clear line; a job trains, checkpoints (the state
    # gathered from both ranks), resumes, and its spans cross the
    # coordinator's wire as reduce-scatters and all-gathers that `analyze`
    # counts as the buckets' all-reduces.
    "$BIN" run --nproc 2 --http-port -1 --ddp sharded --compress topk:0.1 >"$WORK/out" 2>&1 && fail "sharded with top-k accepted"
    expect_in "--compress topk:0.1 sends something else and is not supported with it" "$WORK/out"
    "$BIN" run --nproc 2 --http-port -1 --dataset synthetic --width 64 --batch 32 --steps 20 --optimizer adam \
      --ddp sharded --checkpoint-every 10 --run-dir "$WORK/sharded" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "run --ddp sharded failed"; }
    expect_in '"op":"reduce_scatter"' "$WORK/sharded/metrics.jsonl"
    expect_in '"op":"all_gather"' "$WORK/sharded/metrics.jsonl"
    "$BIN" analyze "$WORK/sharded" --json --no-report >"$WORK/a.json" 2>&1 || { cat "$WORK/a.json"; fail "analyze sharded failed"; }
    python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert a["config"]["ddp"] == "sharded", a["config"]; assert a["allreduces"], "no bucket all-reduces"' "$WORK/a.json" \
      || { cat "$WORK/a.json"; fail "analyze: no sharded buckets"; }
    "$BIN" run --nproc 2 --http-port -1 --dataset synthetic --width 64 --batch 32 --steps 30 --optimizer adam \
      --ddp bucketed --resume "$WORK/sharded" --run-dir "$WORK/resumed" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "bucketed resume of a sharded checkpoint failed"; }
    expect_in "resuming at step 20" "$WORK/out"
    ;;
  analyze)
    # A real 2-rank job with a planted straggler (rank 1 sleeps 15 ms in backward: well above
    # what a loaded 2-core machine adds to a rank at random), then `analyze`
    # on its run directory: the table, the straggler named with its phase, --json, the HTML report
    # (uPlot inlined), the prediction from a planted fit, and clear errors on bad input.
    "$BIN" run --nproc 2 --dataset synthetic --width 64 --batch 32 --steps 60 --straggler 1:backward:15 \
      --run-dir "$WORK/run" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "run failed"; }
    # One host: the buckets are in shared memory and auto runs the direct all-reduce, predicted with its own fit.
    echo '{"fits": [{"transport": "shm", "algorithm": "ring", "world_size": 2, "alpha_us": 2.0, "beta_gbps": 10.0, "r2": 1.0},
      {"transport": "shm", "algorithm": "direct", "world_size": 2, "alpha_us": 1.0, "beta_gbps": 12.0, "r2": 1.0},
      {"transport": "tcp", "algorithm": "ring", "world_size": 2, "alpha_us": 12.0, "beta_gbps": 2.9, "r2": 1.0}]}' >"$WORK/fits.json"
    "$BIN" analyze "$WORK/run" --fit "$WORK/fits.json" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "analyze failed"; }
    for s in "2 ranks" "exposed comm" "total comm" "overlap" "busbw GB/s" "predicted total comm" "fit: shm direct" \
             "algorithm auto ran direct" "report: " "worst: rank 1, backward" "rank 1 was late in"; do
      expect_in "$s" "$WORK/out"
    done
    grep -Eq "^verdict: ((compute|communication|memory|input)-bound|oversubscribed)" "$WORK/out" || { cat "$WORK/out"; fail "no verdict"; }
    # The workers reported their threads and CPUs (job.json), so the host is judged.
    expect_in "compute threads vs the CPUs" "$WORK/out"
    expect_in "uPlot" "$WORK/run/report.html"
    expect_in 'id="data"' "$WORK/run/report.html"
    grep -q "<script src=\|<link " "$WORK/run/report.html" && fail "the report loads something from outside"
    "$BIN" analyze "$WORK/run" --json --no-report --fit "$WORK/fits.json" >"$WORK/a.json" 2>"$WORK/err" \
      || { cat "$WORK/err"; fail "analyze --json failed"; }
    for s in '"verdict"' '"kind": "' '"world_size": 2' '"allreduces"' '"predicted_ms": [0-9]' '"stragglers"' \
             '"oversubscribed": \(true\|false\)' '"by_shares": "'; do
      grep -q -- "$s" "$WORK/a.json" || { head -c 3000 "$WORK/a.json"; fail "no $s in the JSON"; }
    done
    "$BIN" analyze "$WORK/run" --no-report --report "$WORK/r.html" --fit "$WORK/fits.json" >/dev/null 2>&1
    [[ -e "$WORK/r.html" ]] && fail "--no-report wrote a report"
    "$BIN" analyze "$WORK/run" --report "$WORK/r.html" --fit "$WORK/fits.json" >/dev/null 2>&1 || fail "--report PATH"
    [[ -s "$WORK/r.html" ]] || fail "--report PATH wrote nothing"
    # Bad input: no run directory, no log, a corrupted line (named by its number).
    mkdir -p "$WORK/empty"
    "$BIN" analyze "$WORK/empty" >"$WORK/out" 2>&1 && fail "an empty directory was analysed"
    expect_in "no metrics.jsonl" "$WORK/out"
    mkdir -p "$WORK/bad" && head -3 "$WORK/run/metrics.jsonl" >"$WORK/bad/metrics.jsonl" && echo '{"rank": 0, "ste' >>"$WORK/bad/metrics.jsonl"
    "$BIN" analyze "$WORK/bad" >"$WORK/out" 2>&1 && fail "a corrupted log was analysed"
    expect_in "metrics.jsonl:4" "$WORK/out"
    ;;
  model)
    # microddp model: the alpha-beta arithmetic against hand-computed values.
    # ring 2(n-1)(a + S/(n b)) = 6 (0.1 ms + 25e6 B / 1.25e9 B/s) = 120.6 ms
    "$BIN" model --bytes 100000000 --world-size 4 --bandwidth-gbps 10 --latency-ms 0.1 >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "model"; }
    expect_in " 120.600 " "$WORK/out"
    # --params is fp32 (4 bytes each); tree 4 (0.1 + 80) = 320.4 ms; naive 6 (0.1 + 80) = 480.6 ms;
    # doubling 2 (0.1 + 80) = 160.2 ms; direct 2 x 0.1 + 1.5 x 80 = 120.2 ms;
    # 400 ms of compute split over 4 ranks, no overlap: 100 + 120.6 = 220.6 ms, speedup 400 / 220.6 = 1.81
    for algo in ring tree naive doubling direct; do
      "$BIN" model --params 25000000 --world-size 4 --algorithm $algo --compute-ms 400 --json >"$WORK/$algo.json" 2>&1 \
        || { cat "$WORK/$algo.json"; fail "model --json ($algo)"; }
    done
    /usr/bin/python3 - "$WORK" <<'PY' || fail "model --json arithmetic"
import json, sys
w = sys.argv[1]
want = {"ring": 120.6, "tree": 320.4, "naive": 480.6, "doubling": 160.2, "direct": 120.2}
for algo, ms in want.items():
    row = json.load(open(f"{w}/{algo}.json"))["rows"][0]
    assert abs(row["allreduce_ms"] - ms) < 1e-6, (algo, row["allreduce_ms"])
ring = json.load(open(f"{w}/ring.json"))["rows"][0]
assert abs(ring["no_overlap"]["step_ms"] - 220.6) < 1e-6, ring
assert abs(ring["no_overlap"]["speedup"] - 400 / 220.6) < 1e-9, ring
assert abs(ring["no_overlap"]["efficiency"] - 400 / 220.6 / 4) < 1e-9, ring
assert abs(ring["busbw_gbps"] - 1e8 / 0.1206 * 1.5 * 1e-9) < 1e-9, ring
PY
    # Overlap and weak scaling, 25M parameters, 400 ms at n = 1, 4 ranks (ring 120.6 ms):
    # strong with overlap: 100/3 + 120.6 = 153.933 ms, exposed 53.933 ms, speedup 400 / 153.933;
    # weak: 400 + 120.6 = 520.6 ms without overlap, speedup 4 x 400 / 520.6; with it 400 ms, 4.
    "$BIN" model --params 25000000 --world-size 4 --compute-ms 400 --json >"$WORK/strong.json" 2>&1 \
      || { cat "$WORK/strong.json"; fail "model --json (strong)"; }
    "$BIN" model --params 25000000 --world-size 4 --compute-ms 400 --scaling weak --json >"$WORK/weak.json" 2>&1 \
      || { cat "$WORK/weak.json"; fail "model --json (weak)"; }
    /usr/bin/python3 - "$WORK" <<'PY' || fail "model overlap / weak arithmetic"
import json, sys
w = sys.argv[1]
near = lambda got, want, tol=1e-9: abs(got - want) < tol or sys.exit(f"got {got}, want {want}")
strong = json.load(open(f"{w}/strong.json"))["rows"][0]
near(strong["overlap"]["step_ms"], 100 / 3 + 120.6)
near(strong["overlap"]["overhead"], (120.6 - 200 / 3) / (100 / 3 + 120.6))
near(strong["overlap"]["speedup"], 400 / (100 / 3 + 120.6))
near(strong["overlap"]["efficiency"], 400 / (100 / 3 + 120.6) / 4)
weak = json.load(open(f"{w}/weak.json"))["rows"][0]
near(weak["compute_ms"], 400)
near(weak["no_overlap"]["step_ms"], 520.6)
near(weak["no_overlap"]["speedup"], 4 * 400 / 520.6)
near(weak["no_overlap"]["efficiency"], 400 / 520.6)
near(weak["overlap"]["step_ms"], 400); near(weak["overlap"]["efficiency"], 1.0)
PY
    # Bad input: one clear line, non-zero exit.
    "$BIN" model --bytes 1000 --params 10 >"$WORK/out" 2>&1 && fail "--bytes with --params accepted"
    expect_in "not both" "$WORK/out"
    "$BIN" model --bytes 1000 --world-size 4,2 >"$WORK/out" 2>&1 && fail "decreasing --world-size accepted"
    expect_in "increasing" "$WORK/out"
    "$BIN" model --bytes 1000 --world-size 0 >"$WORK/out" 2>&1 && fail "--world-size 0 accepted"
    "$BIN" model --bytes 1000 --algorithm butterfly >"$WORK/out" 2>&1 && fail "unknown algorithm accepted"
    expect_in "butterfly" "$WORK/out"
    "$BIN" model --bytes 1000 --bandwidth-gbps 0 >"$WORK/out" 2>&1 && fail "zero bandwidth accepted"
    expect_in "bandwidth" "$WORK/out"
    "$BIN" model --bytes 1000 --fit --fit-file "$WORK/none.json" >"$WORK/out" 2>&1 && fail "--fit without a fit accepted"
    expect_in "bench allreduce --fit" "$WORK/out"
    echo "not json" >"$WORK/bad.json"
    "$BIN" model --bytes 1000 --fit --fit-file "$WORK/bad.json" >"$WORK/out" 2>&1 && fail "a bad fit file accepted"
    expect_in "$WORK/bad.json" "$WORK/out"
    ;;
  bench_fit)
    # bench allreduce --fit on a tiny sweep: every algorithm and transport fitted and stored,
    # then read back by model --fit.
    "$BIN" bench allreduce --fit --nproc 2 -b 4K -e 4M -f 8 --fit-rounds 3 --fit-budget-s 0.01 \
      --fit-out "$WORK/fit.json" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "bench allreduce --fit"; }
    # Every one of the 9 series (tcp, shm x ring, tree, naive, doubling; shm direct) is fitted and stored, or says why
    # not (timings too noisy on a loaded machine: no timing is asserted here).
    SAVED=$(sed -n 's/^# saved \([0-9]*\) fits.*/\1/p' "$WORK/out")
    UNFIT=$(grep -cE '^ +[a-z]+ +[a-z]+ +[0-9]+ +not fitted: ' "$WORK/out")  # rows of the fit table
    [[ -n "$SAVED" && $((SAVED + UNFIT)) -eq 9 ]] || { cat "$WORK/out"; fail "want 9 series fitted or explained"; }
    grep -qE '^ +shm +direct +2 ' "$WORK/out" || { cat "$WORK/out"; fail "no shm direct series"; }
    RING=$(/usr/bin/python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["fits"]; n=int(sys.argv[2])
assert len(f) == n and all(x["beta_gbps"] > 0 for x in f), f
print(next(x["transport"] for x in f if x["algorithm"] == "ring"))' "$WORK/fit.json" "$SAVED") || fail "fit file"
    "$BIN" model --params 1000000 --world-size 2 --fit --fit-file "$WORK/fit.json" --transport "$RING" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "model --fit"; }
    expect_in "fit $RING/ring n=2" "$WORK/out"
    "$BIN" bench allreduce --fit --nproc 1 --fit-out "$WORK/f1.json" >"$WORK/out" 2>&1 && fail "--fit on one rank accepted"
    expect_in "at least 2 ranks" "$WORK/out"
    ;;
  scale)
    # microddp scale with tiny steps: both regimes at n = 1, 2; JSON and the uPlot page.
    "$BIN" scale --world-sizes 1,2 --steps 4 --skip 1 --batch 32 --rank-batch 16 --out "$WORK/s" \
      --dataset synthetic --synthetic-size 256 --width 32 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "scale"; }
    expect_in "weak scaling (fixed per-rank batch)" "$WORK/out"
    /usr/bin/python3 - "$WORK/s/scale.json" <<'PY' || fail "scale.json"
import json, sys
d = json.load(open(sys.argv[1]))
for mode in ("strong", "weak"):
    rows = d[mode]
    assert [r["world_size"] for r in rows] == [1, 2], rows
    assert abs(rows[0]["speedup"] - 1) < 1e-9 and rows[1]["samples_per_s"] > 0, rows
    assert abs(rows[1]["efficiency"] - rows[1]["speedup"] / 2) < 1e-9, rows
assert [r["per_rank_batch"] for r in d["strong"]] == [32, 16] and [r["per_rank_batch"] for r in d["weak"]] == [16, 16]
PY
    grep -q "uPlot" "$WORK/s/scale.html" || fail "scale.html does not embed uPlot"
    "$BIN" scale --world-sizes 2,1 --out "$WORK/s2" >"$WORK/out" 2>&1 && fail "decreasing --world-sizes accepted"
    expect_in "increasing" "$WORK/out"
    "$BIN" scale --world-sizes 1 --nproc 2 --out "$WORK/s3" >"$WORK/out" 2>&1 && fail "--nproc accepted by scale"
    expect_in "set by" "$WORK/out"
    ;;
  demo_ring)
    # The real ring's steps, as its observer saw them: 4 ranks, 12 elements
    # (rank r holds r*12 + i + 1), both transports.
    for transport in shm tcp; do
      "$BIN" demo ring --nproc 4 --elements 12 --transport $transport >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "demo ring ($transport)"; }
      expect_in "4 ranks over $transport: 4 blocks, 2(n-1) = 6 steps" "$WORK/out"
      [[ $(grep -c "^reduce-scatter step" "$WORK/out") -eq 3 && $(grep -c "^all-gather step" "$WORK/out") -eq 3 ]] \
        || { cat "$WORK/out"; fail "expected 3 + 3 steps"; }
      # step 0: rank 0 sends block 3 to its right neighbour and adds rank 3's block 2: [7 8 9] + [43 44 45]
      expect_in "rank 0: sent block 3 to rank 1, received block 2 from rank 3 (.*) -> block 2 = \[50 52 54\]" "$WORK/out"
      expect_in "rank 3: \[76 80 84\] \[88 92 96\] \[100 104 108\] \[112 116 120\]" "$WORK/out"
      expect_in "OK: every rank holds the element-wise sum" "$WORK/out"
    done
    "$BIN" demo ring --nproc 3 --elements 2 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "demo ring with an empty block"; }
    expect_in "OK: every rank" "$WORK/out"
    "$BIN" demo ring --elements 65 >"$WORK/out" 2>&1 && fail "--elements 65 accepted"
    expect_in "microddp: error: --elements must be 1 to 64" "$WORK/out"
    ;;
  lab)
    # The Labs' commands on a scratch work directory (lab check runs what the
    # binary was built with: passed or not, its exit code must say so).
    ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
    W="$WORK/w"
    "$BIN" lab list --work-dir "$W" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "lab list"; }
    labs=$(find "$ROOT/labs" -mindepth 1 -maxdepth 1 -type d -name '[0-9][0-9]_*' | wc -l)
    [[ $(grep -c "missing (microddp lab reset" "$WORK/out") -eq $labs ]] || { cat "$WORK/out"; fail "expected $labs missing Labs"; }
    expect_in "microddp lab check manual" "$WORK/out"
    "$BIN" lab reset ring_allreduce --work-dir "$W" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "lab reset"; }
    cmp -s "$W/ring_allreduce.cc" "$ROOT/labs/03_ring_allreduce/exercise.cc" || fail "reset did not copy the exercise"
    "$BIN" lab list --work-dir "$W" >"$WORK/out" 2>&1
    expect_in "ring_allreduce   not started" "$WORK/out"
    echo "// my attempt" >>"$W/ring_allreduce.cc"
    "$BIN" lab list --work-dir "$W" >"$WORK/out" 2>&1
    expect_in "ring_allreduce   edited, not checked" "$WORK/out"
    "$BIN" lab reset 3 --work-dir "$W" >"$WORK/out" 2>&1 || fail "lab reset by number"
    grep -q "my attempt" "$W/ring_allreduce.cc.bak" || fail "reset lost the previous version"
    cmp -s "$W/ring_allreduce.cc" "$ROOT/labs/03_ring_allreduce/exercise.cc" || fail "reset did not restore the exercise"
    "$BIN" lab solution bucketing >"$WORK/out" 2>&1 || fail "lab solution"
    expect_in "core/ddp/bucket_assignment.cc" "$WORK/out"
    expect_in "labs/07_bucketing/solution.cc" "$WORK/out"
    "$BIN" lab check manual --work-dir "$W" >"$WORK/out" 2>&1
    code=$?
    if grep -q "^PASSED" "$WORK/out"; then [[ $code -eq 0 ]] || fail "PASSED but exit $code"
    else [[ $code -eq 1 ]] || fail "not passed but exit $code"; expect_in "microddp: error: Lab 1 manual is not passed yet" "$WORK/out"; fi
    "$BIN" lab check performance --work-dir "$W" >"$WORK/out" 2>&1 && fail "Lab 10 passed without answers"
    expect_in "no answers at $W/performance.toml" "$WORK/out"
    "$BIN" lab check nope >"$WORK/out" 2>&1 && fail "unknown Lab accepted"
    expect_in "microddp: error: no Lab called 'nope'" "$WORK/out"
    "$BIN" lab check ring_allreduce --transports auto >"$WORK/out" 2>&1 && fail "--transports auto accepted"
    expect_in "microddp: error: --transports takes tcp and shm" "$WORK/out"
    # lab run: only the diagnosis Labs have a job; a run directory of
    # something else is never removed; a check without a run says how to make it.
    "$BIN" lab run manual >"$WORK/out" 2>&1 && fail "lab run of a code Lab accepted"
    expect_in "microddp: error: lab run starts the diagnosis Labs' jobs (hang, straggler, poisoned_shard, mismatched_rank, uneven_work, slow_link), not Lab 1 manual" "$WORK/out"
    mkdir -p "$WORK/other" && touch "$WORK/other/keep"
    "$BIN" lab run hang --run-dir "$WORK/other" >"$WORK/out" 2>&1 && fail "lab run into a foreign directory accepted"
    expect_in "holds files of something else" "$WORK/out"
    [[ -e "$WORK/other/keep" ]] || fail "lab run removed a directory it did not make"
    printf 'run = "%s"\nrank = 1\n' "$WORK/other" >"$W/hang.toml"
    "$BIN" lab check hang --work-dir "$W" >"$WORK/out" 2>&1 && fail "Lab 12 passed without a run"
    expect_in "build/cli/microddp lab run hang" "$WORK/out"
    echo 0g1 >"$WORK/other/lab-fault.sealed"
    "$BIN" lab check hang --work-dir "$W" >"$WORK/out" 2>&1 && fail "a damaged seal accepted"
    expect_in "lab-fault.sealed is damaged: make a new run with \`microddp lab run\`" "$WORK/out"
    ;;
  precision)
    # --precision: a bad value is one clear line; a 2-rank bf16 job trains,
    # sends bf16 gradients (ratio 2x) and analyze names the precision; fp16
    # with a planted overflow (a loss scale of 2^40) trains on; verify
    # refuses top-k and passes bf16 within its bound.
    "$BIN" train --precision fp8 --steps 1 >"$WORK/out" 2>&1 && fail "--precision fp8 accepted"
    expect_in "error: --precision" "$WORK/out"
    "$BIN" run --nproc 2 --http-port -1 --dataset synthetic --width 64 --batch 32 --steps 20 --precision bf16 \
      --run-dir "$WORK/bf16" >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "run --precision bf16 failed"; }
    "$BIN" analyze "$WORK/bf16" --no-report >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "analyze bf16 failed"; }
    expect_in "compress bf16, precision bf16" "$WORK/out"
    expect_in "ratio 2.0x" "$WORK/out"
    "$BIN" train --dataset synthetic --width 32 --steps 40 --precision fp16 --loss-scale 1099511627776 >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "train --precision fp16 with an overflowing scale failed"; }
    expect_in "precision .*fp16" "$WORK/out"
    "$BIN" verify --nproc 2 --steps 3 --compress topk:0.1 >"$WORK/out" 2>&1 && fail "verify --compress topk accepted"
    expect_in "error: verify --compress topk:0.1: top-k and PowerSGD" "$WORK/out"
    "$BIN" verify --nproc 2 --steps 3 --width 32 --depth 2 --precision bf16 >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "verify bf16"; }
    expect_in "gradients sent as bf16" "$WORK/out"
    ;;
  gpu)
    # microddp gpu: a verdict on every machine; "no GPU", exit 0, where the
    # machine shows none; a bad MDDP_NCCL_LIBRARY named, not followed.
    gpu_json() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$1)" "$WORK/gpu.json"; }
    "$BIN" gpu --json >"$WORK/gpu.json" 2>"$WORK/err"
    rc=$?
    verdict="$(gpu_json '["verdict"]')" || { cat "$WORK/gpu.json" "$WORK/err"; fail "gpu --json is not JSON"; }
    case "$verdict" in
      ready | "no GPU") [[ $rc -eq 0 ]] || fail "gpu: verdict $verdict but exit $rc" ;;
      broken) [[ $rc -eq 1 ]] || fail "gpu: broken but exit $rc"; expect_in "CUDA cannot start" "$WORK/err" ;;
      *) fail "gpu: unknown verdict '$verdict'" ;;
    esac
    if ! compgen -G "/dev/nvidia[0-9]*" >/dev/null && [[ ! -d /proc/driver/nvidia ]]; then
      [[ "$verdict" == "no GPU" ]] || fail "gpu: no NVIDIA device here, but the verdict is $verdict"
      "$BIN" gpu >"$WORK/out" 2>&1 || fail "gpu exited non-zero without a GPU"
      expect_in "^no GPU: " "$WORK/out"
    fi
    MDDP_NCCL_LIBRARY="$WORK/no-such-libnccl.so" "$BIN" gpu --json >"$WORK/gpu.json" 2>/dev/null
    if [[ "$(gpu_json '["built_with_cuda"]')" == True ]]; then
      gpu_json '["nccl"]["error"]' | grep -q "MDDP_NCCL_LIBRARY=$WORK/no-such-libnccl.so" ||
        { cat "$WORK/gpu.json"; fail "gpu: a bad MDDP_NCCL_LIBRARY is not named"; }
    else
      gpu_json '["nccl"]["error"]' | grep -q "without CUDA" || fail "gpu: NCCL in a build without CUDA"
    fi
    ;;
  sample)
    # microddp sample on a GPT trained a few steps on the sample corpus: the
    # prompt and N characters of its vocabulary, the same text for a seed
    # and other text for another, greedy whatever the seed, a run directory
    # as its newest checkpoint; each bad input one line and exit 1.
    CORPUS="$(dirname "${BASH_SOURCE[0]}")/../data/tiny_corpus.txt"
    "$BIN" train --model gpt --layers 1 --heads 2 --embd 32 --block 16 --batch 16 --steps 30 --lr 1e-2 \
      --dataset "text:$CORPUS" --checkpoint-every 10 --run-dir "$WORK/gpt" >"$WORK/out" 2>&1 \
      || { cat "$WORK/out"; fail "train on the sample corpus failed"; }
    # The run's last step is an epoch end: its evaluation wrote a sample, printed and logged.
    expect_in "^sample:$" "$WORK/out"
    python3 -c 'import json,sys; e=[json.loads(x) for x in open(sys.argv[1]) if "test_loss" in x]; assert len(e) == 1 and len(e[0]["sample"]) == 120, e' \
      "$WORK/gpt/train.jsonl" || { cat "$WORK/gpt/train.jsonl"; fail "train.jsonl has no sample of 120 characters"; }
    sample() { "$BIN" sample --checkpoint "$WORK/gpt" --tokens 80 "$@"; }
    sample --prompt "The " --seed 1 >"$WORK/s1" 2>&1 || { cat "$WORK/s1"; fail "sample failed"; }
    # The output: the prompt, 80 characters of the corpus's vocabulary, a newline.
    python3 -c '
import sys
out = open(sys.argv[1], encoding="utf-8").read()
vocab = set(open(sys.argv[2], encoding="utf-8").read())
assert out.endswith("\n") and out.startswith("The "), repr(out)
text = out[4:-1]
assert len(text) == int(sys.argv[3]), (len(text), repr(out))
assert set(text) <= vocab, set(text) - vocab
' "$WORK/s1" "$CORPUS" 80 || fail "sample printed the wrong text"
    sample --prompt "The " --seed 1 >"$WORK/s1b" 2>&1 && cmp -s "$WORK/s1" "$WORK/s1b" || fail "the same seed gave other text"
    sample --prompt "The " --seed 2 >"$WORK/s2" 2>&1 && ! cmp -s "$WORK/s1" "$WORK/s2" || fail "another seed gave the same text"
    sample --prompt "The " --seed 1 --temperature 0 >"$WORK/g1" 2>&1 || fail "greedy sample failed"
    sample --prompt "The " --seed 2 --top-k 1 >"$WORK/g2" 2>&1 && cmp -s "$WORK/g1" "$WORK/g2" \
      || fail "greedy (temperature 0, top-k 1) depends on the seed"
    # The run directory's newest checkpoint is its final one; a periodic file is another model.
    "$BIN" sample --checkpoint "$WORK/gpt/checkpoint.safetensors" --prompt "The " --tokens 80 --seed 1 >"$WORK/f1" 2>&1 \
      && cmp -s "$WORK/s1" "$WORK/f1" || fail "the run directory did not read its final checkpoint"
    "$BIN" sample --checkpoint "$WORK/gpt/checkpoints/step-00000010.safetensors" --prompt "The " --tokens 80 \
      --seed 1 >"$WORK/p1" 2>&1 && ! cmp -s "$WORK/s1" "$WORK/p1" || fail "step 10's checkpoint gave the final one's text"
    # An empty prompt: just the generated characters.
    "$BIN" sample --checkpoint "$WORK/gpt" --prompt "" --tokens 25 >"$WORK/e" 2>&1 || { cat "$WORK/e"; fail "an empty prompt failed"; }
    python3 -c 'import sys; t = open(sys.argv[1], encoding="utf-8").read(); assert len(t) == 26, repr(t)' "$WORK/e" \
      || fail "an empty prompt did not give 25 characters"
    # Bad input: one line, exit 1.
    refused() {
      local pattern="$1"
      shift
      "$BIN" sample "$@" >"$WORK/err" 2>&1
      local rc=$?
      [[ $rc -eq 1 ]] || { cat "$WORK/err"; fail "sample $* exited $rc, not 1"; }
      [[ $(wc -l <"$WORK/err") -eq 1 ]] || { cat "$WORK/err"; fail "sample $*: not one line"; }
      expect_in "$pattern" "$WORK/err"
    }
    refused "--prompt: character 'Z' (U+005A) at position 0 is not in the vocabulary; the model reads 59 characters: \"\\\\n \\\\\"'(),.0" \
      --checkpoint "$WORK/gpt" --prompt "Zebra"
    refused "--tokens: Value -1 not in range" --checkpoint "$WORK/gpt" --tokens -1
    refused "--temperature" --checkpoint "$WORK/gpt" --temperature -0.5
    refused "--temperature" --checkpoint "$WORK/gpt" --temperature nan
    refused "--top-k" --checkpoint "$WORK/gpt" --top-k -3
    refused "--checkpoint $WORK/none: no such file or directory" --checkpoint "$WORK/none"
    "$BIN" train --dataset synthetic --synthetic-size 64 --width 16 --steps 2 --run-dir "$WORK/mlp" >/dev/null 2>&1 \
      || fail "train an MLP failed"
    refused "a checkpoint of a Sequential, not of a GPT" --checkpoint "$WORK/mlp"
    "$BIN" train --model gpt --layers 1 --embd 16 --block 8 --synthetic-size 64 --steps 2 --run-dir "$WORK/tokens" \
      >/dev/null 2>&1 || fail "train a GPT on synthetic tokens failed"
    refused "no vocabulary in its metadata (a GPT trained on synthetic-tokens)" --checkpoint "$WORK/tokens"
    ;;
  *) fail "unknown scenario $SCENARIO" ;;
esac
echo "PASS: $SCENARIO"
