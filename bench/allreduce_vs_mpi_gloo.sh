#!/usr/bin/env bash
# microddp's all-reduce against Open MPI's MPI_Allreduce and PyTorch's gloo,
# side by side in one run: 2 ranks, float32 sum, interleaved rounds (the order
# flips every round), medians [min..max], ratios taken per round.
#
# Per round:
#   * `microddp bench allreduce --algo auto` (what a job gets: over TCP
#     recursive doubling for small messages, the ring above; over shared
#     memory the direct all-reduce, its buffer in the shared arena as DDP's
#     buckets are, and, as a column of its own, a private buffer, which
#     takes doubling or the ring through the shm rings); bench/mpi_allreduce.c under mpirun with the TCP BTL on lo and with
#     the vader (shared-memory) BTL, each both with Open MPI's default busy
#     polling and with mpi_yield_when_idle 1 (its setting for a busy machine;
#     the MPI columns take the better of the two per round and size);
#     bench/gloo_allreduce.py (torch.distributed gloo on 127.0.0.1);
#     sizes 4 KiB .. 256 MiB, factor 4 (small sizes with many iterations,
#     large ones with few);
#   * the physical limits: loopback TCP, one iperf3 stream, and single-core
#     memory bandwidth (bench/membw.c, STREAM-like copy/triad on 256 MB arrays);
#   * shared memory at 4 ranks (on 2 cores: oversubscribed): microddp auto
#     against vader, sizes as above;
#   * microddp ring vs naive vs tree over shm at 2 and 4 ranks, 4 KiB .. 4 MiB,
#     factor 2, to check the `--algo auto` crossover (core/comm/algorithms/auto_select.cc).
# The C programs are compiled with mpicc / gcc into the work directory.
#
# Usage: bench/allreduce_vs_mpi_gloo.sh [--quick] [--rounds N] [--out FILE.md]
#                                       [--no-algos] [--keep DIR] [--summarize DIR]
# --summarize DIR: no runs; only the summary of a directory kept with --keep.
# Environment: MICRODDP (default: <repo>/build/cli/microddp), PYTHON (default
# /usr/bin/python3, Debian's python3-torch), MPICC, MPIRUN, CC (default gcc),
# MPI_BIND (default none: mpirun --bind-to none, unbound like the other sides).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}
CC=${CC:-gcc}
MPI_BIND=${MPI_BIND:-none}

rounds=3
quick=0
algos=1
out=""
keep=""
summarize=""
run_width=32
run_cpu=1

while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1; rounds=1; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-algos) algos=0; shift ;;
    --keep) keep=$2; shift 2 ;;
    --summarize) summarize=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done

[[ -z $out ]] || out=$(realpath -m "$out")
if [[ -n $summarize ]]; then
  work=$summarize
  rounds=$(kept_rounds membw.log)
else
require_microddp
require_torch torch.distributed
for t in "$MPICC" "$MPIRUN" "$CC" iperf3; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

make_work_dir allreduce_vs_mpi_gloo

"$MPICC" -O2 -o "$work/mpi_allreduce" "$here/mpi_allreduce.c"
"$CC" -O3 -march=native -o "$work/membw" "$here/membw.c"

# Iterations: (warm-up, timed) for the small sizes (4K..1M), the large ones
# (4M..256M) and the algorithm sweep (4K..4M, factor 2). 2000 timed small
# ones: at 4 KiB that is about 6 ms, and one preemption of a millisecond on
# a shared machine then moves the mean by a sixth, not by two thirds.
if (( quick )); then small=(20 100); large=(1 4); alg=(5 30); iperf_s=2; membw_reps=3
else small=(100 2000); large=(2 10); alg=(10 100); iperf_s=3; membw_reps=5; fi

# --oversubscribe: 4 ranks on a 2-core machine (the 4-rank shared-memory sweep).
mpi_flags=(--oversubscribe --bind-to "$MPI_BIND" --mca pml ob1)
(( EUID == 0 )) && mpi_flags=(--allow-run-as-root "${mpi_flags[@]}")
# shellcheck disable=SC2054  # the commas are part of the MCA values
mpi_tcp=(--mca btl tcp,self --mca btl_tcp_if_include lo)
# shellcheck disable=SC2054
mpi_shm=(--mca btl vader,self)

