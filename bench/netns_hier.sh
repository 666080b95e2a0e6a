#!/usr/bin/env bash
# The hierarchical all-reduce against the flat ring on emulated hosts with a
# slow link between them (docs/allreduce.md, "Hierarchical"):
# deploy/netns_lab.sh's hosts (a network and UTS namespace each: ranks on
# one host share memory, hosts talk TCP through a tc tbf rate limit),
# 2 hosts x 2 ranks.
#
# For each rate, --rounds rounds, the order of the two flipped every round:
#   1. `microddp bench allreduce --algo ring|hierarchical` (-b 1M -e 64M -f 4):
#      the slowest rank's mean time per size, and the bytes the two hosts'
#      links sent during the whole sweep, next to the formula's
#      (per all-reduce and host link: ring 2(n-1)/n S, hierarchical
#      2(H-1)/H S; times the sweep's all-reduces: 1 checked + warmup + iters);
#   2. a DDP job (FullMLP of width --width, synthetic data, bucketed DDP)
#      with --algo ring and --algo hierarchical: the median over steps of the
#      slowest rank's step time, after --skip steps.
# Prints markdown tables (and writes them to --out).
#
#   bench/netns_hier.sh [--rates "1gbit 10gbit"] [--rounds 2] [--iters 4] [--width 1578]
#                       [--steps 10] [--skip 3] [--out FILE.md]
#
# Needs root and iproute2; MICRODDP = the binary (default build/cli/microddp).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RATES="1gbit 10gbit"
ROUNDS=2
ITERS=4
WARMUP=1
WIDTH=1578  # 2W^2 + 12W + 10 = 5.0M parameters, a 20 MB gradient
STEPS=10
SKIP=3
OUT=""
parse_options "--rates:RATES --rounds:ROUNDS --iters:ITERS --width:WIDTH --steps:STEPS --skip:SKIP --out:OUT" "$@"
require_netns_lab "$STEPS" "$SKIP"
export MDDP_LAB="mddphb$$"
WORK="$(mktemp -d)"
trap 'bash "$LAB_SH" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
ROWS="$WORK/rows.jsonl"
: >"$ROWS"

echo "# netns_hier: 2 hosts x 2 ranks, rates '$RATES', $ROUNDS rounds; $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" >&2
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for rate in $RATES; do
  bash "$LAB_SH" up 3 --rate "$rate" >&2  # bench: hosts 0, 1; run: coordinator on 0, workers on 1, 2
  for ((round = 0; round < ROUNDS; round++)); do
    algos="ring hierarchical"
    ((round % 2 == 0)) || algos="hierarchical ring"
    for algo in $algos; do
      d="$WORK/$rate-$algo-$round"
      mkdir -p "$d"
      MDDP_LAB_DIR="$d" bash "$LAB_SH" bench 2x2 --algo "$algo" -b 1M -e 64M -f 4 --iters "$ITERS" \
        --warmup "$WARMUP" --timeout-ms 600000 --json "$d/bench.json" >"$d/bench.log" 2>&1 ||
        { tail -n 20 "$d/bench.log" >&2; die "$rate $algo: the bench failed"; }
      MDDP_LAB_DIR="$d/train" bash "$LAB_SH" run 2x2 --algo "$algo" --dataset synthetic --synthetic-size 4096 \
        --model mlp --width "$WIDTH" --depth 2 --classes 10 --batch 128 --steps "$STEPS" --no-eval \
        --optimizer sgd --lr 0.01 --ddp bucketed --run-dir "$d/run" >"$d/train.log" 2>&1 ||
        { tail -n 20 "$d/train.log" >&2; die "$rate $algo: the training job failed"; }
      /usr/bin/python3 - "$rate" "$algo" "$round" "$d" "$SKIP" "$((1 + WARMUP + ITERS))" >>"$ROWS" <<'PY'
