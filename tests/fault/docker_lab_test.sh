#!/usr/bin/env bash
# The compose lab for real (deploy/README.md), as a user on a machine
# without Docker runs it:
#   docker_lab_test.sh REPO NODE_MODULES SCREENSHOT.png BUILD_DIR
# 1. deploy/engine.sh up: the running engine, or Debian's dockerd started on
#    a private socket in a directory of this test, and the base image.
# 2. The image, built by compose from the release scripts/bundle makes of
#    BUILD_DIR's binary (MDDP_FROM=release: the project is not compiled a
#    second time); and deploy/Dockerfile's from-source recipe up to its
#    configured build tree (the build packages it installs, the context it
#    copies, CMake's configure), the part a host build does not prove.
#    MDDP_DOCKER_FROM_SOURCE=1 builds the lab's image from source instead,
#    compile and all (20-30 min on two cores with a cold compiler cache).
# 3. A short job with TLS (the lab's default) on uneven links (MDDP_LINK_RATE,
#    rank 2 slower): the certificates and dashboard token the tls service made
#    (no CA key left), mutual TLS on the control plane; from the host, the
#    dashboard over HTTPS on the published port, verified against the lab CA,
#    refused without its token, and headless Chromium's screenshot with 4
#    ranks after logging in at the printed URL (dashboard_e2e.sh --attach);
#    every container exits 0 and the metrics volume holds every rank's steps.
# 4. Recovery (the lab's default): `compose kill worker2` mid-run, then
#    `compose start worker2` (Docker never restarts a container it killed),
#    and later a crash of worker2's process, which its restart policy cures:
#    the job re-forms twice from its checkpoints and finishes; the
#    dashboard's API and metrics.jsonl record both restarts (rank 2, host
#    worker2) and every rank's final step.
# 5. No recovery, no TLS (MDDP_MAX_RESTARTS=0 MDDP_TLS=off): `compose kill
#    worker2` ends the job with the verdict naming rank 2 on host worker2.
# 6. Everything made is removed: containers, networks, volumes, the image,
#    and the engine and its directory (or, on an engine that was running
#    already, the base image if this test made it).
# Skips (77) where no engine can be started (not root, no cgroups, a dockerd
# that exits at once: deploy/engine.sh says why); a missing
# package skips locally but fails in CI (CI=true). MDDP_COMPOSE picks the
# compose command (default docker-compose, else `docker compose`).
set -uo pipefail
REPO="$(cd "$1" && pwd)"
MODULES="$2"
SHOT="$3"
BUILD_DIR="$4"
FROM_SOURCE="${MDDP_DOCKER_FROM_SOURCE:-0}"
T_START=$(date +%s)
WORK="$(mktemp -d /var/tmp/mddp-docker-lab.XXXXXX)"
export MDDP_ENGINE_DIR="$WORK/engine"
ENGINE="$REPO/deploy/engine.sh"
PROJECT="mddplab$$"
export MDDP_IMAGE="microddp:lab-test-$$"
BASE_IMAGE="${MDDP_BASE_IMAGE:-debian:bookworm}"
STARTED_ENGINE=0
MADE_BASE=0
TLS_DIR=""
HTTP_TOKEN=""

say() { echo "[docker-lab +$(($(date +%s) - T_START))s] $*"; }
missing() {
  if [[ "${CI:-}" == "true" ]]; then echo "FAIL: $1 (CI=true: bash scripts/test installs it)"; exit 1; fi
  echo "SKIP: $1"; exit 77
}
have() { command -v "$1" >/dev/null || [[ -x "/usr/sbin/$1" ]]; }  # sbin: not on every user's PATH
have dockerd || missing "dockerd is not installed (apt-get install docker.io)"
have debootstrap || missing "debootstrap is not installed (apt-get install debootstrap)"
have openssl || missing "openssl is not installed (apt-get install openssl)"
if [[ -n "${MDDP_COMPOSE:-}" ]]; then
  read -r -a COMPOSE_CMD <<<"$MDDP_COMPOSE"
elif command -v docker-compose >/dev/null; then
  COMPOSE_CMD=(docker-compose)
else
  missing "docker-compose is not installed (apt-get install docker-compose)"
fi
COMPOSE=("${COMPOSE_CMD[@]}" -p "$PROJECT" -f "$REPO/deploy/docker-compose.yml")

