#!/usr/bin/env bash
# DDP on a transformer (docs/transformer.md), on GPTs of growing size over
# the fortunes text (--dataset text:/usr/share/games/fortunes, 113 tokens):
#
#  1. alpha and beta of the shared-memory ring on 2 ranks
#     (`microddp bench allreduce --fit`, into the work directory);
#  2. per model (--models "LAYERS:HEADS:EMBD:BLOCK ..."), interleaved rounds
#     of `microddp bench train --model gpt --nproc 2 --ddp bucketed`: the
#     compute of a step (forward + backward + optimiser, mean over ranks)
#     and the all-reduces' time (their total on the progress thread, and
#     what the step waited for after backward); beside it, in the same
#     round, one all-reduce of the whole gradient alone (`microddp bench
#     allreduce -b 4P -e 4P`), and the time `microddp model --params P
#     --world-size 2 --fit` predicts, P counted as the GPT has them:
#     V C + T C + L (12 C^2 + 13 C) + 2 C;
#  3. ZeRO-1 with AdamW's two states on the largest model: --ddp bucketed
#     against --ddp sharded, the optimiser state and the RSS per rank after
#     the timed steps; and the same with plain SGD, which keeps no state, so
#     that AdamW's RSS minus SGD's is the state's share.
#
# Usage: bench/transformer.sh [--models "4:4:128:64 6:6:384:256"] [--batch B]
#                             [--rounds R] [--iters I] [--out FILE.md] [--keep DIR]
# Defaults: nanoGPT's CPU model, a wider one and nanoGPT's 10.8 M-parameter
# one; the global batch 12 (nanoGPT's CPU batch), 2 rounds of 3 timed steps
# after 1 warm-up step. Environment: MICRODDP (default: <repo>/build/cli/microddp).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

models="4:4:128:64 4:4:256:64 6:6:384:256"
batch=12
rounds=2
iters=3
out=""
keep=""
parse_options "--models:models --batch:batch --rounds:rounds --iters:iters --out:out --keep:keep" "$@"
require_microddp
make_work_dir microddp-transformer
machine_info > "$work/env.txt"
start=$SECONDS
data=text:/usr/share/games/fortunes
[[ -d /usr/share/games/fortunes ]] || die "needs Debian's fortunes package (apt-get install fortunes)"

echo "alpha-beta fit, shm ring, 2 ranks"
run fit "$MICRODDP" bench allreduce --fit --nproc 2 --algo ring --transport shm \
  --fit-rounds 5 --fit-out "$work/fit.json"

declare -A params
for m in $models; do
  IFS=: read -r l h c t <<< "$m"
  params[$m]=$((113 * c + t * c + l * (12 * c * c + 13 * c) + 2 * c))
done