import json, re, statistics, sys
rate, algo, rnd, d, skip, per_size = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
bench = json.load(open(f"{d}/bench.json"))
assert bench["ok"], f"{d}: wrong elements"
sent = [int(m.group(1)) for m in re.finditer(r"^# link of host \d .*: sent (\d+) B", open(f"{d}/bench.log").read(), re.M)]
H, n = 2, 4
per_link = (lambda S: 2 * (H - 1) / H * S) if algo == "hierarchical" else (lambda S: 2 * (n - 1) / n * S)
formula = sum(per_size * per_link(r["bytes"]) for r in bench["results"])
steps = {}
for line in open(f"{d}/run/metrics.jsonl"):
    r = json.loads(line)
    if r.get("kind") == "step" and r["step"] >= skip:
        steps.setdefault(r["step"], []).append(r)
step_ms = statistics.median(max(x["step_ms"] for x in v) for v in steps.values() if len(v) == n)
print(json.dumps({"rate": rate, "algo": algo, "round": rnd,
                  "times": {r["bytes"]: r["time_us"] for r in bench["results"]},
                  "xhost": {r["bytes"]: r["cross_host_bytes"] for r in bench["results"]},
                  "link_sent": sent, "link_formula": formula, "step_ms": step_ms}))
PY
    done
  done
  bash "$LAB_SH" down >&2
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

table="$(/usr/bin/python3 - "$ROWS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rates = list(dict.fromkeys(r["rate"] for r in rows))
def pick(rate, algo): return [r for r in rows if r["rate"] == rate and r["algo"] == algo]
print("All-reduce, 2 hosts x 2 ranks, fp32 sum: time (ms, median over rounds [min..max]), ring / hierarchical per round then the median.\n")
print("| link | size | flat ring ms | hierarchical ms | speed-up | cross-host bytes ring / hier (counted) | formula 2(n-1)/n·S·H / 2(H-1)·S |")
print("|---|---|---|---|---|---|---|")
for rate in rates:
    ring, hier = pick(rate, "ring"), pick(rate, "hierarchical")
    for size in ring[0]["times"]:
        rt = [r["times"][size] / 1e3 for r in ring]
        ht = [r["times"][size] / 1e3 for r in hier]
        ratio = statistics.median(a / b for a, b in zip(rt, ht))
        S = int(size)
        fmt = lambda v: f"{statistics.median(v):.1f} [{min(v):.1f}..{max(v):.1f}]"
        print(f"| {rate} | {S >> 20} MiB | {fmt(rt)} | {fmt(ht)} | {ratio:.2f}x "
              f"| {ring[0]['xhost'][size]} / {hier[0]['xhost'][size]} | {2 * 3 * S // 4 * 2} / {2 * S} |")
print("\nBytes sent by each host's link (tx_bytes of the namespace's eth0) over a whole sweep, against the formula's payload:\n")
print("| link | algo | host 0 sent | host 1 sent | formula (payload) | measured / formula |")
print("|---|---|---|---|---|---|")
for rate in rates:
    for algo in ("ring", "hierarchical"):
        r = pick(rate, algo)[0]
        print(f"| {rate} | {algo} | {r['link_sent'][0]} | {r['link_sent'][1]} | {r['link_formula']:.0f} "
              f"| {statistics.mean(r['link_sent']) / r['link_formula']:.3f} |")
print("\nDDP training step (FullMLP, bucketed DDP, global batch 128), median over steps of the slowest rank:\n")
print("| link | flat ring step ms | hierarchical step ms | speed-up |")
print("|---|---|---|---|")
for rate in rates:
    rs = [r["step_ms"] for r in pick(rate, "ring")]
    hs = [r["step_ms"] for r in pick(rate, "hierarchical")]
    print(f"| {rate} | {statistics.median(rs):.1f} | {statistics.median(hs):.1f} "
          f"| {statistics.median(a / b for a, b in zip(rs, hs)):.2f}x |")
PY
)"
echo "$table"
[[ -z "$OUT" ]] || echo "$table" >"$OUT"
