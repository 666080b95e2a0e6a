#!/usr/bin/env bash
# `run` without --run-dir keeps a failed run's logs in $TMPDIR (its error
# names them) and removes, when it starts, those older than a day whose run
# is gone; a recent one, or one whose run lives, stays.
#   stale_logs_test.sh MICRODDP
set -uo pipefail
BIN="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; [[ -f $WORK/out ]] && cat "$WORK/out"; exit 1; }

sleep 0 & DEAD=$!; wait "$DEAD"  # a pid that no longer runs
OLD="$WORK/microddp-logs-$DEAD-aaaaaa" NEW="$WORK/microddp-logs-$DEAD-bbbbbb" LIVE="$WORK/microddp-logs-$$-cccccc"
mkdir "$OLD" "$NEW" "$LIVE"
touch -d '2 days ago' "$OLD" "$LIVE"
TMPDIR="$WORK" timeout 120 "$BIN" run --nproc 1 --http-port -1 --dataset synthetic --synthetic-size 64 \
  --width 8 --batch 8 --steps 2 --no-eval >"$WORK/out" 2>&1 || fail "the run failed"
[[ ! -e $OLD ]] || fail "the old logs of a gone run were kept"
[[ -d $NEW ]] || fail "the recent logs of a gone run were removed"
[[ -d $LIVE ]] || fail "the logs of a live run were removed"
grep -q "removed 1 log directory" "$WORK/out" || fail "the removal was not said"
echo PASS
