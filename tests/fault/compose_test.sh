#!/usr/bin/env bash
# The compose files of deploy/ are valid (docker-compose parses and merges
# them without a Docker engine); skips (exit 77) where docker-compose is not
# installed (Debian: apt-get install docker-compose).
#   compose_test.sh DEPLOY_DIR
set -uo pipefail
DEPLOY="$1"
command -v docker-compose >/dev/null || { echo "SKIP: docker-compose is not installed"; exit 77; }
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*"; cat "$OUT"; exit 1; }

docker-compose -f "$DEPLOY/docker-compose.yml" config >"$OUT" 2>&1 || fail "docker-compose.yml does not validate"
for s in coordinator worker0 worker1 worker2 worker3; do grep -q "^  $s:" "$OUT" || fail "no service $s"; done
grep -q "published: 29500" "$OUT" || fail "the coordinator port is not published"
docker-compose -f "$DEPLOY/docker-compose.yml" -f "$DEPLOY/docker-compose.gpu.yml" config >"$OUT" 2>&1 ||
  fail "docker-compose.gpu.yml does not merge"
grep -q "MICRODDP_CUDA: 'ON'\|MICRODDP_CUDA: \"ON\"\|MICRODDP_CUDA: ON" "$OUT" || fail "the GPU override does not build with CUDA"
[[ $(grep -c "driver: nvidia" "$OUT") -eq 4 ]] || fail "want one GPU reservation per worker"
echo "PASS: compose files validate"
