#!/usr/bin/env bash
# The compose files of deploy/ are valid (docker-compose parses and merges
# them without a Docker engine); skips (exit 77) where docker-compose is not
# installed (Debian: apt-get install docker-compose). The lab itself runs in
# docker_lab_test.sh; the GPU override is only validated here (no GPU).
#   compose_test.sh DEPLOY_DIR
set -uo pipefail
DEPLOY="$1"
command -v docker-compose >/dev/null || { echo "SKIP: docker-compose is not installed"; exit 77; }
OUT="$(mktemp)"
GPU_OUT="$(mktemp)"
trap 'rm -f "$OUT" "$GPU_OUT"' EXIT
fail() { echo "FAIL: $*"; cat "$OUT"; exit 1; }

docker-compose -f "$DEPLOY/docker-compose.yml" config >"$OUT" 2>&1 || fail "docker-compose.yml does not validate"
for s in coordinator worker0 worker1 worker2 worker3; do grep -q "^  $s:" "$OUT" || fail "no service $s"; done
grep -q -- "- 127.0.0.1:29500:29500" "$OUT" || fail "the coordinator port is not published on the host's loopback"
grep -q -- "- 127.0.0.1:8080:8080" "$OUT" || fail "the dashboard is not published on the host's loopback"
grep -q -- "- --http-public-url=http://127.0.0.1:8080/" "$OUT" || fail "the coordinator does not print the host's URL"
docker-compose -f "$DEPLOY/docker-compose.yml" -f "$DEPLOY/docker-compose.gpu.yml" config >"$GPU_OUT" 2>&1 ||
  { cp "$GPU_OUT" "$OUT"; fail "docker-compose.gpu.yml does not merge"; }
grep -q "MICRODDP_CUDA: 'ON'\|MICRODDP_CUDA: \"ON\"\|MICRODDP_CUDA: ON" "$GPU_OUT" || fail "the GPU override does not build with CUDA"
[[ $(grep -c "driver: nvidia" "$GPU_OUT") -eq 4 ]] || fail "want one GPU reservation per worker"
# The override repeats the coordinator's command (compose replaces a list
# whole): it must be docker-compose.yml's plus --device=cuda.
python3 - "$OUT" "$GPU_OUT" <<'EOF' || fail "the GPU override's coordinator command is not docker-compose.yml's plus --device=cuda"
import sys, yaml
command = lambda path: yaml.safe_load(open(path))["services"]["coordinator"]["command"]
sys.exit(0 if command(sys.argv[2]) == command(sys.argv[1]) + ["--device=cuda"] else 1)
EOF
echo "PASS: compose files validate"
