#!/usr/bin/env bash
# Which engine runs the collectives (docs/backends.md): microddp's own ring
# over its TCP and shared-memory transports against gloo inside microddp
# (`--backend gloo`: Debian's libgloo under the same reducer, buckets and
# hooks), side by side in one run: interleaved rounds (the order flips every
# round), medians [min..max], ratios taken per round.
#
# Per round:
#   * `microddp bench allreduce`, fp32 sum, 2 and 4 ranks (--nprocs), sizes
#     4 KiB .. 64 MiB, factor 4 (the small sizes with many iterations, the
#     large ones with few): --backend gloo, and --backend cpu --algo ring
#     with --transport tcp and with --transport shm;
#   * `microddp bench train` (FullMLP: 16 x Linear(W, W), MSE, SGD; global
#     batch B; bucketed DDP with the default caps) on --train-nproc ranks with
#     each of the three engines, for each W x B of --configs.
#
# Usage: bench/engines.sh [--quick] [--rounds N] [--nprocs "2 4"] [--train-nproc 2]
#                         [--configs "256x64 1024x256"] [--out FILE.md] [--keep DIR]
#                         [--summarize DIR]
# --quick: 1 round, few iterations (a smoke test). --summarize DIR: no runs;
# only the summary of a directory kept with --keep.
# Environment: MICRODDP (default: <repo>/build/cli/microddp, built with gloo:
# libgloo-dev installed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=3
quick=0
nprocs="2 4"
train_nproc=2
configs="256x64 1024x256"
out=""
keep=""
summarize=""
run_width=36
run_cpu=1
parse_options "--quick:quick=1 --rounds:rounds --nprocs:nprocs --train-nproc:train_nproc --configs:configs \
  --out:out --keep:keep --summarize:summarize" "$@"
(( quick )) && rounds=1

[[ -z $out ]] || out=$(realpath -m "$out")
if [[ -n $summarize ]]; then
  work=$summarize
  rounds=$(kept_rounds '*.json')
else
require_microddp
"$MICRODDP" bench allreduce --backend gloo --nproc 1 -b 4K -e 4K --iters 1 --warmup 0 >/dev/null 2>&1 ||
  die "$MICRODDP cannot run --backend gloo (built without libgloo-dev?)"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

make_work_dir engines

# Iterations (warm-up, timed): all-reduce 4K..1M, 4M..64M; training steps.
if (( quick )); then small=(10 50); large=(1 3); steps=(2 5)
else small=(20 200); large=(2 10); steps=(3 10); fi

{
  machine_info
  echo "microddp: $MICRODDP ($(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'), working tree may differ)"
  echo "gloo: $("$MICRODDP" bench allreduce --backend gloo --nproc 1 -b 4K -e 4K --iters 1 --warmup 0 2>&1 |
    grep -o 'gloo [0-9.]*' | head -1 || echo '?')"
  echo "iterations: all-reduce 4K..1M ${small[0]}+${small[1]}, 4M..64M ${large[0]}+${large[1]}; training ${steps[0]}+${steps[1]} steps (warm-up+timed)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$work/env.txt"
cat "$work/env.txt"

engine_flags() {  # gloo|tcp|shm
  case $1 in
    gloo) echo "--backend gloo" ;;
    *) echo "--backend cpu --algo ring --transport $1" ;;
  esac
}
allreduce() {  # NAME small|large NPROC ENGINE
  local sizes
  if [[ $2 == small ]]; then sizes="-b 4K -e 1M --warmup ${small[0]} --iters ${small[1]}"
  else sizes="-b 4M -e 64M --warmup ${large[0]} --iters ${large[1]}"; fi
  # shellcheck disable=SC2046,SC2086
  run "$1" "$MICRODDP" bench allreduce --nproc "$3" $(engine_flags "$4") -f 4 $sizes --json "$work/$1.json"
}
train() {  # NAME NPROC WxB ENGINE
  # shellcheck disable=SC2046
  run "$1" "$MICRODDP" bench train --nproc "$2" --width "${3%x*}" --batch "${3#*x}" $(engine_flags "$4") \
    --warmup "${steps[0]}" --iters "${steps[1]}" --json "$work/$1.json"
}

start=$SECONDS
for ((r = 0; r < rounds; r++)); do
  jobs=()
  for n in $nprocs; do
    for part in small large; do
      for e in gloo tcp shm; do jobs+=("allreduce r${r}_ar_n${n}_${part}_$e $part $n $e"); done
    done
  done
  for c in $configs; do
    for e in gloo tcp shm; do jobs+=("train r${r}_train_n${train_nproc}_${c}_$e $train_nproc $c $e"); done
  done
  echo "round $((r + 1))/$rounds"
  run_round "$r"
done
finish_env "$start"
fi

write_summary "$work" "$rounds" "$out" <<'EOF_PY'
import glob, json, os, re, sys

import summary
from summary import fmt, med, mval, ratio

work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
R = range(rounds)
KiB, MiB = 1 << 10, 1 << 20
ENGINES = [("gloo", "gloo (its ring, TCP)"), ("tcp", "microddp ring, TCP"), ("shm", "microddp ring, shm")]


def load(name):
    f = os.path.join(work, name + ".json")
    try:
        return json.load(open(f))
    except (OSError, ValueError):
        return None