compose_logs() { "${COMPOSE[@]}" logs --no-color "$@" 2>&1; }
cleanup() {
  if [[ -n "${DOCKER_HOST:-}" ]]; then
    "${COMPOSE[@]}" down -v --remove-orphans >/dev/null 2>&1
    docker image rm -f "$MDDP_IMAGE" "$MDDP_IMAGE-source" >/dev/null 2>&1
    ((MADE_BASE)) && docker image rm "$BASE_IMAGE" >/dev/null 2>&1
  fi
  ((STARTED_ENGINE)) && bash "$ENGINE" down | sed "s/^/[docker-lab +$(($(date +%s) - T_START))s] /"
  rm -rf "$WORK" "${RELEASE_OUT:-}"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  [[ -n "${DOCKER_HOST:-}" ]] && compose_logs | tail -n 40
  exit 1
}

# wait_for SECONDS WHAT CMD...: polls CMD every 0.5 s.
wait_for() {
  local limit="$1" what="$2" deadline=$(($(date +%s) + $1))
  shift 2
  until "$@"; do
    (($(date +%s) < deadline)) || fail "timed out after $limit s waiting for $what"
    sleep 0.5
  done
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# api PATH: the dashboard from the host: over HTTPS, checked against the
# lab's CA, with its token (after fetch_tls); over plain HTTP after no_tls.
api() {
  if [[ -n "$TLS_DIR" ]]; then
    curl -fsS --max-time 5 --cacert "$TLS_DIR/ca.pem" -H "Authorization: Bearer $HTTP_TOKEN" \
      "https://127.0.0.1:$MDDP_HTTP_PORT/$1"
  else
    curl -fsS --max-time 5 "http://127.0.0.1:$MDDP_HTTP_PORT/$1"
  fi
}
step_at_least() { [[ "$(api api/job 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["step"])' 2>/dev/null)" -ge "$1" ]] 2>/dev/null; }
# (Output captured first: `grep -q` in a pipe would end the writer early, which pipefail counts as a failure.)
logs_have() { grep -q -- "$2" <<<"$(compose_logs "$1")"; }
coordinator_says() { logs_have coordinator "$1"; }
exit_code() { docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$("${COMPOSE[@]}" ps -q "$1")"; }

# ---- 1. the engine ------------------------------------------------------------------
# An engine already answering is used, and left running; else this test starts one.
if ! bash "$ENGINE" env >/dev/null 2>&1; then STARTED_ENGINE=1; fi
if ((STARTED_ENGINE == 0)); then
  eval "$(bash "$ENGINE" env)"
  docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || MADE_BASE=1
fi
bash "$ENGINE" up >"$WORK/engine-up.log" 2>&1
case $? in
  0) ;;
  2) tail -n 20 "$WORK/engine-up.log"; echo "SKIP: $(grep -m1 "no Docker engine" "$WORK/engine-up.log")"; exit 77 ;;
  *) cat "$WORK/engine-up.log"; fail "deploy/engine.sh up failed" ;;
esac
eval "$(bash "$ENGINE" env)"
say "$(grep -v '^engine.sh: next:' "$WORK/engine-up.log" | tr '\n' ' ')"
# Idempotent: a second `up` finds the same engine and starts nothing.
bash "$ENGINE" up >"$WORK/engine-up2.log" 2>&1 || fail "a second engine.sh up failed: $(cat "$WORK/engine-up2.log")"
grep -q "the engine is up\|using the running engine" "$WORK/engine-up2.log" ||
  fail "a second engine.sh up did not find the engine: $(cat "$WORK/engine-up2.log")"

# ---- 2. the image --------------------------------------------------------------------
if ((FROM_SOURCE)); then
  export MDDP_FROM=source
else
  # The release of the host's build, inside the build context (the repository).
  RELEASE_OUT="$REPO/dist/docker-lab-$$"
  bash "$REPO/scripts/bundle" --build "$BUILD_DIR" --out "$RELEASE_OUT" --no-tar >"$WORK/bundle.log" 2>&1 ||
    { cat "$WORK/bundle.log"; fail "scripts/bundle failed"; }
  export MDDP_FROM=release
  MDDP_RELEASE_DIR="$(realpath --relative-to="$REPO" "$RELEASE_OUT"/microddp-*)"
  export MDDP_RELEASE_DIR
