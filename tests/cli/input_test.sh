#!/usr/bin/env bash
# Inputs refused where the flag is parsed: one clear line on stderr, exit 1,
# before anything starts (no rank forked, no port opened, no memory asked).
#   input_test.sh MICRODDP
set -uo pipefail
BIN="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; [[ -f $WORK/out ]] && cat "$WORK/out"; exit 1; }

# refused WANT ARGS...: microddp ARGS exits 1 within 20 s with one line that matches WANT.
refused() {
  local want="$1"; shift
  timeout 20 "$BIN" "$@" >"$WORK/out" 2>&1
  local rc=$?
  [[ $rc -eq 1 ]] || fail "microddp $*: exit $rc, want 1"
  [[ $(grep -c . "$WORK/out") -eq 1 ]] || fail "microddp $*: want one line"
  grep -q -- "$want" "$WORK/out" || fail "microddp $*: want '$want'"
}

LONG_ID="$(printf 'j%.0s' {1..257})"
for cmd in coordinator worker run; do
  refused "--job-id: .*257 bytes long, at most 256" $cmd --job-id "$LONG_ID"
done
refused "--nproc: 300 ranks on one host is more than it runs well" demo ring --nproc 300
refused "--nproc: 300 ranks" run --nproc 300
refused "--seed: '-1' is outside \[0," train --seed -1
refused "--steps: '1e20' is outside \[0," train --steps 1e20
refused "--steps: '2.5' is not a whole number" train --steps 2.5
# An integer's lower bound is said as one, not as a range up to DBL_MAX.
refused "--layers: '-3' is less than 1 (see --help)" train --model gpt --layers -3
refused "--warmup: '-1' is less than 0 (see --help)" analyze --warmup -1 "$WORK"
refused "-e 99999G asks for .* per rank (2 ranks here: .*), but this machine has .* available" \
  bench allreduce --nproc 2 -b 4K -e 99999G
# Timeouts that cannot nest (docs/failures.md, "Timeouts").
refused "--comm-timeout-ms 5000 must be longer than --heartbeat-timeout-ms 5000: a collective waiting" \
  run --nproc 2 --comm-timeout-ms 5000
refused "--comm-timeout-ms 9000 must be longer than --heartbeat-timeout-ms 10000" \
  coordinator --world-size 2 --comm-timeout-ms 9000
refused "--heartbeat-timeout-ms 1000 must be longer than two --heartbeat-ms 500" run --nproc 2 --heartbeat-timeout-ms 1000
refused "--elastic-wait-s 130 must be shorter than --rendezvous-timeout-s 120" \
  run --nproc 2 --min-nproc 1 --batch 64 --elastic-wait-s 130
# The notation the README uses for sizes is accepted, and means what it says.
"$BIN" model --params 5e6 --world-size 4 --bandwidth-gbps 10 >"$WORK/model" 2>&1 || { cat "$WORK/model"; fail "--params 5e6 refused"; }
"$BIN" model --params 5000000 --world-size 4 --bandwidth-gbps 10 >"$WORK/model_digits" 2>&1
cmp -s "$WORK/model" "$WORK/model_digits" || fail "--params 5e6 differs from --params 5000000"
echo PASS
