#!/usr/bin/env bash
# A Docker engine for the compose lab on a machine that runs none: Debian's
# dockerd (apt-get install docker.io) started by hand on a private socket,
# everything it keeps under one directory, and the Dockerfile's base image
# made with debootstrap from the Debian archive apt already uses, when it
# cannot be pulled. An engine that already answers ($DOCKER_HOST, else
# /var/run/docker.sock) is used as it is.
#
#   engine.sh up       find the engine or start one; make the base image if missing
#   engine.sh env      shell lines that point docker and docker-compose at it:
#                        eval "$(deploy/engine.sh env)"
#   engine.sh status   which engine, its storage driver, the base image, disk use
#   engine.sh down     stop the engine `up` started and delete its directory
#                      (containers, images, volumes, build cache); an engine it
#                      did not start is left running
#
# The engine it starts changes nothing outside its directory: no iptables
# rules, no IP forwarding, no docker0 bridge, no system service. Compose
# networks are bridges that live as long as the network; published ports go
# through docker-proxy. What dockerd 20.10, containerd and runc always put
# in fixed places (/etc/docker/key.json, /run/docker/plugins,
# /run/containerd/s, /run/runc) is deleted by `down` when `up` made it; so
# are the engine's cgroups (microddp-engine).
#
# Environment: MDDP_ENGINE_DIR (default /var/tmp/microddp-engine),
# MDDP_ENGINE_STORAGE (storage driver; default dockerd's choice: overlay2
# where the kernel allows it, else vfs, which copies every layer whole),
# MDDP_BASE_IMAGE (default debian:bookworm), MDDP_DEBIAN_MIRROR (the archive
# debootstrap reads; default the one apt is configured with).
# Exit status: 0; 1 on an error; 2 where no engine can be started here
# (not root, no cgroups, a dockerd that exits at once) and none is running.
set -euo pipefail

DIR="${MDDP_ENGINE_DIR:-/var/tmp/microddp-engine}"
BASE="${MDDP_BASE_IMAGE:-debian:bookworm}"
SOCK="unix://$DIR/docker.sock"
CGROUP_PARENT="microddp-engine"
MARK="$DIR/.microddp-engine"        # only a directory holding this is ever deleted
OUTSIDE="$DIR/made-outside"         # paths outside $DIR that this engine created

die() { echo "engine.sh: $*" >&2; exit 1; }
cannot() { echo "engine.sh: no Docker engine can be started here: $*" >&2; exit 2; }
say() { echo "engine.sh: $*"; }

