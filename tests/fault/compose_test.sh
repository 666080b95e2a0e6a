#!/usr/bin/env bash
# The compose files of deploy/ are valid (docker-compose parses and merges
# them without a Docker engine), with the lab's defaults and knobs: TLS on
# (MDDP_TLS=off turns it off), recovery on (--max-restarts, checkpoints,
# workers that re-join and restart; MDDP_MAX_RESTARTS=0 turns it off), the
# ports on the host's loopback only. Skips (exit 77) where docker-compose is
# not installed (Debian: apt-get install docker-compose). The lab itself runs
# in docker_lab_test.sh; the GPU override is only validated here (no GPU).
#   compose_test.sh DEPLOY_DIR
set -uo pipefail
DEPLOY="$1"
command -v docker-compose >/dev/null || { echo "SKIP: docker-compose is not installed"; exit 77; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# config NAME [VAR=VALUE...]: docker-compose config of docker-compose.yml
# (plus the GPU override for NAME=gpu) under those variables, into $WORK/NAME.
config() {
  local name="$1" files=(-f "$DEPLOY/docker-compose.yml")
  shift
  [[ "$name" == gpu ]] && files+=(-f "$DEPLOY/docker-compose.gpu.yml")
  env -u MDDP_TLS -u MDDP_MAX_RESTARTS -u MDDP_HTTP_PORT "$@" \
    docker-compose "${files[@]}" config >"$WORK/$name" 2>&1 || { cat "$WORK/$name"; fail "$name: docker-compose config failed"; }
}
config default
config off MDDP_TLS=off MDDP_MAX_RESTARTS=0 MDDP_HTTP_PORT=9443
config gpu

# check CONFIG PYTHON-EXPRESSION WHAT: the expression holds for the parsed CONFIG
# (s: its services; cmd(name): a service's command as a list).
check() {
  python3 - "$WORK/$1" "$2" <<'PY' || fail "$1: $3"
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
s = c["services"]
cmd = lambda name: s[name]["command"]
workers = [f"worker{r}" for r in range(4)]
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
PY
}
check default 'set(s) == {"tls", "coordinator", *workers}' "want the services tls, coordinator, worker0..3"
check default 'sorted(s["coordinator"]["ports"]) == ["127.0.0.1:29500:29500/tcp", "127.0.0.1:8080:8080/tcp"]' \
  "the coordinator's ports are not published on the host's loopback only"
check default 's["coordinator"]["environment"]["MDDP_PUBLISHED_DASHBOARD"] == "127.0.0.1:8080"' \
  "the coordinator does not print the dashboard's URL on the host"
# TLS: on by default everywhere, made once by the tls service that builds the image.
check default 'all(s[n]["environment"]["MDDP_TLS"] == "on" for n in ["tls", "coordinator", *workers])' "TLS is not on by default"
check default 's["tls"]["entrypoint"] == ["microddp-lab-tls"] and cmd("tls") == ["/tls", "coordinator", *workers]
  and "build" in s["tls"] and all("build" not in s[n] for n in ["coordinator", *workers])' \
  "the tls service does not make every host's certificate or does not build the image"
check default 'all(s[n]["depends_on"]["tls"]["condition"] == "service_completed_successfully" for n in ["coordinator", *workers])' \
  "the job starts before the tls service made the certificates"
check default 'all("tls:/tls:ro" in s[n]["volumes"] for n in ["coordinator", *workers])' \
  "the job's containers do not mount the certificates read-only"
check off 'all(s[n]["environment"]["MDDP_TLS"] == "off" for n in ["tls", "coordinator", *workers])
  and s["coordinator"]["environment"]["MDDP_PUBLISHED_DASHBOARD"] == "127.0.0.1:9443"' "MDDP_TLS=off does not reach every service"
# Recovery: restarts with checkpoints, workers that re-join (--restart) and are started again.
check default '"--max-restarts=3" in cmd("coordinator") and "--checkpoint-every=50" in cmd("coordinator")
  and "--run-dir=/runs/job" in cmd("coordinator")' "the coordinator does not restart from checkpoints by default"
check default 'all("--restart" in cmd(w) and s[w]["restart"] == "on-failure:3" for w in workers)' \
  "the workers neither re-join (--restart) nor are started again (restart: on-failure:3)"
check off '"--max-restarts=0" in cmd("coordinator")' "MDDP_MAX_RESTARTS=0 does not reach the coordinator"
# The GPU override: the CUDA build, one GPU per worker, the coordinator's
# command repeated (compose replaces a list whole): docker-compose.yml's plus --device=cuda.
check gpu 's["tls"]["build"]["args"]["MICRODDP_CUDA"] == "ON"' "the GPU override does not build with CUDA"
check gpu '[s[w]["deploy"]["resources"]["reservations"]["devices"][0]["driver"] for w in workers] == ["nvidia"] * 4' \
  "want one GPU reservation per worker"
python3 - "$WORK/default" "$WORK/gpu" <<'EOF2' || fail "the GPU override's coordinator command is not docker-compose.yml's plus --device=cuda"
import sys, yaml
command = lambda path: yaml.safe_load(open(path))["services"]["coordinator"]["command"]
sys.exit(0 if command(sys.argv[2]) == command(sys.argv[1]) + ["--device=cuda"] else 1)
EOF2
echo "PASS: compose files validate (TLS, recovery and the GPU override)"