def hsize(b):
    return f"{b // MiB} MiB" if b >= MiB else f"{b // KiB} KiB"


names = [os.path.basename(f)[:-5] for f in glob.glob(os.path.join(work, "r*_*.json"))]
nprocs = sorted({int(m[1]) for n in names for m in [re.match(r"r\d+_ar_n(\d+)_", n)] if m})
trains = sorted({(int(m[1]), m[2]) for n in names for m in [re.match(r"r\d+_train_n(\d+)_(\d+x\d+)_", n)] if m})

L = ["# Engines: microddp's own transports vs gloo inside microddp", ""]
L.append(f"Median [min..max] over {rounds} interleaved round(s) (order flipped every round); ratios are taken per "
         "round (adjacent runs) and then the median. All-reduce: fp32 sum, busbw = 2(n-1)/n · S / t. "
         "`CPU%` is the share of one core a run got (all ranks together).")
L += ["", "```"] + summary.env_lines(work) + ["```", ""]

for n in nprocs:
    rows = {}
    for e, _ in ENGINES:
        for r in R:
            for part in ("small", "large"):
                d = load(f"r{r}_ar_n{n}_{part}_{e}")
                for x in (d or {}).get("results", []):
                    if x.get("wrong", 0) == 0:
                        rows.setdefault(x["bytes"], {}).setdefault(e, [None] * rounds)[r] = x
    sizes = sorted(rows)
    val = lambda s, e, key: [x[key] if x else None for x in rows[s].get(e, [None] * rounds)]
    L.append(f"## All-reduce, {n} ranks: busbw GB/s")
    L.append("")
    L.append("| size | " + " | ".join(t for _, t in ENGINES) + " | TCP ÷ gloo | shm ÷ gloo |")
    L.append("|---" * (len(ENGINES) + 3) + "|")
    for s in sizes:
        b = {e: val(s, e, "busbw_gbps") for e, _ in ENGINES}
        L.append(f"| {hsize(s)} | " + " | ".join(med(b[e]) for e, _ in ENGINES) +
                 f" | {med(ratio(b['tcp'], b['gloo']))} | {med(ratio(b['shm'], b['gloo']))} |")
    L.append("")
    L.append(f"Time per all-reduce, µs (median), {n} ranks:")
    L.append("")
    L.append("| size | " + " | ".join(t for _, t in ENGINES) + " |")
    L.append("|---" * (len(ENGINES) + 1) + "|")
    for s in sizes:
        L.append(f"| {hsize(s)} | " + " | ".join(fmt(mval(val(s, e, "time_us"))) for e, _ in ENGINES) + " |")
    L.append("")
    L.append("CPU share: " + "; ".join(
        f"{t} {med([summary.cpu_pct(work, f'r{r}_ar_n{n}_{p}_{e}') for r in R for p in ('small', 'large')], lambda x: f'{x:.0f}')} %"
        for e, t in ENGINES) + ".")
    L.append("")

if trains:
    L.append("## Training throughput (`microddp bench train`, bucketed DDP)")
    L.append("")
    L.append("samples/s (global); exposed communication per step in ms (median over rounds of the mean over ranks); CPU% of one core, all ranks together.")
    L.append("")
    L.append("| ranks | W×B | " + " | ".join(f"{t} samples/s" for _, t in ENGINES) +
             " | TCP ÷ gloo | shm ÷ gloo | exposed comm ms gloo / TCP / shm | CPU% gloo / TCP / shm |")
    L.append("|---" * (len(ENGINES) + 6) + "|")
    for n, c in trains:
        d = {e: [load(f"r{r}_train_n{n}_{c}_{e}") for r in R] for e, _ in ENGINES}
        sps = {e: [x["samples_per_s"] if x else None for x in d[e]] for e in d}
        exp = {e: mval([x["phases_ms"].get("exposed_comm_ms") if x else None for x in d[e]]) for e in d}
        cpu = {e: mval([summary.cpu_pct(work, f"r{r}_train_n{n}_{c}_{e}") for r in R]) for e in d}
        L.append(f"| {n} | {c} | " + " | ".join(med(sps[e]) for e, _ in ENGINES) +
                 f" | {med(ratio(sps['tcp'], sps['gloo']))} | {med(ratio(sps['shm'], sps['gloo']))} | "
                 + " / ".join(fmt(exp[e]) for e, _ in ENGINES) + " | "
                 + " / ".join(f"{cpu[e]:.0f}" if cpu[e] is not None else "—" for e, _ in ENGINES) + " |")
    L.append("")

env = summary.env_lines(work)
loads = [float(m[1]) for l in env for m in [re.match(r"load average at (?:start|end): ([\d.]+)", l)] if m]
cores = next((int(l.split(":")[1]) for l in env if l.startswith("cores:")), 0)
if loads and cores and max(loads) > cores:
    L.insert(4, f"**Warning: the machine was busy** (load average {' → '.join(f'{x:.1f}' for x in loads)} on "
                f"{cores} cores): wall-clock numbers are pessimistic and small sizes measure scheduler wake-ups; "
                "ratios of adjacent runs in one round still compare like with like.")
    L.insert(5, "")
summary.emit(L, out)
EOF_PY