fi
say "building $MDDP_IMAGE from $MDDP_FROM (load: $(cut -d' ' -f1-3 /proc/loadavg))"
T0=$(date +%s)
# The tls service builds the image every service runs.
"${COMPOSE[@]}" build tls >"$WORK/build.log" 2>&1 || { tail -n 40 "$WORK/build.log"; fail "the image did not build"; }
# From source, the compile step's ccache statistics say whether this was a cold or a warm build.
say "image built in $(($(date +%s) - T0)) s ($( ((FROM_SOURCE)) && echo "ccache $(grep -m1 -o "Hits: .*" "$WORK/build.log" || echo "not run: layers cached")" || echo "from the release $MDDP_RELEASE_DIR")):" \
  "$(docker image inspect -f '{{.Size}}' "$MDDP_IMAGE" | awk '{printf "%.0f MB", $1 / 1e6}');" \
  "engine data $( ((STARTED_ENGINE)) && du -sh "$MDDP_ENGINE_DIR" | cut -f1 || echo "(not ours)")"
if ((!FROM_SOURCE)); then
  # The from-source recipe up to the compile: its packages install, its context copies, CMake configures.
  T0=$(date +%s)
  DOCKER_BUILDKIT=1 docker build --network host -f "$REPO/deploy/Dockerfile" --target source-configured \
    -t "$MDDP_IMAGE-source" "$REPO" >"$WORK/source.log" 2>&1 ||
    { tail -n 40 "$WORK/source.log"; fail "deploy/Dockerfile's source stage did not configure"; }
  grep -q "Build files have been written to: /build" "$WORK/source.log" ||
    { tail -n 40 "$WORK/source.log"; fail "the source stage's log does not show CMake's configure"; }
  docker image rm -f "$MDDP_IMAGE-source" >/dev/null 2>&1
  say "the source stage configured in $(($(date +%s) - T0)) s"
fi