{
  machine_info
  echo "microddp: $MICRODDP ($(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'), working tree may differ)"
  echo "mpi: $("$MPIRUN" --version 2>/dev/null | head -1); mpirun -np 2|4 ${mpi_flags[*]} + [${mpi_tcp[*]}] or [${mpi_shm[*]}]"
  echo "torch: $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null), gloo on 127.0.0.1, torch.set_num_threads(1)"
  echo "iperf3: $(iperf3 --version 2>/dev/null | head -1)"
  echo "iterations: small sizes ${small[0]}+${small[1]}, large ${large[0]}+${large[1]}, algorithm sweep ${alg[0]}+${alg[1]} (warm-up+timed)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$work/env.txt"
cat "$work/env.txt"

sweep_args() {  # small|large|alg -> -b -e -f --warmup --iters
  case $1 in
    small) echo "-b 4K -e 1M -f 4 --warmup ${small[0]} --iters ${small[1]}" ;;
    large) echo "-b 4M -e 256M -f 4 --warmup ${large[0]} --iters ${large[1]}" ;;
    alg) echo "-b 4K -e 4M -f 2 --warmup ${alg[0]} --iters ${alg[1]}" ;;
  esac
}
mddp() {  # NAME PART NPROC TRANSPORT ALGO [BUFFER: shared (default) | private]
  # shellcheck disable=SC2046
  run "$1" "$MICRODDP" bench allreduce --nproc "$3" --transport "$4" --algo "$5" \
    --buffer "${6:-shared}" $(sweep_args "$2") --json "$work/$1.json"
}
mpi() {  # NAME PART tcp|shm YIELD(0|1) [NPROC: 2]
  local -n btl=mpi_$3
  # shellcheck disable=SC2046
  run "$1" "$MPIRUN" -np "${5:-2}" "${mpi_flags[@]}" "${btl[@]}" --mca mpi_yield_when_idle "$4" \
    "$work/mpi_allreduce" $(sweep_args "$2") --json "$work/$1.json"
}
gloo() {  # NAME PART
  # shellcheck disable=SC2046
  run "$1" "$PY" "$here/gloo_allreduce.py" --nproc 2 $(sweep_args "$2") --json "$work/$1.json"
}
membw() { run "$1" "$work/membw" --reps "$membw_reps" --json; }
iperf() {  # NAME: one stream over loopback, a free port
  local port
  port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  iperf3 -s -1 -B 127.0.0.1 -p "$port" > "$work/$1.server.log" 2>&1 &
  local spid=$!
  sleep 0.5
  run "$1" iperf3 -c 127.0.0.1 -p "$port" -t "$iperf_s" -J
  wait "$spid" 2>/dev/null || true
}

start=$SECONDS
for ((r = 0; r < rounds; r++)); do
  p="r${r}"
  jobs=("membw ${p}_membw" "iperf ${p}_iperf3")
  for part in small large; do
    jobs+=(
      "mddp ${p}_${part}_mddp_tcp $part 2 tcp auto"
      "mpi ${p}_${part}_mpi_tcp $part tcp 0"
      "gloo ${p}_${part}_gloo $part"
      "mpi ${p}_${part}_mpi_tcp_y $part tcp 1"
      "mddp ${p}_${part}_mddp_shm $part 2 shm auto"
      "mpi ${p}_${part}_mpi_shm $part shm 0"
      "mddp ${p}_${part}_mddp_shm_priv $part 2 shm auto private"
      "mpi ${p}_${part}_mpi_shm_y $part shm 1"
      "mddp ${p}_${part}_mddp_shm4 $part 4 shm auto"
      "mpi ${p}_${part}_mpi_shm4 $part shm 0 4"
      "mpi ${p}_${part}_mpi_shm4_y $part shm 1 4"
    )
  done
  if (( algos )); then
    for n in 2 4; do
      for a in ring naive tree; do jobs+=("mddp ${p}_alg_n${n}_${a} alg $n shm $a"); done
    done
  fi
  echo "round $((r + 1))/$rounds"
  run_round "$r"
done
finish_env "$start"
fi

write_summary "$work" "$rounds" "$out" "$root/core/comm/algorithms/auto_select.cc" <<'EOF'
import json, math, os, re, sys

import summary
from summary import clean, fmt, med, mval, ratio

