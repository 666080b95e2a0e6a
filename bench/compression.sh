#!/usr/bin/env bash
# --compress side by side in one run: the same job (Fashion-MNIST by default,
# N ranks on this host, `microddp run`) trained with each setting for the
# same epochs; per setting the test accuracy after each epoch, the wall time
# of the run, the mean step time, the bytes each rank sent per step and the
# compression ratio actually achieved (from `microddp analyze --json`).
#
# Usage: bench/compression.sh [--nproc N] [--epochs E] [--settings "none fp16 ..."]
#                             [--transport tcp|shm] [--out FILE.md] [--keep DIR] [-- TRAINING FLAGS...]
# Defaults: 2 ranks, 2 epochs, tcp (loopback), settings
# "none fp16 bf16 topk:0.01 topk:0.1 powersgd:1 powersgd:4"; training flags
# after `--` go to every run (e.g. -- --model cnn --optimizer sgd --lr 0.05).
# Environment: MICRODDP (default: <repo>/build/cli/microddp).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nproc=2
epochs=2
transport=tcp
settings="none fp16 bf16 topk:0.01 topk:0.1 powersgd:1 powersgd:4"
out=""
keep=""
extra=()

while [[ $# -gt 0 ]]; do
  case $1 in
    --nproc) nproc=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --settings) settings=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
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
echo "command: $0 --nproc $nproc --epochs $epochs --transport $transport --settings '$settings' -- ${extra[*]}" >> "$work/env.txt"

for s in $settings; do
  name=${s//:/-}
  run "$name" "$MICRODDP" run --nproc "$nproc" --epochs "$epochs" --transport "$transport" --compress "$s" \
      --run-dir "$work/$name" --port 0 --http-port -1 "${extra[@]}"
  "$MICRODDP" analyze "$work/$name" --json --no-report > "$work/$name.analysis.json" 2> "$work/$name.analyze.err" ||
    rm -f "$work/$name.analysis.json"
done

"$PY" - "$work" "$settings" "$epochs" > "$work/summary.md" <<'PYEOF'
import json, os, re, sys
work, settings, epochs = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
def mib(b): return f"{b / 2**20:.3f}" if b else "-"
rows = []
base_step = None
for s in settings:
    name = s.replace(":", "-")
    path = os.path.join(work, name + ".analysis.json")
    if not os.path.exists(path):
        rows.append(f"| {s} | failed (see {name}.log) | | | | | |")
        continue
    a = json.load(open(path))
    accs = [e["accuracy"] for e in a["evals"]]
    c = a["communication"]
    step = a["phases_ms"]["step"]["mean"]
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", open(os.path.join(work, name + ".time")).read()).group(1)
    if base_step is None: base_step = step
    rows.append(f"| {s} | {' / '.join(f'{100 * x:.2f}' for x in accs)} | {wall} | {step:.2f} ({step / base_step:.2f}x) | "
                f"{mib(c['sent_bytes_per_step'])} | {c['compression_ratio']:.1f}x | {c['exposed_ms_per_step']:.2f} |")
print("| --compress | test accuracy % after each epoch | wall time | step ms (vs first) | MiB sent per rank and step | ratio | exposed comm ms |")
print("|---|---|---|---|---|---|---|")
print("\n".join(rows))
PYEOF
cat "$work/env.txt" "$work/summary.md"
[[ -z $out ]] || { cat "$work/env.txt" "$work/summary.md" > "$out"; echo "wrote $out"; }