export MDDP_HTTP_PORT MDDP_GRPC_PORT
MDDP_HTTP_PORT=$(free_port)
MDDP_GRPC_PORT=$(free_port)
# lab_up VAR=VALUE...: a fresh lab (new volumes: new certificates) under those knobs.
lab_up() {
  "${COMPOSE[@]}" down -v >/dev/null 2>&1
  env "$@" "${COMPOSE[@]}" up -d --no-build >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "compose up ($*) failed"; }
}
# The lab's TLS files as the user on the host gets them (from the tls
# service's exited container: docker cp reads its volume); sets TLS_DIR and HTTP_TOKEN.
fetch_tls() {
  rm -rf "$WORK/tls"
  docker cp "$("${COMPOSE[@]}" ps -q tls):/tls" "$WORK/tls" || fail "cannot copy the tls volume"
  TLS_DIR="$WORK/tls"
  HTTP_TOKEN="$(cat "$TLS_DIR/http-token")"
}
no_tls() { TLS_DIR=""; HTTP_TOKEN=""; }
# resumes: the "resume" lines (one per restarted attempt's first step) in the metrics volume.
resumes() { docker exec "$("${COMPOSE[@]}" ps -q coordinator)" grep -c '"kind":"resume"' /runs/job/metrics.jsonl; }
resumes_at_least() { [[ "$(resumes 2>/dev/null)" -ge "$1" ]] 2>/dev/null; }
# ranks_at_least N: every rank of the current attempt is at step N or later (/api/ranks).
ranks_at_least() {
  api api/ranks | python3 -c 'import json, sys; r = json.load(sys.stdin); sys.exit(0 if len(r) == 4 and min(x["step"] for x in r) >= int(sys.argv[1]) else 1)' "$1"
}
# job_is PYTHON-EXPRESSION: holds for /api/job (j).
job_is() { api api/job | python3 -c "import json, sys; j = json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
copy_metrics() {
  docker cp "$("${COMPOSE[@]}" ps -q coordinator):/runs/job/metrics.jsonl" "$WORK/metrics.jsonl" ||
    fail "no metrics.jsonl in the runs volume"
}
# spki CERT: base64 SHA-256 of its public key, as Chromium's pin list wants it.
spki() { openssl x509 -in "$1" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64; }
restart_count() { docker inspect -f '{{.RestartCount}}' "$("${COMPOSE[@]}" ps -q "$1")"; }

# ---- 3. a short job with TLS on uneven links, watched from the host ---------------------
STEPS=120
T0=$(date +%s%N)
lab_up MDDP_STEPS=$STEPS MDDP_LINGER_S=600 MDDP_LINK_RATE="1gbit,1gbit,200mbit,1gbit"
fetch_tls
wait_for 180 "the first training step on the dashboard (127.0.0.1:$MDDP_HTTP_PORT)" step_at_least 1
say "first training step $((($(date +%s%N) - T0) / 1000000)) ms after \`up\`"
for f in ca.pem coordinator.pem coordinator.key worker0.pem worker0.key worker3.pem worker3.key http-token; do
  [[ "$(stat -c %a "$TLS_DIR/$f" 2>&1)" == 600 ]] || fail "the tls volume's $f: mode $(stat -c %a "$TLS_DIR/$f" 2>&1), want 600"
done
[[ ! -e "$TLS_DIR/ca.key" ]] || fail "the CA's key is left in the tls volume"
coordinator_says "listening on .* (4 workers expected, mutual TLS)" || fail "the control plane is not under mutual TLS"
LOGIN="https://127.0.0.1:$MDDP_HTTP_PORT/login?token=$HTTP_TOKEN"
coordinator_says "dashboard: $LOGIN" || fail "the coordinator does not print the dashboard's login URL on the host"
# curl checks the certificate against the lab CA, and that it names 127.0.0.1.
CODE="$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$TLS_DIR/ca.pem" "https://127.0.0.1:$MDDP_HTTP_PORT/api/job")"
[[ "$CODE" == 401 ]] || fail "the dashboard without its token answered $CODE, want 401"
! curl -fsS --max-time 5 "http://127.0.0.1:$MDDP_HTTP_PORT/" >/dev/null 2>&1 || fail "the dashboard answers plain HTTP"
logs_have worker2 "eth0: qdisc tbf .* rate 200Mbit" || fail "worker2's link is not limited to 200 Mbit/s"
logs_have worker0 "eth0: qdisc tbf .* rate 1Gbit" || fail "worker0's link is not limited to 1 Gbit/s"
wait_for 600 "the job to succeed" coordinator_says "the job is over (succeeded)"
grep -q "<title>microddp dashboard</title>" <<<"$(api "")" || fail "no dashboard page on 127.0.0.1:$MDDP_HTTP_PORT"
grep -q '^microddp_world_size{job="local"} 4$' <<<"$(api metrics)" || fail "/metrics does not say 4 ranks"
NODE_EXTRA_CA_CERTS="$TLS_DIR/ca.pem" bash "$REPO/tests/dashboard/e2e/dashboard_e2e.sh" --attach="$LOGIN" "$MODULES" "$SHOT" \
  --ranks 4 --spki "$(spki "$TLS_DIR/coordinator.pem")" || fail "the dashboard in Chromium"
"${COMPOSE[@]}" stop -t 30 coordinator >/dev/null 2>&1  # ends its linger
for s in tls coordinator worker0 worker1 worker2 worker3; do
  [[ "$(exit_code "$s")" == "exited 0" ]] || fail "$s: $(exit_code "$s"), want exited 0"
done
coordinator_says "job 'local' succeeded: 4 ranks finished" || fail "the coordinator does not say every rank finished"
copy_metrics
python3 - "$WORK/metrics.jsonl" "$STEPS" <<'EOF' || fail "the metrics volume lacks records"
import json, sys
steps = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "step":
        steps.setdefault(r["rank"], set()).add(r["step"])
want = int(sys.argv[2])
got = {rank: len(s) for rank, s in sorted(steps.items())}
print(f"metrics.jsonl: distinct steps per rank {got}")
sys.exit(0 if got == {r: want for r in range(4)} else 1)
EOF
# The knobs' failure paths, in one-off worker containers: a per-rank list
# without rank 2's value, a delay (netem: absent from some kernels), a TLS
# knob that is neither on nor off.
OUT="$("${COMPOSE[@]}" run --rm --no-deps -e MDDP_LINK_RATE=1gbit,1gbit worker2 --help 2>&1)" &&
  fail "a rate list without rank 2 was accepted"