work, rounds, out, auto_src = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
env = summary.env_lines(work)
KiB, MiB = 1 << 10, 1 << 20
IMPLS = [("mddp_tcp", "microddp auto, TCP"), ("mpi_tcp", "Open MPI, TCP (lo)"), ("gloo", "torch gloo"),
         ("mddp_shm", "microddp auto, shm"), ("mpi_shm", "Open MPI, vader (shm)"),
         ("mddp_shm_priv", "microddp auto, shm, private buffer")]
IMPLS4 = [("mddp_shm4", "microddp auto, shm, 4 ranks"), ("mpi_shm4", "Open MPI, vader, 4 ranks")]


def cpu_pct(name):
    return summary.cpu_pct(work, name)


def rows(name):
    """{bytes: row} from microddp's --json (one object) or the JSON lines of mpi/gloo."""
    f = os.path.join(work, name + ".json")
    if not os.path.exists(f) or os.path.getsize(f) == 0:
        return {}
    text = open(f).read()
    try:
        res = json.loads(text)["results"]
    except (ValueError, KeyError):
        res = [json.loads(l) for l in text.splitlines() if l.strip().startswith("{")]
    return {r["bytes"]: r for r in res}


def part_of(size):
    return "small" if size <= MiB else "large"


def raw(r, impl, size, key="busbw_gbps"):
    row = rows(f"r{r}_{part_of(size)}_{impl}").get(size)
    return row[key] if row and row.get("wrong", 0) == 0 else None


def val(r, impl, size, key="busbw_gbps"):
    """For the MPI columns: the better of busy polling and mpi_yield_when_idle in that round."""
    if impl not in ("mpi_tcp", "mpi_shm", "mpi_shm4"):
        return raw(r, impl, size, key)
    xs = clean([raw(r, impl, size, key), raw(r, impl + "_y", size, key)])
    if not xs:
        return None
    return min(xs) if key == "time_us" else max(xs)


def pct(x):
    return f"{x:.0f}"


def target(value, goal, higher_better):
    if value is None:
        return "n/a"
    ok = value >= goal if higher_better else value <= goal
    return "**met**" if ok else "**missed**"


def hsize(b):
    return f"{b // MiB} MiB" if b >= MiB else f"{b // KiB} KiB"


R = range(rounds)
sizes = sorted(set().union(*[rows(f"r{r}_{p}_{i}").keys() for r in R for p in ("small", "large")
                             for i, _ in IMPLS]) or [0])
sizes = [s for s in sizes if s]
bus = {i: {s: [val(r, i, s) for r in R] for s in sizes} for i, _ in IMPLS + IMPLS4}
tim = {i: {s: [val(r, i, s, "time_us") for r in R] for s in sizes} for i, _ in IMPLS + IMPLS4}

L = ["# All-reduce: microddp vs Open MPI vs gloo, 2 ranks (and 4 on shared memory), float32 sum", ""]
L.append(f"Median [min..max] over {rounds} interleaved round(s) (order flipped every round); ratios are taken "
         "per round (same round, adjacent runs) and then the median. busbw = algbw = S/t for 2 ranks, "
         "2(n-1)/n · S/t for n. "
         "`CPU%` is the share of one core a run got (both ranks together; 200 % = both cores).")
L += ["", "```"] + env + ["```", ""]

# Limits.
ip = []
for r in R:
    f = os.path.join(work, f"r{r}_iperf3.log")
    try:
        ip.append(json.load(open(f))["end"]["sum_received"]["bits_per_second"] / 8e9)
    except Exception:
        ip.append(None)
mb = []
for r in R:
    f = os.path.join(work, f"r{r}_membw.log")
    j = None
    if os.path.exists(f):
        for l in open(f):
            if l.startswith("{"):
                j = json.loads(l)
    mb.append(j)
copy = [j["copy_gbps"] if j else None for j in mb]
triad = [j["triad_gbps"] if j else None for j in mb]
L.append("## Physical limits, this run")
L.append("")
L.append("| what | GB/s |")
L.append("|---|---|")
L.append(f"| loopback TCP, one iperf3 stream | {med(ip)} |")
L.append(f"| memory, one core, copy (STREAM count: 2 × 256 MB moved) | {med(copy)} |")
L.append(f"| memory, one core, triad (3 × 256 MB) | {med(triad)} |")
L.append("")

