#!/usr/bin/env bash
# The slow-network lab: communication overhead against model size,
# MEASURED on rate-limited links, next to the cost model's
# prediction from an alpha-beta fit measured on the same link.
#
# For each rate (tc tbf on every link of deploy/netns_lab.sh; netem is not
# available on these machines):
#   1. lab up: host 0 (coordinator) and hosts 1..N (one rank each), each in
#      its own network namespace with its own IP, links limited to the rate;
#   2. fit: `microddp bench allreduce --fit --algo ring --transport tcp` with
#      rank r in the namespace of host r+1 (--fit-netns): alpha and beta of
#      that link, stored in a fit file of this run;
#   3. train: the same job for each model size (FullMLP W-W-W-10, W picked
#      for about 1M, 5M and 20M parameters; synthetic data; SGD), bucketed
#      DDP with one bucket as large as the model, so each step does exactly
#      one all-reduce of the whole gradient after backward (no overlap);
#      per step the slowest rank's step time and exposed
#      communication, and the all-reduce time of the rank that joined it
#      last (the shortest across ranks: the others' include waiting for it,
#      as in `microddp analyze`), medians after the warm-up steps;
#   4. predict: `microddp model --fit` on that gradient size with the
#      measured compute time, and the bandwidth-only formula
#      2(n-1)/n S / beta at the nominal rate.
#
#   bench/netns_overhead.sh [--rates "1gbit 10gbit"] [--ranks 2] [--steps 12]
#                           [--skip 3] [--batch 32] [--sizes "1M:704 ..."]
#                           [--slow-start-after-idle 0|1] [--out FILE.md] [--keep DIR]
#
# --batch is per rank. Needs root and iproute2; MICRODDP = the binary
# (default build/cli/microddp). Prints a markdown table (and writes it to --out).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RATES="1gbit 10gbit"
RANKS=2
STEPS=12
SKIP=3
BATCH=32
OUT=""
KEEP=""
SSAI=""  # net.ipv4.tcp_slow_start_after_idle in the lab's hosts ("" = the kernel's default)
# Model sizes: name, width W of FullMLP(depth 2, 10 classes) on synthetic data,
# whose input is W wide (a square model): Linear(W,W), Linear(W,W),
# Linear(W,10) = 2W^2 + 12W + 10 parameters -> 1.00M, 5.00M, 20.0M.
SIZES="1M:704 5M:1578 20M:3159"

parse_options "--rates:RATES --ranks:RANKS --steps:STEPS --skip:SKIP --batch:BATCH --sizes:SIZES --out:OUT \
  --keep:KEEP --slow-start-after-idle:SSAI" "$@"
require_netns_lab "$STEPS" "$SKIP"

export MDDP_LAB="mddpov$$"
SUBNET="${MDDP_LAB_SUBNET:-10.77.0}"
WORK="${KEEP:-$(mktemp -d)}"
mkdir -p "$WORK"
cleanup() { bash "$LAB_SH" down >/dev/null 2>&1 || true; [[ -n "$KEEP" ]] || rm -rf "$WORK"; }
trap cleanup EXIT

# ns1,ns2,... and ip1,ip2,... of the ranks' hosts (1..N)
NS_LIST=""; IP_LIST=""
for ((r = 1; r <= RANKS; r++)); do
  NS_LIST+="${NS_LIST:+,}$MDDP_LAB-h$r"
  IP_LIST+="${IP_LIST:+,}$SUBNET.$((r + 1))"
done

