#!/usr/bin/env bash
# --ddp sharded (ZeRO-1) against --ddp bucketed, side by side in one run:
# `microddp bench train --nproc N` of the benchmark model at W=1024 B=256
# and W=256 B=64, each optimiser given (default: sgd, momentum, adam), in
# interleaved rounds (order flipped every round). Per configuration:
# samples/s, the optimiser phase of a step (ms; sharded's includes the
# all-gather's wait), the peak RSS and the RSS after the timed steps per
# rank (MB; the peak includes start-up, where sharded mode briefly holds
# the unsharded state it takes over), medians [min..max] over
# rounds and the sharded/bucketed ratio taken per round. ZeRO-1 moves the
# same bytes as the all-reduce, so what it can win is the optimiser's 1/n
# of the work and of the state (docs/ddp.md "Sharded optimiser").
#
# Usage: bench/sharded.sh [--nproc N] [--rounds R] [--iters I] [--optimizers "sgd momentum adam"]
#                         [--out FILE.md] [--keep DIR]
# Defaults: 2 ranks, 3 rounds, 20 timed steps after 3 warm-up steps.
# Environment: MICRODDP (default: <repo>/build/cli/microddp).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nproc=2
rounds=3
iters=20
optimizers="sgd momentum adam"
out=""
keep=""
parse_options "--nproc:nproc --rounds:rounds --iters:iters --optimizers:optimizers --out:out --keep:keep" "$@"
require_microddp
make_work_dir microddp-sharded
machine_info > "$work/env.txt"
start=$SECONDS

optimizer_flags() {
  case $1 in
    sgd) echo "--optimizer sgd" ;;
    momentum) echo "--optimizer sgd --momentum 0.9" ;;
    adam) echo "--optimizer adam --lr 0.001" ;;
    *) echo "unknown optimiser '$1' (sgd, momentum, adam)" >&2; exit 1 ;;
  esac
}

for ((r = 0; r < rounds; r++)); do
  echo "round $((r + 1)) of $rounds"
  for shape in "1024 256" "256 64"; do
    read -r w b <<< "$shape"
    for opt in $optimizers; do
      flags=$(optimizer_flags "$opt")
      jobs=()
      for mode in bucketed sharded; do
        name="w${w}_b${b}_${opt}_${mode}_r$r"
        jobs+=("run $name $MICRODDP bench train --nproc $nproc --width $w --batch $b --warmup 3 --iters $iters $flags --ddp $mode --json $work/$name.json")
      done
      run_round "$r"
    done
  done
done
finish_env "$start"

write_summary "$work" "$rounds" "$optimizers" "$out" <<'PYEOF'
import json, os, sys
from summary import env_lines, med, ratio, emit

work, rounds, optimizers, out = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]

def series(w, b, opt, mode, get):
    vals = []
    for r in range(rounds):
        p = os.path.join(work, f"w{w}_b{b}_{opt}_{mode}_r{r}.json")
        vals.append(get(json.load(open(p))) if os.path.exists(p) else None)
    return vals

metrics = {
    "samples/s": lambda j: j["samples_per_s"],
    "optimizer ms": lambda j: j["phases_ms"]["optimizer_ms"],
    "peak RSS MB (max rank)": lambda j: max(j["peak_rss_mb"]),
    "RSS after the steps MB (max rank)": lambda j: max(r["rss_mb"] for r in j["ranks"]),
}
lines = ["# --ddp sharded vs bucketed", "", *[f"    {l}" for l in env_lines(work)], ""]
lines += ["| W | B | optimiser | measure | bucketed | sharded | sharded / bucketed |", "|---|---|---|---|---|---|---|"]
for w, b in [(1024, 256), (256, 64)]:
    for opt in optimizers:
        for name, get in metrics.items():
            bu = series(w, b, opt, "bucketed", get)
            sh = series(w, b, opt, "sharded", get)
            lines.append(f"| {w} | {b} | {opt} | {name} | {med(bu)} | {med(sh)} | {med(ratio(sh, bu))} |")
emit(lines, out)
PYEOF