# Headline.
S64, S4K = 64 * MiB, 4 * KiB
best_other = [max(clean([a, b])) if clean([a, b]) else None for a, b in zip(bus["mpi_tcp"].get(S64, []),
                                                                         bus["gloo"].get(S64, []))]
r_tcp = ratio(bus["mddp_tcp"].get(S64, []), best_other)
r_shm = ratio(bus["mddp_shm"].get(S64, []), bus["mpi_shm"].get(S64, []))
lat_shm, lat_tcp = tim["mddp_shm"].get(S4K, []), tim["mddp_tcp"].get(S4K, [])
L.append("## Targets")
L.append("")
L.append("| measure | measured | target | |")
L.append("|---|---|---|---|")
L.append(f"| 64 MiB busbw, microddp TCP ÷ better of MPI TCP and gloo | {med(r_tcp)} "
         f"({med(bus['mddp_tcp'].get(S64, []))} vs MPI {med(bus['mpi_tcp'].get(S64, []))}, gloo "
         f"{med(bus['gloo'].get(S64, []))} GB/s) | ≥ 1.2 | {target(mval(r_tcp), 1.2, True)} |")
L.append(f"| 64 MiB busbw, microddp shm ÷ MPI vader | {med(r_shm)} ({med(bus['mddp_shm'].get(S64, []))} vs "
         f"{med(bus['mpi_shm'].get(S64, []))} GB/s) | ≥ 2 | {target(mval(r_shm), 2, True)} |")
for mine, theirs, ranks in (("mddp_shm", "mpi_shm", 2), ("mddp_shm4", "mpi_shm4", 4)):
    per_size = {s: ratio(bus[mine][s], bus[theirs][s]) for s in sizes}
    per_size = {s: v for s, v in per_size.items() if clean(v)}
    if not per_size:
        continue
    worst = min(per_size, key=lambda s: mval(per_size[s]))
    below = [hsize(s) for s in per_size if mval(per_size[s]) < 1]
    L.append(f"| microddp shm ÷ MPI vader busbw, every size 4 KiB..256 MiB, {ranks} ranks (worst: {hsize(worst)}) | "
             f"{med(per_size[worst])} | ≥ 1 | {target(mval(per_size[worst]), 1, True)}"
             f"{' (below 1 at ' + ', '.join(below) + ')' if below else ''} |")
r_lat = ratio(lat_shm, tim["mpi_shm"].get(S4K, []))
L.append(f"| 4 KiB latency, microddp shm ÷ MPI vader ({med(lat_shm)} vs {med(tim['mpi_shm'].get(S4K, []))} µs) | "
         f"{med(r_lat)} | ≤ 1 | {target(mval(r_lat), 1, False)} |")
L.append(f"| 4 KiB latency, microddp TCP (MPI TCP {med(tim['mpi_tcp'].get(S4K, []))} µs, gloo "
         f"{med(tim['gloo'].get(S4K, []))} µs) | {med(lat_tcp)} µs | ≤ 30 µs | {target(mval(lat_tcp), 30, False)} |")
L.append("")

# Sweep.
L.append("## Sweep: busbw GB/s")
L.append("")
L.append(f"Limits beside it: loopback TCP {fmt(mval(ip))} GB/s (iperf3, one stream); one core copies memory at "
         f"{fmt(mval(copy))} GB/s (triad {fmt(mval(triad))}).")
L.append("")
L.append("| size | " + " | ".join(n for _, n in IMPLS) + " | TCP: microddp ÷ best other | shm: microddp ÷ vader |")
L.append("|---" * (len(IMPLS) + 3) + "|")
for s in sizes:
    bo = [max(clean([a, b])) if clean([a, b]) else None for a, b in zip(bus["mpi_tcp"][s], bus["gloo"][s])]
    L.append(f"| {hsize(s)} | " + " | ".join(med(bus[i][s]) for i, _ in IMPLS) +
             f" | {med(ratio(bus['mddp_tcp'][s], bo))} | {med(ratio(bus['mddp_shm'][s], bus['mpi_shm'][s]))} |")
L.append("")
L.append("Shared memory at 4 ranks (on 2 cores: two ranks a core), busbw GB/s and time, µs (medians):")
L.append("")
L.append("| size | " + " | ".join(n for _, n in IMPLS4) + " | microddp ÷ vader | " +
         " | ".join(n + ", µs" for _, n in IMPLS4) + " |")
