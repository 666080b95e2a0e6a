# shellcheck shell=bash
# What the benchmarks share (train_vs_pytorch.sh, allreduce_vs_mpi_gloo.sh,
# engines.sh, compression.sh, the netns lab's netns_hier.sh and
# netns_overhead.sh); sourced right after `set -euo pipefail`:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Sets `here` (bench/), `root` (the repository), MICRODDP (the binary; default
# <repo>/build/cli/microddp) and PY (PYTHON, default /usr/bin/python3:
# Debian's python3-torch). The functions below use the caller's `keep`
# (--keep DIR) and `work` (the results directory, set by make_work_dir).
# Their summaries' Python side is bench/summary.py.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
MICRODDP=${MICRODDP:-$root/build/cli/microddp}
PY=${PYTHON:-/usr/bin/python3}
bench_script=${BASH_SOURCE[1]:-$0}  # the script that sourced this file

per_run_timeout=300  # seconds, for every run
run_width=40         # the name column of run's lines
run_cpu=0            # 1: run's lines end with the CPU share the run got

# The script's header comment (from line 2 to `set -euo`), as its --help.
usage() { sed -n '2,/^set -euo/p' "$bench_script" | grep '^#' | sed 's/^# \{0,1\}//'; }

# die MESSAGE: "<script>: MESSAGE" on stderr, exit 1.
die() { echo "$(basename "$bench_script" .sh): $*" >&2; exit 1; }

# parse_options "--flag:VAR --switch:VAR=VALUE ..." ARGS...: for each
# `--flag X` in ARGS sets the variable VAR that the spec pairs with --flag
# to X; a `--switch` (no argument) sets its VAR to its VALUE; -h/--help
# prints the script's header; any other argument is an error that says so.
# The caller declares every VAR with its default first.
parse_options() {
  local -A var_of=()
  local pair target
  for pair in $1; do var_of[${pair%%:*}]=${pair#*:}; done
  shift
  while (( $# )); do
    [[ $1 == -h || $1 == --help ]] && { usage; exit 0; }
    target=${var_of[$1]:-}
    [[ -n $target ]] || die "unknown option $1 (see --help)"
    if [[ $target == *=* ]]; then
      printf -v "${target%%=*}" '%s' "${target#*=}"
      shift
    else
      (( $# >= 2 )) || die "$1 needs a value"
      printf -v "$target" '%s' "$2"
      shift 2
    fi
  done
}

# require_netns_lab STEPS SKIP: what the netns lab's benchmarks need: root,
# the binary (MICRODDP made absolute and exported for deploy/netns_lab.sh,
# which LAB_SH names), and more steps than skipped warm-up steps.
require_netns_lab() {
  (( EUID == 0 )) || die "needs root (network namespaces, tc)"
  [[ -x $MICRODDP ]] || die "no binary at $MICRODDP (set MICRODDP=/path/to/microddp)"
  (( $1 > $2 )) || die "--steps must exceed --skip"
  MICRODDP=$(realpath "$MICRODDP")
  export MICRODDP
  # shellcheck disable=SC2034  # LAB_SH: used by the caller
  LAB_SH=$root/deploy/netns_lab.sh
}

require_microddp() {
  [[ -x $MICRODDP ]] || { echo "microddp binary not found: $MICRODDP (build it or set MICRODDP)" >&2; exit 1; }
}

# require_torch MODULE: PY can import MODULE (torch or torch.distributed).
require_torch() {
  "$PY" -c "import $1" 2>/dev/null || { echo "$PY has no torch (use Debian's /usr/bin/python3)" >&2; exit 1; }
}

# make_work_dir NAME: work = --keep's directory (created), else a fresh
# /tmp/NAME.XXXXXX; says which.
make_work_dir() {
  if [[ -n $keep ]]; then work=$keep; mkdir -p "$work"; else work=$(mktemp -d "/tmp/$1.XXXXXX"); fi
  echo "results in $work"
}

# kept_rounds PATTERN: for --summarize, how many rounds the kept directory
# $work holds: one more than the highest R of its files named rR_PATTERN.
kept_rounds() {
  local last
  last=$(find "$work" -maxdepth 1 -name "r*_$1" -printf '%f\n' | sed -n 's/^r\([0-9]*\)_.*/\1/p' | sort -n | tail -1)
  echo $(( ${last:--1} + 1 ))
}

# The first lines of every env.txt: the date and the machine.
machine_info() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cores: $(getconf _NPROCESSORS_ONLN)"
  local flags
  flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|avx512[a-z_]*)$' | sort -u | tr '\n' ' ')
  echo "simd flags: ${flags:-none}"
}

# run NAME CMD...: runs CMD under /usr/bin/time -v (CPU share, peak RSS) into
# $work/NAME.{log,time}, prints one line, and never fails the script (a failed
# run's NAME.json is removed).
run() {
  local name=$1; shift
  local t0=$SECONDS
  if /usr/bin/time -v -o "$work/$name.time" timeout "$per_run_timeout" "$@" > "$work/$name.log" 2>&1; then
    local cpu=""
    if (( run_cpu )); then cpu="  CPU $(sed -n 's/.*Percent of CPU this job got: //p' "$work/$name.time")"; fi
    printf '  %-*s ok   %3ds%s\n' "$run_width" "$name" $((SECONDS - t0)) "$cpu"
  else
    printf '  %-*s FAILED (see %s)\n' "$run_width" "$name" "$work/$name.log"
    rm -f "$work/$name.json"
  fi
}

# run_round R: runs the command lines of the array `jobs`, in order when R is
# even and in reverse when it is odd, so no side always goes first.
run_round() {
  # shellcheck disable=SC2154  # jobs: the caller's
  local r=$1 n=${#jobs[@]} j
  for ((j = 0; j < n; j++)); do
    if (( r % 2 )); then eval "${jobs[n - 1 - j]}"; else eval "${jobs[j]}"; fi
  done
}

# finish_env START: the last lines of env.txt, the load average now and the
# wall time since START (a value of SECONDS).
finish_env() {
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$work/env.txt"
  echo "benchmark wall time: $((SECONDS - $1)) s" >> "$work/env.txt"
}

# write_summary ARGS... <<'EOF' ... EOF: runs the Python summary on stdin
# with bench/summary.py importable.
write_summary() { PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$PY" - "$@"; }
