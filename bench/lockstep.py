#!/usr/bin/env python3
"""How much of DDP's gap to ranks that never talk is the ranks waiting for
each other. A job that all-reduces every step runs each step at the pace of
its slowest rank; ranks that never talk each run at their own. Measured on
the compute-only run itself: per step, the mean over ranks of their step
times against the largest, summed over the steps after the warm-up, is the
throughput a job in lockstep keeps at best, before one byte is reduced
(independent per-rank noise; noise that hits every rank at once costs
lockstep nothing, so this is an upper bound on the cost).

    python3 bench/lockstep.py [--microddp BIN] [--rounds 3] [--steps N] [--warmup N]
                              [--width W] [--batch B] [--out FILE.md]

Each round runs `microddp run --nproc 2` twice, compute only (`--local-sgd`
past the run) and bucketed DDP, in alternating order, one compute thread
per rank, the FullMLP of bench/README.md; samples/s from the ranks' own step
times (time_unix_ns after the warm-up). Prints per round DDP ÷ compute-only
and the lockstep bound mean/max, then their medians.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(binary, work, name, args, local_sgd):
    run_dir = os.path.join(work, name)
    cmd = [binary, "run", "--nproc", "2", "--http-port", "-1", "--width", str(args.width), "--depth", "16",
           "--batch", str(args.batch), "--loss", "mse", "--dataset", "synthetic-regression", "--threads", "1",
           "--steps", str(args.steps), "--no-eval", "--log-every", str(args.steps), "--run-dir", run_dir]
    if local_sgd:
        cmd += ["--local-sgd", "1000000000"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"lockstep: {' '.join(cmd)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    steps = {}
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        r = json.loads(line)
        if r.get("kind", "step") == "step" and r["step"] >= args.warmup:
            steps.setdefault(r["step"], {})[r["rank"]] = (r["step_ms"], r["time_unix_ns"])
    full = [s for s in sorted(steps) if len(steps[s]) == 2]
    if len(full) < 2:
        sys.exit(f"lockstep: {run_dir} has fewer than 2 steps after the warm-up")
    ends = [max(t for _, t in steps[s].values()) for s in (full[0], full[-1])]
    samples_per_s = (len(full) - 1) * args.batch / ((ends[1] - ends[0]) * 1e-9)
    mean = sum(statistics.fmean(ms for ms, _ in steps[s].values()) for s in full)
    slowest = sum(max(ms for ms, _ in steps[s].values()) for s in full)
    return samples_per_s, mean / slowest


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--microddp", default=os.environ.get("MICRODDP", "build/cli/microddp"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--out", default="")
    args = p.parse_args()
    if args.steps <= args.warmup + 2:
        sys.exit("lockstep: --steps must exceed --warmup by at least 3")
    rows = []
    with tempfile.TemporaryDirectory(prefix="mddp-lockstep-") as work:
        for r in range(args.rounds):
            order = [True, False] if r % 2 == 0 else [False, True]
            got = {}
            for compute_only in order:
                got[compute_only] = run(args.microddp, work, f"r{r}-{'compute' if compute_only else 'ddp'}",
                                        args, compute_only)
            (ddp, _), (alone, bound) = got[False], got[True]
            rows.append((ddp / alone, bound, ddp, alone))
            print(f"round {r + 1}: DDP {ddp:.0f} samples/s, compute only {alone:.0f}: "
                  f"DDP / compute-only {ddp / alone:.3f}, lockstep bound {bound:.3f}", flush=True)
    ratio = statistics.median(x[0] for x in rows)
    bound = statistics.median(x[1] for x in rows)
    text = (f"FullMLP W={args.width} B={args.batch}, 2 ranks, {args.steps} steps ({args.warmup} warm-up), "
            f"{args.rounds} rounds: DDP / compute-only {ratio:.3f} "
            f"[{min(x[0] for x in rows):.3f}..{max(x[0] for x in rows):.3f}], "
            f"lockstep bound (compute-only mean / slowest rank per step) {bound:.3f} "
            f"[{min(x[1] for x in rows):.3f}..{max(x[1] for x in rows):.3f}]")
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