L.append("|---" * (2 * len(IMPLS4) + 2) + "|")
for s in sizes:
    L.append(f"| {hsize(s)} | " + " | ".join(med(bus[i][s]) for i, _ in IMPLS4) +
             f" | {med(ratio(bus['mddp_shm4'][s], bus['mpi_shm4'][s]))} | " +
             " | ".join(fmt(mval(tim[i][s])) for i, _ in IMPLS4) + " |")
L.append("")
L.append("Time per all-reduce, µs (median):")
L.append("")
L.append("| size | " + " | ".join(n for _, n in IMPLS) + " |")
L.append("|---" * (len(IMPLS) + 1) + "|")
for s in sizes:
    L.append(f"| {hsize(s)} | " + " | ".join(fmt(mval(tim[i][s])) for i, _ in IMPLS) + " |")
L.append("")
MPIV = [("mpi_tcp", "TCP, busy polling (default)"), ("mpi_tcp_y", "TCP, yield_when_idle"),
        ("mpi_shm", "vader, busy polling (default)"), ("mpi_shm_y", "vader, yield_when_idle")]
L.append("Open MPI's two progress settings (the MPI columns above take the better per round): busbw GB/s, "
         "median [min..max]:")
L.append("")
L.append("| size | " + " | ".join(n for _, n in MPIV) + " |")
L.append("|---" * (len(MPIV) + 1) + "|")
for s in sizes:
    L.append(f"| {hsize(s)} | " + " | ".join(med([raw(r, i, s) for r in R]) for i, _ in MPIV) + " |")
L.append("")
RUNS = IMPLS[:1] + MPIV[:2] + IMPLS[2:4] + MPIV[2:]
L.append("CPU share of each run (% of one core, both ranks together), median [min..max] over rounds:")
L.append("")
L.append("| run | " + " | ".join(("microddp " if i.startswith("mddp") else "MPI " if i.startswith("mpi") else "")
                                  + n.replace("microddp auto, ", "").replace(" (default)", "") for i, n in RUNS) + " |")
L.append("|---" * (len(RUNS) + 1) + "|")
for part, label in (("small", "4 KiB..1 MiB"), ("large", "4 MiB..256 MiB")):
    L.append(f"| {label} | " + " | ".join(med([cpu_pct(f'r{r}_{part}_{i}') for r in R], pct) for i, _ in RUNS) + " |")
L.append("")
L.append(f"membw {med([cpu_pct(f'r{r}_membw') for r in R], pct)} %, iperf3 client "
         f"{med([cpu_pct(f'r{r}_iperf3') for r in R], pct)} %.")
L.append("")

# Algorithms.
alg = {}
for n in (2, 4):
    for a in ("ring", "naive", "tree"):
        alg[(n, a)] = [rows(f"r{r}_alg_n{n}_{a}") for r in R]