# gpt_flags L:H:C:T [OPTIMIZER]
gpt_flags() {
  IFS=: read -r l h c t <<< "$1"
  echo "--model gpt --dataset $data --optimizer ${2:-adamw} --layers $l --heads $h --embd $c --block $t"
}
largest=${models##* }
for ((r = 0; r < rounds; r++)); do
  echo "round $((r + 1)) of $rounds"
  jobs=()
  for m in $models; do
    name="gpt_${m//:/_}_r$r"
    jobs+=("run $name $MICRODDP bench train $(gpt_flags "$m") --nproc 2 --batch $batch --warmup 1 --iters $iters --ddp bucketed --json $work/$name.json")
    bytes=$((4 * params[$m]))
    jobs+=("run ar_${m//:/_}_r$r $MICRODDP bench allreduce --nproc 2 --algo ring --transport shm -b $bytes -e $bytes --iters 5 --json $work/ar_${m//:/_}_r$r.json")
  done
  for opt in adamw sgd; do  # plain SGD keeps no state: the rest of the memory, for comparison
    for mode in bucketed sharded; do
      name="zero_${opt}_${mode}_r$r"
      jobs+=("run $name $MICRODDP bench train $(gpt_flags "$largest" $opt) --nproc 2 --batch $batch --warmup 1 --iters $iters --ddp $mode --json $work/$name.json")
    done
  done
  run_round "$r"
done
for m in $models; do
  "$MICRODDP" model --params "${params[$m]}" --world-size 2 --fit --fit-file "$work/fit.json" \
    --transport shm --json > "$work/model_${m//:/_}.json"
  echo "$m ${params[$m]}" >> "$work/params.txt"
done
finish_env "$start"

write_summary "$work" "$rounds" "$out" <<'PYEOF'
import json, os, sys
from summary import env_lines, fmt, med, mval, ratio, emit

work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def runs(name):
    found = []
    for r in range(rounds):
        p = os.path.join(work, f"{name}_r{r}.json")
        found.append(json.load(open(p)) if os.path.exists(p) else None)
    return found

def series(found, get):
    return [get(j) if j else None for j in found]

def compute(j):
    ph = j["phases_ms"]
    return ph["forward_ms"] + ph["backward_ms"] + ph["optimizer_ms"]

lines = ["# DDP on a transformer: communication against computation, ZeRO-1", "",
         *[f"    {l}" for l in env_lines(work)], ""]
fit = json.load(open(os.path.join(work, "fit.json")))
lines += [f"    fit: {json.dumps(fit)}", ""]
lines += ["| model L:H:C:T | parameters | compute ms/step | all-reduces ms/step in training (total) | exposed ms | one all-reduce of 4P alone, ms | predicted, ms | comm / compute: in training | alone | predicted |",
          "|---|---|---|---|---|---|---|---|---|---|"]
for row in open(os.path.join(work, "params.txt")):
    m, p = row.split()
    found = runs("gpt_" + m.replace(":", "_"))
    comp = series(found, compute)
    comm = series(found, lambda j: j["phases_ms"]["total_comm_ms"])
    exposed = series(found, lambda j: j["phases_ms"]["exposed_comm_ms"])
    key = m.replace(":", "_")
    pred = json.load(open(os.path.join(work, f"model_{key}.json")))["rows"][0]["allreduce_ms"]
    alone = series(runs("ar_" + key), lambda j: j["results"][0]["time_us"] / 1000)
    lines.append(f"| {m} | {int(p) / 1e6:.2f} M | {med(comp)} | {med(comm)} | {med(exposed)} | {med(alone)} | {fmt(pred)} | "
                 f"{med(ratio(comm, comp))} | {med(ratio(alone, comp))} | {med([pred / c if c else None for c in comp])} |")
def state_mb(j):
    return max(r["optimizer_state_mb"] for r in j["ranks"]) if "optimizer_state_mb" in j["ranks"][0] else None

def rss(j):
    return max(r["rss_mb"] for r in j["ranks"])

def diff(a, b):
    return [y - x if x is not None and y is not None else None for x, y in zip(a, b)]

# (a binary older than the optimiser state's report leaves its row empty)
adamw = {m: runs(f"zero_adamw_{m}") for m in ("bucketed", "sharded")}
sgd = {m: runs(f"zero_sgd_{m}") for m in ("bucketed", "sharded")}
rows = {
    "AdamW: optimiser state MB, max rank": {m: series(adamw[m], state_mb) for m in adamw},
    "AdamW: RSS after the steps MB, max rank": {m: series(adamw[m], rss) for m in adamw},
    "SGD (no state): RSS after the steps MB": {m: series(sgd[m], rss) for m in sgd},
    "AdamW − SGD: RSS MB, the state's share": {m: diff(series(sgd[m], rss), series(adamw[m], rss)) for m in adamw},
    "AdamW: peak RSS MB, max rank": {m: series(adamw[m], lambda j: max(j["peak_rss_mb"])) for m in adamw},
    "AdamW: optimiser ms/step": {m: series(adamw[m], lambda j: j["phases_ms"]["optimizer_ms"]) for m in adamw},
}
lines += ["", "| ZeRO-1, largest model | bucketed | sharded | sharded − bucketed |", "|---|---|---|---|"]
for name, v in rows.items():
    lines.append(f"| {name} | {med(v['bucketed'])} | {med(v['sharded'])} | {med(diff(v['bucketed'], v['sharded']))} |")
emit(lines, out)
PYEOF
