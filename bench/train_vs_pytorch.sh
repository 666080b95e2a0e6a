#!/usr/bin/env bash
# microddp `bench train` against PyTorch (bench/pytorch_fullmlp.py), side by side
# in one run: interleaved A/B rounds, medians [min..max], ratios per round.
#
# For each configuration (W=1024 B=256 and W=256 B=64 by default):
#   (a) one rank: microddp --nproc 1 vs PyTorch --ranks 1 (no DDP); the GEMM
#       lower bound of the step from `microddp bench gemm` at m=B n=W k=W
#       (and torch.mm / OpenBLAS at the same shape, for reference);
#   (b) two ranks: microddp bucketed (default caps) vs PyTorch DDP gloo with
#       bucket_cap_mb 1 and 25 and the compute-only no_sync reference, and
#       microddp's own compute-only reference (--local-sgd past the run: two
#       ranks that never communicate, the ceiling of 2 ranks ÷ 1); scaling
#       efficiency; peak RSS per rank; microddp's overlap and phase breakdown;
#       plus the three GEMMs of a layer (NT forward, TN weight grad, NN input
#       grad) through oneDNN and OpenBLAS (bench/gemm_shapes.py);
#   (c) a 2-rank sweep of microddp: naive, hooked, bucketed --bucket-mb 0.25/1/5/25.
#
# Usage: bench/train_vs_pytorch.sh [--quick] [--rounds N] [--out FILE.md]
#                                  [--configs "1024x256 256x64"] [--no-sweep] [--keep DIR]
# Environment: MICRODDP (default: <repo>/build/cli/microddp), PYTHON (default
# /usr/bin/python3, Debian's python3-torch). OPENBLAS_CORETYPE is passed through
# unchanged to both sides and reported.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TORCH_SCRIPT=$here/pytorch_fullmlp.py

rounds=3
quick=0
sweep=1
out=""
keep=""
configs="1024x256 256x64"

while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1; rounds=1; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --no-sweep) sweep=0; shift ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done

require_microddp
require_torch torch
[[ -z $out ]] || out=$(realpath -m "$out")

# One compute thread per process on both sides.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

make_work_dir train_vs_pytorch

# Steps per run: (warm-up, timed) for W >= 512 and for smaller widths.
if (( quick )); then big=(1 3); small=(5 40); else big=(2 6); small=(10 100); fi
gemm_iters=50

