#!/usr/bin/env bash
# microddp's GPT against the same GPT in PyTorch 1.13 (bench/pytorch_gpt.py,
# which imports tests/pytorch/gpt_model.py: the model the GPT oracle checks),
# side by side in one run: interleaved rounds (the order flips every round),
# medians [min..max], ratios microddp / PyTorch taken per round.
#
# Throughput, for each configuration (LAYERSxHEADSxEMBD, block 64, global
# batch 12; by default nanoGPT's CPU configuration 4x4x128 and 6x6x384, about
# 10 M parameters): `microddp bench train --model gpt` (AdamW, clipping at
# 1.0: the GPT's defaults) against pytorch_gpt.py, one compute thread per
# rank, on 1 rank and on 2 ranks (bucketed DDP; PyTorch DDP gloo): tokens/s,
# step time, peak RSS per rank, microddp's phases, and the step's GEMM lower
# bound at the rate `microddp bench gemm` measures for the MLP's shape.
#
# --quality: nanoGPT's CPU configuration for --steps steps (2000) on
# `--dataset text:CORPUS` (default /usr/share/games/fortunes) from the same
# initial weights and on the same batches: microddp in one process, microddp
# with 2-rank DDP at the same global batch, PyTorch in one process; every
# 200 steps each side's checkpoint is evaluated by pytorch_gpt.py
# --evaluate on the same validation windows, so one evaluator judges all.
#
# Usage: bench/gpt_vs_pytorch.sh [--rounds N] [--quick] [--configs "4x4x128 6x6x384"]
#                                [--quality] [--no-throughput] [--steps N] [--corpus PATH]
#                                [--out FILE.md] [--keep DIR]
# Environment: MICRODDP (default: <repo>/build/cli/microddp), PYTHON (default
# /usr/bin/python3, Debian's python3-torch).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TORCH_SCRIPT=$here/pytorch_gpt.py

rounds=3
quick=0
configs="4x4x128 6x6x384"
quality=0
throughput=1
steps=2000
corpus=/usr/share/games/fortunes
out=""
keep=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --quick) quick=1; rounds=1; shift ;;
    --configs) configs=$2; shift 2 ;;
    --quality) quality=1; shift ;;
    --no-throughput) throughput=0; shift ;;
    --steps) steps=$2; shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done