grep -q "microddp: error: MDDP_LINK_RATE=1gbit,1gbit has no value for rank 2" <<<"$OUT" || fail "no clear error: $OUT"
OUT="$("${COMPOSE[@]}" run --rm --no-deps -e MDDP_LINK_DELAY=5ms worker0 --help 2>&1)"
grep -q "eth0: qdisc netem .* delay 5ms\|microddp: error: cannot shape eth0 with netem: this kernel has no netem qdisc" \
  <<<"$OUT" || fail "MDDP_LINK_DELAY neither delays nor says why not: $OUT"
say "MDDP_LINK_DELAY=5ms: $(grep -m1 "netem" <<<"$OUT")"
OUT="$("${COMPOSE[@]}" run --rm --no-deps -e MDDP_TLS=yes worker0 2>&1)" && fail "MDDP_TLS=yes was accepted"
grep -q "microddp: error: MDDP_TLS=yes: give on or off" <<<"$OUT" || fail "no clear error for MDDP_TLS=yes: $OUT"

# ---- 4. recovery: a killed worker, then a crashed one ----------------------------------
# (The lab's defaults: checkpoints every 50 steps, 3 restarts. The first
# kill lands past step 60, the second past step 400 of attempt 1: each past
# a checkpoint, well before the end. A step takes 15-35 ms, and on a loaded
# machine the test's own polls and docker commands took ~20 s to react: a
# first kill at step 624, or at 742 with a job of 1,600 steps over 13 s
# after it resumed, before the second kill. 4,000 steps leave room for
# both; on a quiet machine the end costs ~25 s more.)
RSTEPS=4000
lab_up MDDP_STEPS=$RSTEPS MDDP_LINGER_S=600
fetch_tls
wait_for 180 "step 60 of the recovery run" step_at_least 60
T0=$(date +%s%N)
"${COMPOSE[@]}" kill worker2 >/dev/null 2>&1 || fail "compose kill worker2 failed"
wait_for 60 "the job to re-form after \`kill worker2\`" \
  job_is 'j["attempt"] == 1 and j["restarts"][0]["rank"] == 2 and j["restarts"][0]["host"] == "worker2"'
say "$((($(date +%s%N) - T0) / 1000000)) ms after \`kill worker2\`: $(compose_logs coordinator | grep -m1 -o "attempt 0 ended: .*")"
# Docker restarts no container that it killed itself, whatever the policy.
[[ "$(exit_code worker2)" == "exited 137" && "$(restart_count worker2)" == 0 ]] ||
  fail "worker2 after compose kill: $(exit_code worker2), restarted $(restart_count worker2) times; want exited 137, not restarted"
T0=$(date +%s%N)
"${COMPOSE[@]}" start worker2 >/dev/null 2>&1 || fail "compose start worker2 failed"
wait_for 120 "the first step of attempt 1" resumes_at_least 1
say "attempt 1's first step in metrics.jsonl $((($(date +%s%N) - T0) / 1000000)) ms after \`start worker2\`"
wait_for 180 "every rank at step 400 of attempt 1" ranks_at_least 400
# A crash: worker2's process killed inside its container (as the kernel's
# OOM killer would); the container exits 137 and its restart policy starts it again.
T0=$(date +%s%N)
docker exec "$("${COMPOSE[@]}" ps -q worker2)" sh -c 'kill -9 $(cat /proc/1/task/1/children)' ||
  fail "cannot kill worker2's process"
wait_for 120 "the first step of attempt 2" resumes_at_least 2
say "worker2 crashed: attempt 2's first step in metrics.jsonl $((($(date +%s%N) - T0) / 1000000)) ms after the kill" \
  "(the container restarted $(restart_count worker2) time)"
[[ "$(restart_count worker2)" == 1 ]] || fail "Docker restarted worker2's crashed container $(restart_count worker2) times, want 1"
wait_for 600 "the recovered job to succeed" coordinator_says "the job is over (succeeded)"
job_is 'j["state"] == "succeeded" and j["attempt"] == 2 and [(r["rank"], r["host"]) for r in j["restarts"]] == [(2, "worker2")] * 2' ||
  fail "the dashboard's /api/job does not show the 2 restarts: $(api api/job | head -c 600)"
"${COMPOSE[@]}" stop -t 30 coordinator >/dev/null 2>&1
for s in coordinator worker0 worker1 worker2 worker3; do
  [[ "$(exit_code "$s")" == "exited 0" ]] || fail "$s: $(exit_code "$s"), want exited 0 after the recovered job"