{
  machine_info
  echo "OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-<unset>}"
  echo "threads: OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS"
  echo "microddp: $MICRODDP ($(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "torch: $("$PY" -c 'import re, torch; c = torch.__config__.show(); print(torch.__version__, "|", re.search(r"CPU capability usage: \w+", c)[0], "|", ", ".join(re.findall(r"(?:BLAS_INFO|LAPACK_INFO|USE_MKLDNN)=\w+", c)))' 2>/dev/null)"
  echo "libblas.so.3 -> $(realpath /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo '?')"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$work/env.txt"
cat "$work/env.txt"

mddp_train() {  # NAME W B WARMUP ITERS ARGS...
  local name=$1 w=$2 b=$3 wu=$4 it=$5; shift 5
  run "$name" "$MICRODDP" bench train --width "$w" --batch "$b" --warmup "$wu" --iters "$it" --threads 1 \
    --json "$work/$name.json" "$@"
}
torch_train() {  # NAME W B WARMUP ITERS ARGS...
  local name=$1 w=$2 b=$3 wu=$4 it=$5; shift 5
  run "$name" "$PY" "$TORCH_SCRIPT" --width "$w" --batch "$b" --warmup "$wu" --iters "$it" --json "$work/$name.json" "$@"
}
mddp_gemm() {  # NAME M N K
  local name=$1
  run "$name" "$MICRODDP" bench gemm -m "$2" -n "$3" -k "$4" --iters "$gemm_iters" --threads 1
  if [[ -f $work/$name.log ]]; then
    "$PY" - "$work/$name.log" "$work/$name.json" <<'EOF' || true
import json, re, sys
m = re.search(r"gemm (\d+)x(\d+)x(\d+)(?: \(([^)]*)\))?: best ([\d.]+) ms, ([\d.]+) GFLOP/s",
              open(sys.argv[1]).read())
if m:
    json.dump({"impl": "microddp", "gemm": [int(m[1]), int(m[2]), int(m[3])], "backend": m[4] or "?",
               "best_ms": float(m[5]), "gflops": float(m[6])}, open(sys.argv[2], "w"))
EOF
  fi
}

start=$SECONDS
for ((r = 0; r < rounds; r++)); do
  for cfg in $configs; do
    w=${cfg%x*}; b=${cfg#*x}
    if (( w >= 512 )); then wu=${big[0]}; it=${big[1]}; else wu=${small[0]}; it=${small[1]}; fi
    p="r${r}_${cfg}"
    # A/B pairs; the order flips every round so neither side always goes first.
    jobs=(
      "mddp_gemm ${p}_gemm_mddp $b $w $w"
      "torch_train ${p}_gemm_torch $w $b 0 1 --gemm ${b}x${w}x${w}"
      "run ${p}_gemm_shapes $PY $here/gemm_shapes.py --width $w --batch $b --json"
      "mddp_train ${p}_mddp_1 $w $b $wu $it --nproc 1"
      "torch_train ${p}_torch_1 $w $b $wu $it --ranks 1"
      "mddp_train ${p}_mddp_2_bucketed $w $b $wu $it --nproc 2 --ddp bucketed"
      "torch_train ${p}_torch_2_b25 $w $b $wu $it --ranks 2 --bucket-mb 25"
      "torch_train ${p}_torch_2_b1 $w $b $wu $it --ranks 2 --bucket-mb 1"
      "torch_train ${p}_torch_2_nosync $w $b $wu $it --ranks 2 --no-sync"
      "mddp_train ${p}_mddp_2_nosync $w $b $wu $it --nproc 2 --local-sgd 1000000000"
    )
    if (( sweep )); then
      jobs+=(
        "mddp_train ${p}_mddp_2_naive $w $b $wu $it --nproc 2 --ddp naive"
        "mddp_train ${p}_mddp_2_hooked $w $b $wu $it --nproc 2 --ddp hooked"
        "mddp_train ${p}_mddp_2_b0.25 $w $b $wu $it --nproc 2 --ddp bucketed --bucket-mb 0.25"
        "mddp_train ${p}_mddp_2_b1 $w $b $wu $it --nproc 2 --ddp bucketed --bucket-mb 1"
        "mddp_train ${p}_mddp_2_b5 $w $b $wu $it --nproc 2 --ddp bucketed --bucket-mb 5"
      )
    fi
    echo "round $((r + 1))/$rounds, W=$w B=$b (${wu} warm-up + ${it} timed steps)"
    run_round "$r"
  done
done
for f in "$work"/*_gemm_shapes.log; do [[ -f $f ]] && grep '^{' "$f" > "${f%.log}.json" || true; done
finish_env "$start"

write_summary "$work" "$rounds" "$configs" "$out" <<'EOF'
import glob, json, os, statistics, sys

import summary
from summary import cpu_pct, fmt, mval, ratio

work, rounds, configs, out = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
env = summary.env_lines(work)


def load(name):
    f = os.path.join(work, name + ".json")
    if not os.path.exists(f):
        return None
    j = json.load(open(f))
    cpu = cpu_pct(work, name)
    if cpu is not None:
        j["cpu_pct"] = cpu
    return j


def series(cfg, tag):
    return [load(f"r{r}_{cfg}_{tag}") for r in range(rounds)]


def med(xs):
    return summary.med(xs, missing="failed")


def get(js, f):
    return [f(j) if j else None for j in js]


def target(value, goal, higher_better):
    if value is None:
        return "n/a"
    ok = value >= goal if higher_better else value <= goal
    return ("met" if ok else "MISSED") + f" (target {'≥' if higher_better else '≤'} {goal})"


L = []
L.append("# microddp vs PyTorch: FullMLP training, side by side")
L.append("")
L.append(f"Median [min..max] over {rounds} interleaved round(s); ratios are taken per round (same round, "
         "adjacent runs) and then the median. One compute thread per process on both sides. "
         "Wall-clock throughput on a shared machine: `CPU%` is the CPU share the run got "
         "(of one core; 100 % per rank = uncontended).")
L.append("")
L.append("```")
L += env
blas = None
for f in sorted(glob.glob(os.path.join(work, "*_torch_*.json"))):
    j = json.load(open(f))
    if j.get("blas"):
        blas = j["blas"]
        break
if blas:
    L.append(f"torch: {blas.get('torch')}, {blas.get('torch_blas_info', '').lstrip('- ')}; Linear/mm through "
             f"libblas.so.3 = {blas.get('libblas_so_3', '?')}")
    L.append(f"OpenBLAS: {blas.get('openblas_config', '?')}; kernel (core) in use: {blas.get('openblas_core', '?')}")
L.append("microddp: GEMM library chosen per CPU and shape in core/tensor/cpu/gemm.cc (each configuration "
         "names the one its shapes got)")
L.append("```")

for cfg in configs:
    W, B = (int(v) for v in cfg.split("x"))
    S = {t: series(cfg, t) for t in ["gemm_mddp", "gemm_torch", "mddp_1", "torch_1", "mddp_2_bucketed", "torch_2_b25",
                                     "torch_2_b1", "torch_2_nosync", "mddp_2_nosync", "mddp_2_naive", "mddp_2_hooked", "mddp_2_b0.25",
                                     "mddp_2_b1", "mddp_2_b5"]}
    depth = next((j["depth"] for j in S["mddp_1"] + S["torch_1"] if j), 16)
    # The library microddp's GEMMs of this configuration go to, and its column of bench/gemm_shapes.py.
    mddp_backend = next((j.get("backend", "?") for j in S["gemm_mddp"] if j), "?")
    mddp_lib = "openblas" if "OpenBLAS" in mddp_backend else "onednn_aligned"
    sps = lambda t: get(S[t], lambda j: j["samples_per_s"])
    stp = lambda t: get(S[t], lambda j: j["step_ms"])
    rss = lambda t: get(S[t], lambda j: max(j["peak_rss_mb"]))
    cpu = lambda t: get(S[t], lambda j: j.get("cpu_pct"))

    L.append("")
    L.append(f"## W={W}, global batch B={B}, depth {depth}")
    # (a) one rank
    ngemm = 3 * depth - 1  # forward + weight grad per layer; no input grad for the first layer
    flops = 2.0 * B * W * W * ngemm
    g_m = [j["gflops"] if j else None for j in S["gemm_mddp"]]
    g_t = [j["gflops"] if j else None for j in S["gemm_torch"]]
    best_m = max([g for g in g_m if g] or [0]) or None
    best_t = max([g for g in g_t if g] or [0]) or None
    lb_m = flops / (best_m * 1e9) * 1e3 if best_m else None
    lb_t = flops / (best_t * 1e9) * 1e3 if best_t else None
    L.append("")
    L.append("### (a) one rank, no DDP")
    L.append("")
    L.append("| run | samples/s | step ms | peak RSS MB | CPU% |")
    L.append("|---|---|---|---|---|")
    for t, name in [("mddp_1", "microddp `--nproc 1`"), ("torch_1", "PyTorch `--ranks 1`")]:
        L.append(f"| {name} | {med(sps(t))} | {med(stp(t))} | {med(rss(t))} | {med(cpu(t))} |")
    r_sps = ratio(sps("mddp_1"), sps("torch_1"))
    L.append("")
    L.append(f"* microddp / PyTorch samples/s: **{med(r_sps)}** — {target(mval(r_sps), 1.5, True)}")
    L.append(f"* GEMM at m={B} n={W} k={W}, best single-thread GFLOP/s in this run: microddp ({mddp_backend}) "
             f"{fmt(best_m)} (per round {', '.join(fmt(g) for g in g_m)}); torch.mm (OpenBLAS) {fmt(best_t)} "
             f"(per round {', '.join(fmt(g) for g in g_t)})")
    L.append(f"* GEMM lower bound: {ngemm} GEMMs × 2·B·W² = {flops / 1e9:.2f} GFLOP per step → {fmt(lb_m)} ms at "
             f"microddp's GEMM rate ({fmt(B / lb_m * 1e3) if lb_m else '—'} samples/s), {fmt(lb_t)} ms at OpenBLAS's")
    r_lb = [s / lb_m if s and lb_m else None for s in stp("mddp_1")]
    r_lbt = [s / lb_t if s and lb_t else None for s in stp("torch_1")]
    below = " (below 1: `bench gemm`'s NN rate is lower than the step's GEMMs reach, so this is no bound; "
    below += "see the per-shape bound)" if (mval(r_lb) or 1) < 1 else ""
    L.append(f"* microddp step / its GEMM lower bound: **{med(r_lb)}** — {target(mval(r_lb), 1.3, False)}"
             f"{below if (mval(r_lb) or 1) < 1 else ''}; PyTorch step / OpenBLAS lower bound: {med(r_lbt)}")
    gs = [j for j in series(cfg, "gemm_shapes") if j]
    if gs:
        best = {}
        for j in gs:
            for row in j["rows"]:
                b = best.setdefault(row["gemm"], dict(row))
                for lib in ("onednn_aligned", "onednn_b_off16", "openblas"):
                    b[lib] = max(b[lib], row[lib])
        rows = list(best.values())
        bound = {lib: sum(2.0 * x["m"] * x["n"] * x["k"] * x["per_step"] / (x[lib] * 1e9) for x in rows) * 1e3
                 for lib in ("onednn_aligned", "onednn_b_off16", "openblas")}
        r_lbs = [s / bound[mddp_lib] if s else None for s in stp("mddp_1")]
        r_lbts = [s / bound["openblas"] if s else None for s in stp("torch_1")]
        L.append(f"* per-shape GEMM bound (each of the 47 GEMMs at its own op's rate, `bench/gemm_shapes.py`, best "
                 f"over rounds): {fmt(bound[mddp_lib])} ms for microddp's library ({mddp_backend}) → microddp step / bound "
                 f"{med(r_lbs)}; {fmt(bound['openblas'])} ms for OpenBLAS → PyTorch step / bound {med(r_lbts)}")
        L.append("")
        L.append("| GEMM of a layer | op | m×n×k | per step | oneDNN, 64-B aligned | oneDNN, B 16 B off "
                 "| OpenBLAS |")
        L.append("|---|---|---|---|---|---|---|")
        for x in rows:
            L.append(f"| {x['gemm']} | {x['trans']} | {x['m']}×{x['n']}×{x['k']} | {x['per_step']} | "
                     f"{fmt(x['onednn_aligned'])} | {fmt(x['onednn_b_off16'])} | {fmt(x['openblas'])} |")
        L.append(f"| step bound, ms | | | 47 | {fmt(bound['onednn_aligned'])} | {fmt(bound['onednn_b_off16'])} | "
                 f"{fmt(bound['openblas'])} |")

    # (b) two ranks
    L.append("")
    L.append("### (b) two ranks")
    L.append("")
    L.append("| run | samples/s (global) | step ms | peak RSS MB / rank | CPU% |")
    L.append("|---|---|---|---|---|")
    for t, name in [("mddp_2_bucketed", "microddp bucketed (default caps: 25 MiB, first 1 MiB)"),
                    ("torch_2_b1", "PyTorch DDP bucket_cap_mb 1"), ("torch_2_b25", "PyTorch DDP bucket_cap_mb 25"),
                    ("torch_2_nosync", "PyTorch compute only (no_sync)"),
                    ("mddp_2_nosync", "microddp compute only (`--local-sgd` past the run: no sync)")]:
        L.append(f"| {name} | {med(sps(t))} | {med(stp(t))} | {med(rss(t))} | {med(cpu(t))} |")
    best_pt = [max(x, y) if x and y else (x or y) for x, y in zip(sps("torch_2_b1"), sps("torch_2_b25"))]
    r2 = ratio(sps("mddp_2_bucketed"), best_pt)
    eff_m = [x / (2 * y) if x and y else None for x, y in zip(sps("mddp_2_bucketed"), sps("mddp_1"))]
    eff_t = [x / (2 * y) if x and y else None for x, y in zip(best_pt, sps("torch_1"))]
    rss_r25 = ratio(rss("mddp_2_bucketed"), rss("torch_2_b25"))
    rss_r1 = ratio(rss("mddp_2_bucketed"), rss("torch_2_b1"))
    L.append("")
    L.append(f"* microddp / better PyTorch DDP (per round) samples/s: **{med(r2)}** — {target(mval(r2), 2.0, True)}")
    L.append(f"* scaling efficiency sps(2) / (2·sps(1)): microddp {med(eff_m)}; PyTorch (better DDP) {med(eff_t)}")
    # Two ranks without any communication bound what DDP on two ranks can reach on this machine: the two
    # processes still share the caches, the memory bandwidth and whatever else the two vCPUs share.
    r21 = ratio(sps("mddp_2_bucketed"), sps("mddp_1"))
    r21_nc = ratio(sps("mddp_2_nosync"), sps("mddp_1"))
    L.append(f"* 2 ranks ÷ 1 rank samples/s: microddp DDP **{med(r21)}** — {target(mval(r21), 1.3, True)}; "
             f"microddp compute only {med(r21_nc)} (the ceiling here: two ranks that never communicate); "
             f"DDP ÷ compute only {med(ratio(sps('mddp_2_bucketed'), sps('mddp_2_nosync')))}")
    L.append(f"* peak RSS per rank microddp / PyTorch: **{med(rss_r25)}** vs DDP 25 MB, {med(rss_r1)} vs DDP 1 MB — "
             f"{target(mval(rss_r25), 0.6, False)}")
    L.append("")
    L.append("Phase breakdown, ms per step, mean over ranks, median over rounds (PyTorch's backward includes "
             "DDP's all-reduce, which it does not report separately):")
    L.append("")
    L.append("| run | data | forward | backward | exposed comm | total all-reduce | optimizer | overlap |")
    L.append("|---|---|---|---|---|---|---|---|")
    for t, name in [("mddp_1", "microddp 1 rank"), ("torch_1", "PyTorch 1 rank"),
                    ("mddp_2_bucketed", "microddp 2 ranks bucketed"), ("torch_2_b1", "PyTorch 2 ranks DDP 1 MB"),
                    ("torch_2_b25", "PyTorch 2 ranks DDP 25 MB"), ("torch_2_nosync", "PyTorch 2 ranks no_sync"),
                    ("mddp_2_nosync", "microddp 2 ranks compute only")]:
        ph = lambda k: fmt(mval(get(S[t], lambda j: j["phases_ms"].get(k))))
        ov = mval(get(S[t], lambda j: j["phases_ms"].get("overlap")))
        mddp = t.startswith("mddp")
        L.append(f"| {name} | {ph('data_ms') if mddp else '—'} | {ph('forward_ms')} | {ph('backward_ms')} | "
                 f"{ph('exposed_comm_ms') if mddp else '—'} | {ph('total_comm_ms') if mddp else '—'} | "
                 f"{ph('optimizer_ms')} | {f'{ov * 100:.0f} %' if mddp and t not in ('mddp_1', 'mddp_2_nosync') and ov is not None else '—'} |")

    # (c) sweep
    if any(S["mddp_2_naive"]):
        L.append("")
        L.append("### (c) microddp, two ranks: DDP mode and bucket cap")
        L.append("")
        L.append("| mode | samples/s (global) | step ms | exposed comm ms | total all-reduce ms | overlap | "
                 "peak RSS MB / rank |")
        L.append("|---|---|---|---|---|---|---|")
        for t, name in [("mddp_2_naive", "naive"), ("mddp_2_hooked", "hooked"),
                        ("mddp_2_b0.25", "bucketed 0.25 MiB"), ("mddp_2_b1", "bucketed 1 MiB"),
                        ("mddp_2_b5", "bucketed 5 MiB"), ("mddp_2_bucketed", "bucketed 25 MiB (default)")]:
            ex = get(S[t], lambda j: j["phases_ms"]["exposed_comm_ms"])
            tot = get(S[t], lambda j: j["phases_ms"]["total_comm_ms"])
            ov = mval(get(S[t], lambda j: j["phases_ms"]["overlap"]))
            L.append(f"| {name} | {med(sps(t))} | {med(stp(t))} | {med(ex)} | {med(tot)} | "
                     f"{f'{ov * 100:.0f} %' if ov is not None else '—'} | {med(rss(t))} |")

one_rank = [os.path.basename(f)[:-len(".json")] for f in glob.glob(os.path.join(work, "*_1.json"))]
cpu1 = summary.clean([cpu_pct(work, name) for name in one_rank])
if cpu1 and statistics.median(cpu1) < 85:
    L.insert(4, f"**Warning: the machine was oversubscribed** — single-rank runs got a median {statistics.median(cpu1):.0f} % "
                "of a core (2-rank runs see the CPU% column). Throughputs are pessimistic for both sides; ratios of "
                "adjacent runs still compare like with like, but 2-rank scaling and overlap figures mostly show CPU "
                "contention (compute, the all-reduce threads and other jobs sharing too few cores).")
    L.insert(5, "")
summary.emit(L, out)
EOF