ROWS="$WORK/rows.jsonl"
: >"$ROWS"
echo "# netns_overhead: rates '$RATES', tcp_slow_start_after_idle ${SSAI:-default}, $RANKS ranks, per-rank batch $BATCH, $STEPS steps (first $SKIP skipped); work in $WORK" >&2
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for rate in $RATES; do
  bash "$LAB_SH" up $((RANKS + 1)) --rate "$rate" >&2
  if [[ -n "$SSAI" ]]; then  # per namespace: TCP's restart from a small window after an idle gap
    for ((h = 0; h <= RANKS; h++)); do
      bash "$LAB_SH" exec "$h" sysctl -q -w net.ipv4.tcp_slow_start_after_idle="$SSAI"
    done
  fi
  fit="$WORK/fit-$rate.json"
  echo "## $rate: fitting alpha and beta on the lab's links" >&2
  "$MICRODDP" bench allreduce --fit --nproc "$RANKS" --algo ring --transport tcp -b 64K -e 64M -f 4 \
    --fit-rounds 3 --fit-budget-s 0.5 --fit-netns "$NS_LIST" --fit-bind "$IP_LIST" \
    --fit-out "$fit" --json "$WORK/fit-$rate-samples.json" | tee "$WORK/fit-$rate.txt" >&2
  for spec in $SIZES; do
    name="${spec%%:*}"; width="${spec##*:}"
    dir="$WORK/$rate-$name"
    rm -rf "$dir"; mkdir -p "$dir"
    echo "## $rate: $name parameters (width $width)" >&2
    MDDP_LAB_DIR="$dir" bash "$LAB_SH" run "$RANKS" --dataset synthetic --synthetic-size 4096 --model mlp \
      --width "$width" --depth 2 --classes 10 --batch $((BATCH * RANKS)) --steps "$STEPS" --no-eval \
      --optimizer sgd --lr 0.01 --ddp bucketed --bucket-mb 4096 --first-bucket-mb 4096 --transport tcp \
      --run-dir "$dir/run" >"$dir/lab.log" 2>&1 || { tail -n 20 "$dir/lab.log" >&2; die "the $rate/$name job failed"; }
    # Medians over steps: the slowest rank's step and exposed communication;
    # the all-reduce as the last rank to join it saw it, and how long the
    # first one waited for it (Note [Measured all-reduce time], core/perf/analysis.cc).
    read -r bytes step comm wait exposed < <(/usr/bin/python3 - "$dir/run/metrics.jsonl" "$SKIP" "$RANKS" <<'PY'
import json, statistics, sys
path, skip, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steps = {}
for line in open(path):
    r = json.loads(line)
    if r.get("kind") != "step" or r["step"] < skip:
        continue
    steps.setdefault(r["step"], []).append(r)
full = [v for v in steps.values() if len(v) == n]
if not full:
    sys.exit(f"{path}: no complete step after {skip}")
med = lambda key, f=max: statistics.median(f(x[key] for x in v) for v in full)
comm = lambda v: [x["total_comm_ms"] for x in v]
wait = statistics.median(max(comm(v)) - min(comm(v)) for v in full)
print(max(x["comm_bytes"] for v in full for x in v), med("step_ms"), med("total_comm_ms", min), wait,
      med("exposed_comm_ms"))
PY
)
    compute=$(/usr/bin/python3 -c "print(max(0.0, $step - $exposed))")
    model_json="$("$MICRODDP" model --bytes "$bytes" --world-size "$RANKS" --fit --fit-file "$fit" --transport tcp \
      --algorithm ring --compute-ms "$compute" --scaling weak --json)"
    /usr/bin/python3 - "$rate" "$name" "$width" "$bytes" "$step" "$comm" "$wait" "$exposed" "$compute" "$RANKS" \
      "$model_json" >>"$ROWS" <<'PY'
import json, sys
rate, name, width, b, step, comm, wait, exposed, compute, n, model = sys.argv[1:]
b, step, comm, wait, exposed, compute, n = map(float, (b, step, comm, wait, exposed, compute, n))
n = int(n)
row = json.loads(model)["rows"][0]
gbit = float(rate.replace("gbit", ""))
bw_ms = b * 2 * (n - 1) / n / (gbit * 1e9 / 8) * 1e3  # 2(n-1)/n S / beta at the nominal rate
print(json.dumps({"rate": rate, "model": name, "width": int(width), "bytes": b, "params": b / 4,
  "step_ms": step, "compute_ms": compute, "comm_ms": comm, "wait_ms": wait, "exposed_ms": exposed,
  "overhead": exposed / step, "pred_comm_ms": row["allreduce_ms"], "pred_overhead": row["no_overlap"]["overhead"],
  "alpha_us": row["alpha_us"], "beta_gbps": row["beta_gbps"],
  "bw_only_comm_ms": bw_ms, "bw_only_overhead": bw_ms / (bw_ms + compute)}))
PY
  done
  bash "$LAB_SH" down >&2
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

table="$(/usr/bin/python3 - "$ROWS" "$RANKS" "$BATCH" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{sys.argv[2]} ranks, per-rank batch {sys.argv[3]}, one all-reduce of the whole gradient per step after backward (ring, tcp).\n")
print("| link | model | params | gradient MB | fit α µs / β GB/s | compute ms | all-reduce ms measured | predicted (fit) | error | first rank in waited ms | overhead measured | predicted (fit) | bandwidth-only formula at nominal rate |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    err = (r["pred_comm_ms"] - r["comm_ms"]) / r["comm_ms"] * 100
    print(f"| {r['rate']} | {r['model']} | {r['params']/1e6:.2f}M | {r['bytes']/1e6:.1f} | {r['alpha_us']:.0f} / {r['beta_gbps']:.3f} "
          f"| {r['compute_ms']:.1f} | {r['comm_ms']:.1f} | {r['pred_comm_ms']:.1f} | {err:+.0f}% | {r['wait_ms']:.1f} "
          f"| {r['overhead']*100:.0f}% | {r['pred_overhead']*100:.0f}% | {r['bw_only_overhead']*100:.0f}% |")
PY
)"
echo "$table"
[[ -z "$OUT" ]] || echo "$table" >"$OUT"