if any(any(v) for v in alg.values()):
    asizes = sorted(set().union(*[d.keys() for v in alg.values() for d in v]))
    L.append("## microddp ring vs naive vs tree, shared memory")
    L.append("")
    L.append("busbw GB/s (median over rounds) and the fastest by median time; 4 ranks share the 2 cores.")
    L.append("")
    L.append("| size | n=2 ring | n=2 naive | n=2 tree | fastest | n=4 ring | n=4 naive | n=4 tree | fastest | "
             "n=4 tree ÷ ring time |")
    L.append("|---" * 10 + "|")

    def g(n, a, s, key):
        return mval([d.get(s, {}).get(key) for d in alg[(n, a)]])

    tree_wins = []
    for s in asizes:
        cells = []
        for n in (2, 4):
            t = {a: g(n, a, s, "time_us") for a in ("ring", "naive", "tree")}
            fastest = min((a for a in t if t[a]), key=lambda a: t[a], default="—")
            cells += [fmt(g(n, a, s, "busbw_gbps")) for a in ("ring", "naive", "tree")] + [fastest]
        tr = ratio([d.get(s, {}).get("time_us") for d in alg[(4, "tree")]],
                   [d.get(s, {}).get("time_us") for d in alg[(4, "ring")]])
        tree_wins.append((s, mval(tr)))
        L.append(f"| {hsize(s)} | " + " | ".join(cells) + f" | {med(tr)} |")
    L.append("")
    # What auto_select.cc does now, read from its constants.
    try:
        m = re.search(r"kDoublingMaxBytes\s*=\s*([0-9*\s]+);", open(auto_src).read())
        cap = eval(m[1]) if m and re.fullmatch(r"[0-9*\s]+", m[1]) else None
    except OSError:
        cap = None
    coef4 = (3 - 2) / (2 - 3 / 4)  # ((n-1) - L) / (L - (n-1)/n) at n = 4, L = 2: tree vs ring in alpha-beta
    if cap:
        L.append(f"`auto` now (auto_select.cc): recursive doubling up to {cap / KiB:.0f} KiB "
                 "(kDoublingMaxBytes), above it the cheaper of ring and tree by its alpha-beta model.")
    # Measured crossover at n = 4: the split "tree below T, ring from T on" that
    # costs least against the measured medians, a wrong choice costing |log(tree/ring time)|.
    pts = [(s, q) for s, q in tree_wins if q]
    cands = [s for s, _ in pts] + [2 * pts[-1][0]] if pts else []
    def cost(T):
        return sum(abs(math.log(q)) for s, q in pts if (s < T) != (q < 1))
    if cands:
        T = min(cands, key=cost)
        below = [s for s, _ in pts if s < T]
        wrong = [hsize(s) for s, q in pts if (s < T) != (q < 1)]
        if not below:
            L.append(f"Measured at n = 4: the ring is as fast or faster from {hsize(pts[0][0])} up, so the data "
                     f"suggest tree only below {hsize(pts[0][0])}: αβ ≲ {pts[0][0] / coef4 / KiB:.1f} KiB for the formula.")
        elif T in [s for s, _ in pts]:
            L.append(f"Measured at n = 4: the split that fits the medians best is tree up to {hsize(below[-1])}, ring "
                     f"from {hsize(T)}: a crossover between the two, i.e. αβ ≈ "
                     f"{below[-1] / coef4 / KiB:.0f}..{T / coef4 / KiB:.0f} KiB in the formula.")
        else:
            L.append(f"Measured at n = 4: the tree fits best at every size measured, up to {hsize(below[-1])}: the "
                     f"crossover lies above {hsize(below[-1])}, i.e. αβ ≳ {below[-1] / coef4 / KiB:.0f} KiB "
                     "in the formula.")
        if wrong:
            L.append(f"Sizes on the wrong side of that split: {', '.join(wrong)} (see the min..max: 4 ranks on 2 "
                     "cores are noisy).")
    n2 = [(s, [g(2, a, s, 'time_us') for a in ('ring', 'naive', 'tree')]) for s in asizes]
    ring_best2 = sum(1 for s, t in n2 if t[0] and all(x is None or t[0] <= x for x in t[1:]))
    L.append(f"At n = 2 the ring is fastest at {ring_best2} of {len(n2)} sizes of ring, naive and tree (recursive doubling is measured in the Sweep: it is what auto runs there below the cap).")
    L.append("")

# Busy machine? Other runnable work (load average above the core count) and
# the CPU share Open MPI's busy-polling runs got (about 200 % when both ranks
# have a core to themselves).
loads = [float(m[1]) for l in env for m in [re.match(r"load average at (?:start|end): ([\d.]+)", l)] if m]
cores = next((int(l.split(":")[1]) for l in env if l.startswith("cores:")), 0)
poll = clean([cpu_pct(f"r{r}_{part}_{i}") for r in R for part in ("small", "large") for i in ("mpi_tcp", "mpi_shm")])
if loads and cores and max(loads) > cores:
    L.insert(4, f"**Warning: the machine was busy** (load average {' → '.join(f'{x:.1f}' for x in loads)} on {cores} "
                f"cores; Open MPI's busy-polling runs got {pct(mval(poll)) if poll else '—'} % of a core for both ranks, where an idle "
                "machine gives them about 200 %). Each rank ran only part of the time: small-message latencies measure "
                "scheduler wake-ups more than the transport, and a side that busy-polls suffers most. Ratios of "
                "adjacent runs in one round still compare like with like.")
    L.insert(5, "")
summary.emit(L, out)
EOF
