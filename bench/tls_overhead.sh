#!/usr/bin/env bash
# Does TLS on the control plane slow training down? The same `microddp run`
# job with --tls (mutual TLS to the coordinator: heartbeats, the metrics
# stream, the store) and without, interleaved rounds with the order flipped
# every round, medians and the per-round ratio. Samples/s come from rank 0's
# records in metrics.jsonl after WARMUP steps (bench/samples_per_s.py), so
# start-up (and making the throw-away certificates) does not count. The data
# plane is the same on both sides: TLS covers the control plane only.
#
#   bash bench/tls_overhead.sh                      # 7 rounds, 2 ranks, 1500 steps
#   ROUNDS=9 NPROC=2 STEPS=3000 BUILD=build-x bash bench/tls_overhead.sh [extra run flags]
#
# Target: no measurable change (ratio within the rounds' own spread of 1.00).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/cli/microddp
ROUNDS=${ROUNDS:-7}
NPROC=${NPROC:-2}
STEPS=${STEPS:-1500}
WARMUP=${WARMUP:-50}
BATCH=64
[[ -x $BIN ]] || { echo "missing $BIN: cmake --build $BUILD --target microddp" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# one_run [run flags...]: samples/s of one job
one_run() {
  local dir
  dir=$(mktemp -d "$WORK/run.XXXX")
  "$BIN" run --nproc "$NPROC" --steps "$STEPS" --batch $BATCH --http-port -1 --run-dir "$dir/run" "$@" \
    >"$dir/out" 2>&1 || { cat "$dir/out" >&2; echo "FAILED: microddp run $* failed" >&2; exit 1; }
  python3 bench/samples_per_s.py "$dir/run/metrics.jsonl" $BATCH "$WARMUP"
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores;" \
  "run --nproc $NPROC --steps $STEPS --batch $BATCH $*"
declare -a plain tls
printf '%-6s %-14s %-14s %s\n' round "no TLS" "--tls" ratio
for r in $(seq "$ROUNDS"); do
  if ((r % 2)); then
    a=$(one_run "$@"); b=$(one_run --tls "$@")
  else
    b=$(one_run --tls "$@"); a=$(one_run "$@")
  fi
  plain+=("$a"); tls+=("$b")
  printf '%-6s %-14s %-14s %s\n' "$r" "$a" "$b" "$(python3 -c "print(f'{$b/$a:.3f}')")"
done
python3 - "${plain[*]}" "${tls[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ratios = sorted(y / x for x, y in zip(a, b))
print(f"median samples/s: {statistics.median(a):.1f} without TLS, {statistics.median(b):.1f} with; "
      f"ratio (TLS / none) median {statistics.median(ratios):.3f} [min {ratios[0]:.3f} .. max {ratios[-1]:.3f}]")
PY