[[ "$DIR" == /*/* ]] || die "MDDP_ENGINE_DIR must be an absolute path below /, got '$DIR'"

# The docker client to use: one that builds with BuildKit (the Dockerfile's
# compiler cache needs it). Clients 23 and later build with BuildKit only
# through the buildx plugin; Debian 12's docker.io (20.10) has it built in.
buildkit_client() {
  local c v
  for c in "$(command -v docker || true)" /usr/bin/docker; do
    [[ -x "$c" ]] || continue
    if "$c" buildx version >/dev/null 2>&1; then echo "$c"; return; fi
    v="$("$c" --version 2>/dev/null | sed -nE 's/^Docker version ([0-9]+)\..*/\1/p')"
    if [[ -n "$v" && "$v" -lt 23 ]]; then echo "$c"; return; fi
  done
}
DOCKER="$(buildkit_client)"
DOCKER="${DOCKER:-$(command -v docker || true)}"

answers() { [[ -n "$DOCKER" ]] && DOCKER_HOST="$1" "$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1; }
ours_alive() { [[ -f "$DIR/dockerd.pid" ]] && kill -0 "$(cat "$DIR/dockerd.pid")" 2>/dev/null; }

# Sets ENGINE (a DOCKER_HOST) and OURS (1: started by `up`); false when none answers.
find_engine() {
  if ours_alive && answers "$SOCK"; then ENGINE="$SOCK"; OURS=1; return 0; fi
  local h="${DOCKER_HOST:-unix:///var/run/docker.sock}"
  if [[ "$h" != "$SOCK" ]] && answers "$h"; then ENGINE="$h"; OURS=0; return 0; fi
  return 1
}
dk() { DOCKER_HOST="$ENGINE" "$DOCKER" "$@"; }

# Remembers a path outside $DIR that dockerd is about to create, for `down`.
note_outside() { [[ -e "$1" ]] || grep -qxF "$1" "$OUTSIDE" 2>/dev/null || echo "$1" >>"$OUTSIDE"; }

start_engine() {
  [[ $(id -u) -eq 0 ]] || cannot "starting dockerd needs root (or start Docker yourself and set DOCKER_HOST)"
  [[ -e /sys/fs/cgroup/cgroup.controllers || -d /sys/fs/cgroup/memory ]] ||
    cannot "no cgroup file system is mounted at /sys/fs/cgroup"
  command -v dockerd >/dev/null || die "dockerd is not installed: apt-get install docker.io"
  [[ -n "$DOCKER" ]] || die "no docker client: apt-get install docker.io"
  mkdir -p "$DIR/data" "$DIR/exec"
  touch "$MARK"
  local p  # children before their parents: `down` removes them in this order
  for p in /etc/docker/key.json /run/docker/plugins /run/docker /run/containerd/s /run/containerd /run/runc; do
    note_outside "$p"
  done
  echo '{}' >"$DIR/daemon.json"  # not /etc/docker/daemon.json
  local storage=()
  [[ -n "${MDDP_ENGINE_STORAGE:-}" ]] && storage=(--storage-driver "$MDDP_ENGINE_STORAGE")
  setsid dockerd --config-file "$DIR/daemon.json" --data-root "$DIR/data" --exec-root "$DIR/exec" \
    --pidfile "$DIR/dockerd.pid" -H "$SOCK" --cgroup-parent "/$CGROUP_PARENT" \
    --iptables=false --ip-masq=false --ip-forward=false --bridge=none "${storage[@]}" \
    </dev/null >>"$DIR/dockerd.log" 2>&1 &
  local t
  for ((t = 0; t < 600; t++)); do
    answers "$SOCK" && { ENGINE="$SOCK"; OURS=1; return; }
    sleep 0.1
  done
  # A dockerd that exits at once met a kernel or sandbox that cannot hold
  # containers; one still running but silent is an error worth a look.
  tail -n 20 "$DIR/dockerd.log" >&2
  ours_alive || cannot "dockerd exited at once (the log above, from $DIR/dockerd.log)"
  die "dockerd did not answer on $SOCK within 60 s (log: $DIR/dockerd.log)"
}

# The Debian archive apt reads for SUITE, and the image's sources.list: the
# same suites as this machine's apt (SUITE, SUITE-updates, SUITE-security).
apt_targets() { apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT) $(ORIGIN)' 2>/dev/null | sort -u; }

make_base_image() {
  if dk image inspect "$BASE" >/dev/null 2>&1; then return; fi
  if dk pull "$BASE" >/dev/null 2>&1; then say "pulled $BASE"; return; fi
  [[ "$BASE" == debian:* ]] || die "cannot pull $BASE, and only debian:SUITE images can be made here"
  local suite="${BASE#debian:}" mirror root="$DIR/rootfs"
  [[ $(id -u) -eq 0 ]] || die "cannot pull $BASE; making it with debootstrap needs root"
  command -v debootstrap >/dev/null || die "cannot pull $BASE; to make it: apt-get install debootstrap"
  mirror="${MDDP_DEBIAN_MIRROR:-$(apt_targets | awk -v s="$suite" '$2 == s && $4 == "Debian" {print $1; exit}')}"
  [[ -n "$mirror" ]] || die "apt has no Debian archive for '$suite': set MDDP_DEBIAN_MIRROR=URL"
  say "cannot pull $BASE: making it with debootstrap from $mirror (about a minute)"
  mkdir -p "$DIR"
  touch "$MARK"
  rm -rf "$root"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$DIR/debootstrap.log" 2>&1 ||
    { tail -n 20 "$DIR/debootstrap.log" >&2; die "debootstrap failed (log: $DIR/debootstrap.log)"; }
  apt_targets | awk -v s="$suite" 'index($2, s) == 1 && $4 ~ /^Debian/ {print "deb " $1 " " $2 " " $3}' \
    >"$root/etc/apt/sources.list.new"
  [[ -s "$root/etc/apt/sources.list.new" ]] && mv "$root/etc/apt/sources.list.new" "$root/etc/apt/sources.list"
  rm -rf "$root/etc/apt/sources.list.new" "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | dk import --change 'CMD ["bash"]' \
    --change "LABEL org.microddp.made-by=deploy/engine.sh" - "$BASE" >/dev/null
  rm -rf "$root"
  say "made $BASE ($(dk image inspect -f '{{.Size}}' "$BASE" | awk '{printf "%.0f MB", $1 / 1e6}'))"
}

# A directory holding only `docker` -> Debian's client, put first on PATH by
# `env` when the client found first cannot build with BuildKit.
client_shim() {
  [[ -n "$DOCKER" && "$DOCKER" != "$(command -v docker || true)" ]] || return 0
  mkdir -p "$DIR/bin"
  touch "$MARK"
  ln -sfn "$DOCKER" "$DIR/bin/docker"
  echo "$DIR/bin"
}

cmd_up() {
  if find_engine; then
    if ((OURS)); then say "the engine is up: $ENGINE"; else say "using the running engine at $ENGINE"; fi
  else
    start_engine
    say "started dockerd (pid $(cat "$DIR/dockerd.pid"), storage driver $(dk info -f '{{.Driver}}')) on $ENGINE"
  fi
  make_base_image
  client_shim >/dev/null
  say "next: eval \"\$($0 env)\"; then docker-compose -f deploy/docker-compose.yml up --build"
}

cmd_env() {
  find_engine || die "no engine answers: run $0 up first"
  echo "export DOCKER_HOST=$ENGINE"
  # docker-compose v1 builds through the docker client only when asked to,
  # and only that way with BuildKit.
  echo "export DOCKER_BUILDKIT=1 COMPOSE_DOCKER_CLI_BUILD=1"
  local shim
  shim="$(client_shim)"
  [[ -z "$shim" ]] || echo "export PATH=$shim:\$PATH  # $DOCKER: a client that builds with BuildKit"
}

cmd_status() {
  if ! find_engine; then
    echo "engine: none answers${DOCKER_HOST:+ at $DOCKER_HOST}, and none started by $0 in $DIR"
    return 0
  fi
  if ((OURS)); then
    echo "engine: dockerd pid $(cat "$DIR/dockerd.pid") on $ENGINE, started by $0; data in $DIR ($(du -sh "$DIR" 2>/dev/null | cut -f1))"
  else
    echo "engine: the running engine at $ENGINE (not started by $0)"
  fi
  echo "server $(dk version --format '{{.Server.Version}}'), storage driver $(dk info -f '{{.Driver}}'), client $DOCKER"
  local made
  made="$(dk image inspect -f '{{index .Config.Labels "org.microddp.made-by"}}' "$BASE" 2>/dev/null)" ||
    { echo "base image $BASE: missing ($0 up makes it)"; return 0; }
  echo "base image $BASE: present${made:+ (made by $made)}"
}

# Unmounts what the engine left mounted under $DIR, deepest first.
unmount_leftovers() {
  local m
  for m in $(findmnt -rn -o TARGET | grep -F "$DIR/" | sort -r || true); do umount -l "$m" 2>/dev/null || true; done
}

cmd_down() {
  local pid
  if [[ -f "$DIR/dockerd.pid" ]]; then
    pid="$(cat "$DIR/dockerd.pid")"
    if kill -0 "$pid" 2>/dev/null; then
      say "stopping dockerd (pid $pid) and its containers"
      kill -TERM "$pid"
      local t=0
      while kill -0 "$pid" 2>/dev/null && ((t++ < 600)); do sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then say "dockerd did not stop within 60 s: killing it"; kill -KILL "$pid"; fi
      say "dockerd stopped after $SECONDS s"
    fi
  elif find_engine && ((OURS == 0)); then
    say "the engine at $ENGINE was not started by $0: left running"
    if [[ "$(dk image inspect -f '{{index .Config.Labels "org.microddp.made-by"}}' "$BASE" 2>/dev/null)" == deploy/engine.sh ]]; then
      dk image rm "$BASE" >/dev/null 2>&1 && say "removed $BASE (made by $0)" ||
        say "kept $BASE (made by $0): images built on it still exist"
    fi
  fi
  [[ -d "$DIR" ]] || { say "nothing to remove in $DIR"; return 0; }
  [[ -f "$MARK" ]] || die "$DIR was not made by $0 (no $MARK): not deleting it"
  unmount_leftovers
  if [[ -f "$OUTSIDE" ]]; then
    local p
    while read -r p; do
      if [[ -d "$p" ]]; then rmdir "$p" 2>/dev/null || true; else rm -f "$p"; fi
    done <"$OUTSIDE"
  fi
  local cg  # the cgroup parent and what it holds (e.g. buildkit/), deepest first
  for cg in $(find /sys/fs/cgroup -maxdepth 2 -type d -name "$CGROUP_PARENT"); do
    find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  rm -rf "$DIR"
  say "removed $DIR (after $SECONDS s)"
}

case "${1:-}" in
  up) cmd_up ;;
  env) cmd_env ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *)
    sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
    [[ -z "${1:-}" || "$1" == "-h" || "$1" == "--help" ]] || exit 2
    ;;
esac