done
coordinator_says "job 'local' succeeded: 4 ranks finished" || fail "the recovered job does not say every rank finished"
copy_metrics
python3 - "$WORK/metrics.jsonl" "$RSTEPS" <<'EOF' || fail "metrics.jsonl does not record the recovery"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
last = int(sys.argv[2])
restarts = [(r["rank"], r["host"]) for r in lines if r.get("kind") == "restart"]
resumes = [(r["attempt"], r["from_step"]) for r in lines if r.get("kind") == "resume"]
final = sorted(r["rank"] for r in lines if r.get("kind") == "step" and r["step"] == last and r.get("attempt") == 2)
print(f"metrics.jsonl: restarts {restarts}, resumed (attempt, from step) {resumes}, ranks with step {last} in attempt 2: {final}")
sys.exit(0 if restarts == [(2, "worker2")] * 2 and [a for a, _ in resumes] == [1, 2] and final == [0, 1, 2, 3] else 1)
EOF

# ---- 5. no recovery, no TLS: a killed worker ends the job --------------------------------
no_tls
lab_up MDDP_STEPS=1000000 MDDP_LINGER_S=0 MDDP_MAX_RESTARTS=0 MDDP_TLS=off
wait_for 180 "step 20 of the run without recovery" step_at_least 20
coordinator_says "dashboard: http://127.0.0.1:$MDDP_HTTP_PORT/$" || fail "MDDP_TLS=off: the coordinator does not print the plain dashboard URL"
logs_have tls "MDDP_TLS=off: no certificates" || fail "MDDP_TLS=off: the tls service made certificates"
T0=$(date +%s%N)
"${COMPOSE[@]}" kill worker2 >/dev/null 2>&1 || fail "compose kill worker2 failed"
wait_for 120 "the coordinator to end the job" bash -c "[[ \"\$(docker inspect -f '{{.State.Status}}' $("${COMPOSE[@]}" ps -q coordinator))\" == exited ]]"
say "the job ended $((($(date +%s%N) - T0) / 1000000)) ms after \`kill worker2\`: $(compose_logs coordinator | grep -m1 -o "job 'local' failed: .*")"
coordinator_says "job 'local' failed: rank 2 (host worker2, pid [0-9]*)" || fail "the verdict does not name rank 2 on host worker2"
[[ "$(exit_code coordinator)" == "exited 1" ]] || fail "coordinator: $(exit_code coordinator), want exited 1"
# (Their restart policy may start the survivors again: their first run's error line is what counts.)
for s in worker0 worker1 worker3; do
  wait_for 60 "$s's error line naming rank 2" logs_have "$s" "microddp: error: .*rank 2"
done

# ---- 6. nothing left ---------------------------------------------------------------------
if ((STARTED_ENGINE)); then
  ENGINE_PID="$(cat "$MDDP_ENGINE_DIR/dockerd.pid")"
  mapfile -t OUTSIDE <"$MDDP_ENGINE_DIR/made-outside"
fi
trap - EXIT
cleanup
if ((STARTED_ENGINE)); then
  unset DOCKER_HOST  # that engine is gone
  ! kill -0 "$ENGINE_PID" 2>/dev/null || fail "dockerd (pid $ENGINE_PID) still runs after engine.sh down"
  [[ ! -e "$WORK" ]] || fail "$WORK is left"
  ! findmnt -rn -o TARGET | grep -qF "$WORK/" || fail "mounts under $WORK are left"
  for p in "${OUTSIDE[@]}"; do [[ ! -e "$p" ]] || fail "$p, made by the engine, is left"; done
  [[ "$(bash "$ENGINE" down)" == *"nothing to remove"* ]] || fail "a second engine.sh down did something"
else
  label="label=com.docker.compose.project=$PROJECT"
  [[ -z "$(docker ps -aq --filter "$label")$(docker network ls -q --filter "$label")$(docker volume ls -q --filter "$label")" ]] ||
    fail "containers, networks or volumes of $PROJECT are left"
  ! docker image inspect "$MDDP_IMAGE" >/dev/null 2>&1 || fail "$MDDP_IMAGE is left"
fi
say "PASS: everything the test made is removed"
