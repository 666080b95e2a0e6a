#!/usr/bin/env bash
# --precision fp32 vs bf16 (and fp16) side by side in one run: `microddp
# bench train` on 1 and 2 ranks per precision; per run the samples/s, the
# step time, the peak RSS per rank, and the communication per step (the
# all-reduce's total time and the part not hidden behind backward). Under
# bf16/fp16 DDP sends 16-bit gradients, so the change in communication time
# answers "how does FP16 affect communication overhead".
#
# Usage: bench/precision.sh [--nprocs "1 2"] [--precisions "fp32 bf16"] [--iters N] [-- BENCH TRAIN FLAGS...]
# Environment: MICRODDP (default: <repo>/build/cli/microddp), MICRODDP_BF16_GEMM=emulate
# (bf16 GEMMs as rounded inputs through the fp32 GEMM, to separate the
# kernel's speed from the rounding).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nprocs="1 2"
precisions="fp32 bf16"
iters=10
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --nprocs) nprocs=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/precision.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
require_microddp

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-6s %-6s %12s %10s %14s %12s %14s\n' ranks prec samples/s step_ms peak_rss_MB comm_ms exposed_ms
for n in $nprocs; do
  for p in $precisions; do
    "$MICRODDP" bench train --nproc "$n" --precision "$p" --iters "$iters" --json "$tmp/$n-$p.json" "${extra[@]}" >"$tmp/$n-$p.log" 2>&1 ||
      { cat "$tmp/$n-$p.log" >&2; echo "bench/precision.sh: bench train --nproc $n --precision $p failed" >&2; exit 1; }
    python3 - "$tmp/$n-$p.json" "$n" "$p" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ph = d["phases_ms"]
print(f"{sys.argv[2]:<6} {sys.argv[3]:<6} {d['samples_per_s']:12.1f} {d['step_ms']:10.2f} {max(d['peak_rss_mb']):14.0f} "
      f"{ph['total_comm_ms']:12.2f} {ph['exposed_comm_ms']:14.2f}")
PY
  done
done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