require_microddp
require_torch torch.distributed
[[ -z $out ]] || out=$(realpath -m "$out")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
per_run_timeout=3600  # the quality runs are long
run_cpu=1
make_work_dir gpt_vs_pytorch
{
  machine_info
  echo "microddp: $MICRODDP ($(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "torch: $("$PY" -c 'import torch; print(torch.__version__)')"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$work/env.txt"
cat "$work/env.txt"

block=64 batch=12
mddp_train() {  # NAME LxHxC NPROC WARMUP ITERS
  local l h c; IFS=x read -r l h c <<< "$2"
  run "$1" "$MICRODDP" bench train --model gpt --layers "$l" --heads "$h" --embd "$c" --block $block \
    --batch $batch --nproc "$3" --warmup "$4" --iters "$5" --threads 1 --json "$work/$1.json"
}
torch_train() {  # NAME LxHxC RANKS WARMUP ITERS
  local l h c; IFS=x read -r l h c <<< "$2"
  run "$1" "$PY" "$TORCH_SCRIPT" --layers "$l" --heads "$h" --embd "$c" --block $block --batch $batch \
    --ranks "$3" --warmup "$4" --iters "$5" --json "$work/$1.json"
}
mddp_gemm() {  # NAME M N K: microddp's GEMM rate at one shape, as JSON
  run "$1" "$MICRODDP" bench gemm -m "$2" -n "$3" -k "$4" --iters 30 --threads 1
  sed -n 's/.*: best \([0-9.]*\) ms, \([0-9.]*\) GFLOP\/s.*/{"gflops": \2}/p' "$work/$1.log" > "$work/$1.json"
}

start=$SECONDS
if (( throughput )); then
  for ((r = 0; r < rounds; r++)); do
    for cfg in $configs; do
      c=${cfg##*x}
      if (( c >= 256 )); then wu=1; it=$(( quick ? 2 : 4 )); else wu=3; it=$(( quick ? 5 : 20 )); fi
      p="r${r}_${cfg}"
      jobs=(
        "mddp_gemm ${p}_gemm $((block * batch)) $((4 * c)) $c"
        "mddp_train ${p}_mddp_1 $cfg 1 $wu $it"
        "torch_train ${p}_torch_1 $cfg 1 $wu $it"
        "mddp_train ${p}_mddp_2 $cfg 2 $wu $it"
        "torch_train ${p}_torch_2 $cfg 2 $wu $it"
      )
      echo "round $((r + 1))/$rounds, $cfg (${wu} warm-up + ${it} timed steps)"
      run_round "$r"
    done
  done
fi

if (( quality )); then
  q=$work/quality
  mkdir -p "$q"
  common=(--layers 4 --heads 4 --embd 128 --block "$block" --seed 1337)
  "$PY" "$TORCH_SCRIPT" --quality "$corpus" --write-init "$q/init.safetensors" "${common[@]}"
  mflags=(--model gpt --dataset "text:$corpus" --layers 4 --heads 4 --embd 128 --block "$block" --batch "$batch"
          --steps "$steps" --seed 1337 --no-eval --threads 1 --init-from "$q/init.safetensors"
          --checkpoint-every 200 --keep-checkpoints 0)
  echo "quality: $steps steps of the 4x4x128 GPT on $corpus"
  run quality_mddp_1 "$MICRODDP" train "${mflags[@]}" --run-dir "$q/mddp_1"
  run quality_mddp_2 "$MICRODDP" run --nproc 2 --http-port -1 "${mflags[@]}" --run-dir "$q/mddp_2"
  run quality_torch_1 "$PY" "$TORCH_SCRIPT" --quality "$corpus" --init-from "$q/init.safetensors" \
    --steps "$steps" --checkpoint-every 200 --batch $batch --out-dir "$q/torch_1" "${common[@]}"
  mapfile -t ckpts < <(ls "$q"/mddp_1/checkpoints/step-*[0-9].safetensors "$q"/mddp_2/checkpoints/step-*[0-9].safetensors \
                          "$q"/torch_1/step-*.safetensors 2>/dev/null)
  run quality_eval "$PY" "$TORCH_SCRIPT" --quality "$corpus" "${common[@]}" --json "$q/eval.json" --evaluate "${ckpts[@]}"
fi
finish_env "$start"

write_summary "$work" "$rounds" "$configs" "$out" "$steps" "$corpus" <<'EOF'
import glob, json, os, re, sys

import summary
from summary import cpu_pct, fmt, med, mval, ratio

work, rounds, configs, out, steps, corpus = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4], \
    int(sys.argv[5]), sys.argv[6]


def load(name):
    f = os.path.join(work, name + ".json")
    if not os.path.exists(f) or os.path.getsize(f) == 0:
        return None
    j = json.load(open(f))
    j["cpu_pct"] = cpu_pct(work, name)
    return j


def target(value, goal, higher_better):
    if value is None:
        return "n/a"
    ok = value >= goal if higher_better else value <= goal
    return ("met" if ok else "MISSED") + f" (target {'≥' if higher_better else '≤'} {goal})"


def gemm_gflop(L, C, B=12, T=64, V=64):
    """GEMM work of one training step: 3 x the forward's (forward, input grad, weight grad)."""
    N = B * T
    forward = L * (2 * N * 12 * C * C + 2 * 2 * B * T * T * C) + 2 * N * C * V
    return 3 * forward / 1e9


L = ["# microddp vs PyTorch: the GPT, side by side", ""]
L.append(f"Median [min..max] over {rounds} interleaved round(s); ratios microddp / PyTorch per round. One compute "
         "thread per rank on both sides; `CPU%` is the CPU share a run got (100 % per rank = uncontended).")
L += ["", "```"] + summary.env_lines(work) + ["```"]
for cfg in configs:
    l, h, c = (int(v) for v in cfg.split("x"))
    S = {t: [load(f"r{r}_{cfg}_{t}") for r in range(rounds)] for t in ("mddp_1", "torch_1", "mddp_2", "torch_2", "gemm")}
    if not any(S["mddp_1"] + S["torch_1"]):
        continue
    params = next((j["parameters"] for j in S["torch_1"] if j), None)
    get = lambda t, f: [f(j) if j else None for j in S[t]]
    tps = lambda t: get(t, lambda j: j["tokens_per_s"])
    rss = lambda t: get(t, lambda j: max(j["peak_rss_mb"]))
    L += ["", f"## {l} layers, {h} heads, {c} wide, block 64, global batch 12 ({params or '?'} parameters)", ""]
    L += ["| run | tokens/s | step ms | peak RSS MB / rank | CPU% |", "|---|---|---|---|---|"]
    for t, name in [("mddp_1", "microddp 1 rank"), ("torch_1", "PyTorch 1 rank"),
                    ("mddp_2", "microddp 2 ranks, bucketed DDP"), ("torch_2", "PyTorch 2 ranks, DDP gloo")]:
        L.append(f"| {name} | {med(tps(t))} | {med(get(t, lambda j: j['step_ms']))} | {med(rss(t))} | "
                 f"{med(get(t, lambda j: j['cpu_pct']))} |")
    L.append("")
    for n, label in (("1", "1 rank"), ("2", "2-rank DDP")):
        r_t = ratio(tps(f"mddp_{n}"), tps(f"torch_{n}"))
        r_m = ratio(rss(f"mddp_{n}"), rss(f"torch_{n}"))
        L.append(f"* {label}: tokens/s microddp / PyTorch **{med(r_t)}** — {target(mval(r_t), 1.5, True)}; "
                 f"peak RSS per rank microddp / PyTorch **{med(r_m)}** — {target(mval(r_m), 0.6, False)}")
    gflop = gemm_gflop(l, c)
    rate = max([j["gflops"] for j in S["gemm"] if j] or [0]) or None
    bound = gflop / rate * 1e3 if rate else None
    L.append(f"* GEMM work {gflop:.2f} GFLOP per step; at microddp's best `bench gemm` rate for m={64 * 12} n={4 * c} "
             f"k={c} ({fmt(rate)} GFLOP/s) that is {fmt(bound)} ms: microddp's 1-rank step / this bound "
             f"{med([s / bound if s and bound else None for s in get('mddp_1', lambda j: j['step_ms'])])}")
    L += ["", "Phases, ms per step (mean over ranks; PyTorch's backward includes DDP's all-reduce, its optimizer "
          "the clipping):", "", "| run | data | forward | backward | exposed comm | optimizer |", "|---|---|---|---|---|---|"]
    for t, name in [("mddp_1", "microddp 1 rank"), ("torch_1", "PyTorch 1 rank"), ("mddp_2", "microddp 2 ranks"),
                    ("torch_2", "PyTorch 2 ranks")]:
        ph = lambda k: fmt(mval(get(t, lambda j: j["phases_ms"].get(k))))
        L.append(f"| {name} | {ph('data_ms')} | {ph('forward_ms')} | {ph('backward_ms')} | {ph('exposed_comm_ms')} | "
                 f"{ph('optimizer_ms')} |")

ev = os.path.join(work, "quality", "eval.json")
if os.path.exists(ev):
    losses = {}
    for path, loss in json.load(open(ev)).items():
        run = "torch_1" if "/torch_1/" in path else "mddp_2" if "/mddp_2/" in path else "mddp_1"
        losses.setdefault(run, {})[int(re.search(r"step-(\d+)", path)[1])] = loss
    L += ["", f"## Quality: {steps} steps of 4x4x128 on `text:{corpus}`", "",
          "Validation loss (nats per token) on the same windows of 64 tokens (up to 1000, evenly spaced) of the "
          "validation split, every "
          "checkpoint evaluated by `pytorch_gpt.py --evaluate`; the same initial weights and batches on every side.", "",
          "| step | PyTorch 1 process | microddp 1 process | microddp 2-rank DDP | microddp / PyTorch | 2 ranks / 1 |",
          "|---|---|---|---|---|---|"]
    for s in sorted(losses.get("torch_1", {}) or losses.get("mddp_1", {})):
        t, m1, m2 = (losses.get(k, {}).get(s) for k in ("torch_1", "mddp_1", "mddp_2"))
        six = lambda x: f"{x:.6f}" if x else "—"
        L.append(f"| {s} | {six(t)} | {six(m1)} | {six(m2)} | {six(m1 / t if m1 and t else None)} | "
                 f"{six(m2 / m1 if m1 and m2 else None)} |")
summary.emit(L, out)
EOF
