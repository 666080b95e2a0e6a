#!/usr/bin/env bash
# --compress side by side in one run: the same job (Fashion-MNIST by default,
# N ranks on this host, `microddp run`) trained with each setting for the
# same epochs; per setting the test accuracy after each epoch, the wall time
# of the run, the mean step time, the bytes each rank sent per step and the
# compression ratio actually achieved (from `microddp analyze --json`), and
# the time to a target test accuracy: the training time (the slowest rank's
# step times summed, evaluations not counted) until the first epoch-end
# evaluation at or above --target.
# Rounds alternate the settings' order; times are medians [min..max] over
# rounds, the accuracy is round 1's (a run is deterministic: same seed, same
# data order, same sums).
#
# With --rate R (e.g. 100mbit, 1gbit; needs root and iproute2) the ranks run
# in the slow-network lab instead (deploy/netns_lab.sh, lab name
# $MDDP_LAB, default mddp): one network namespace per rank, every link
# limited to R by tc tbf, TCP across them.
#
# Usage: bench/compression.sh [--nproc N] [--epochs E] [--rounds R] [--settings "none fp16 ..."] [--target PCT]
#                             [--transport tcp|shm | --rate R] [--out FILE.md] [--keep DIR]
#                             [-- TRAINING FLAGS...]
# Defaults: 2 ranks, 2 epochs, target 85 (% test accuracy), tcp (loopback), settings
# "none fp16 bf16 topk:0.01 topk:0.1 powersgd:1 powersgd:4"; training flags
# after `--` go to every run (e.g. -- --model cnn --optimizer sgd --lr 0.05).
# Environment: MICRODDP (default: <repo>/build/cli/microddp).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nproc=2
epochs=2
rounds=2
target=85
transport=tcp
rate=""
settings="none fp16 bf16 topk:0.01 topk:0.1 powersgd:1 powersgd:4"
out=""
keep=""
extra=()

while [[ $# -gt 0 ]]; do
  case $1 in
    --nproc) nproc=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --settings) settings=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done

require_microddp
[[ -z $out ]] || out=$(realpath -m "$out")
make_work_dir microddp-compression
per_run_timeout=3000
machine_info > "$work/env.txt"
echo "command: $0 --nproc $nproc --epochs $epochs --rounds $rounds --target $target --transport $transport${rate:+ --rate $rate} --settings '$settings' -- ${extra[*]}" >> "$work/env.txt"
lab=$root/deploy/netns_lab.sh
if [[ -n $rate ]]; then
  bash "$lab" up $((nproc + 1)) --rate "$rate" > /dev/null
  trap 'bash "$lab" down > /dev/null 2>&1 || true' EXIT
fi

read -r -a order <<< "$settings"
for ((r = 1; r <= rounds; r++)); do
  for ((j = 0; j < ${#order[@]}; j++)); do
    if (( r % 2 )); then s=${order[j]}; else s=${order[${#order[@]} - 1 - j]}; fi
    name=${s//:/-}.r$r
    if [[ -n $rate ]]; then  # coordinator on lab host 0, rank i on host i+1
      run "$name" env MICRODDP="$MICRODDP" MDDP_LAB_DIR="$work/$name.lab" bash "$lab" run "$nproc" --epochs "$epochs" \
          --compress "$s" --run-dir "$work/$name" --http-port -1 "${extra[@]}"
    else
      run "$name" "$MICRODDP" run --nproc "$nproc" --epochs "$epochs" --transport "$transport" --compress "$s" \
          --run-dir "$work/$name" --port 0 --http-port -1 "${extra[@]}"
    fi
    "$MICRODDP" analyze "$work/$name" --json --no-report > "$work/$name.analysis.json" 2> "$work/$name.analyze.err" ||
      rm -f "$work/$name.analysis.json"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$work/env.txt"

"$PY" - "$work" "$settings" "$rounds" "$target" > "$work/summary.md" <<'PYEOF'
import json, os, re, statistics, sys
work, settings, rounds, target = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), float(sys.argv[4]) / 100
def spread(xs, fmt):
    return f"{fmt(statistics.median(xs))} [{fmt(min(xs))}..{fmt(max(xs))}]" if len(xs) > 1 else fmt(xs[0])
def seconds(t):  # /usr/bin/time's m:ss.cc or h:mm:ss
    parts = [float(x) for x in t.split(":")]
    return sum(v * 60 ** i for i, v in enumerate(reversed(parts)))
def to_target(run):  # training seconds until the first evaluation at or above the target; None: not reached
    hits = [e["train_s"] for e in sorted(run["evals"], key=lambda e: e["step"])
            if e["accuracy"] >= target and e["train_s"] is not None]
    return hits[0] if hits else None
print(f"| --compress | test accuracy % after each epoch | wall s | step ms | step vs none | MiB sent per rank and step | ratio | exposed comm ms | train s to {100 * target:g} % |")
print("|---|---|---|---|---|---|---|---|---|")
base = None
for s in settings:
    name = s.replace(":", "-")
    runs = [json.load(open(f"{work}/{name}.r{r}.analysis.json")) for r in range(1, rounds + 1)
            if os.path.exists(f"{work}/{name}.r{r}.analysis.json")]
    if not runs:
        print(f"| {s} | failed (see {name}.r1.log) | | | | | | | |")
        continue
    accs = {e["step"]: e["accuracy"] for e in runs[0]["evals"]}  # every rank reports the same evaluation
    steps = [a["phases_ms"]["step"]["mean"] for a in runs]
    walls = [seconds(re.search(r"Elapsed \(wall clock\) time.*: (\S+)", open(f"{work}/{name}.r{r}.time").read()).group(1))
             for r in range(1, rounds + 1) if os.path.exists(f"{work}/{name}.r{r}.analysis.json")]
    c = runs[0]["communication"]
    times = [t for t in map(to_target, runs) if t is not None]
    med = statistics.median(steps)
    base = base or med
    print(f"| {s} | {' / '.join(f'{100 * accs[k]:.2f}' for k in sorted(accs))} | {spread(walls, lambda x: f'{x:.1f}')} | "
          f"{spread(steps, lambda x: f'{x:.2f}')} | {med / base:.2f} | {c['sent_bytes_per_step'] / 2**20:.3f} | "
          f"{c['compression_ratio']:.1f}x | {spread([a['communication']['exposed_ms_per_step'] for a in runs], lambda x: f'{x:.2f}')} | "
          f"{spread(times, lambda x: f'{x:.1f}') if len(times) == len(runs) else 'not reached'} |")
PYEOF
cat "$work/env.txt" "$work/summary.md"
[[ -z $out ]] || { cat "$work/env.txt" "$work/summary.md" > "$out"; echo "wrote $out"; }
