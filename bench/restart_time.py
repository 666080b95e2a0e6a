#!/usr/bin/env python3
"""From a kill -9 to the first step of the next attempt (docs/recovery.md).

Each try trains a 3-rank job on this host (shared memory, a small synthetic
job, --checkpoint-every 50), kills one rank with -9 once step 100's
checkpoint exists (rank 0, 1, 2 in turn), and reads metrics.jsonl's clock
stamps (same host, same clock) to split the time from the kill into:
  * detect:  the kill -> the coordinator's "restart" line (the attempt ended),
  * form:    -> the next attempt's "attempt" line (every rank joined again),
  * step:    -> the first training step of that attempt ends (the checkpoint
             loaded, broadcast, the data plane set up, one step computed).
Three modes (--mode full,elastic,shrink):
  full     `microddp run --nproc 3 --max-restarts 1`: run starts the killed
           worker again; the job re-forms with 3 ranks.
  shrink   `microddp run --nproc 3 --on-failure shrink`: the two survivors
           re-form in their own processes from the state they hold (the
           coordinator's "restart" line says "shrink": true; no checkpoint
           is read).
  elastic  a coordinator with --min-nproc 2 --elastic-wait-s W and 3 workers
           with --restart; the killed one is not started again: the next
           attempt forms with 2 ranks once the elastic wait passed (so `form`
           includes W by design).
Each try also counts the steps computed again: the highest step logged in
attempt 0, less the step attempt 1 went on from.
Prints one line per try, then median [min..max] per mode.

    python3 bench/restart_time.py [--tries 6] [--mode full,elastic,shrink] [--elastic-wait-s 2]
              [--microddp PATH]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

JOB = ["--dataset", "synthetic", "--synthetic-size", "1024", "--width", "32", "--batch", "60",
       "--no-eval", "--log-every", "1000000", "--steps", "100000000", "--checkpoint-every", "50",
       "--keep-checkpoints", "0", "--http-port", "-1", "--transport", "shm"]
CKPT = 100


def events(metrics):
    """metrics.jsonl's lines, parsed (a torn last line skipped)."""
    out = []
    try:
        with open(metrics) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def wait(cond, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def one_try(binary, mode, victim, elastic_wait, work):
    run_dir = os.path.join(work, "run")
    procs = []

    def spawn(name, args, env=None):
        out = open(os.path.join(work, name + ".log"), "wb")
        p = subprocess.Popen([binary] + args, stdout=out, stderr=subprocess.STDOUT,
                             env=dict(os.environ, **(env or {})))
        procs.append(p)
        return p

    try:
        if mode in ("full", "shrink"):
            how = ["--max-restarts", "1"] if mode == "full" else ["--on-failure", "shrink"]
            spawn("run", ["run", "--nproc", "3", "--run-dir", run_dir] + how + JOB)
        else:
            addr = os.path.join(work, "addr")
            spawn("coordinator", ["coordinator", "--world-size", "3", "--port", "0", "--address-file", addr,
                                  "--max-restarts", "1", "--min-nproc", "2", "--elastic-wait-s",
                                  str(elastic_wait), "--run-dir", run_dir] + JOB)
            wait(lambda: os.path.exists(addr) and os.path.getsize(addr) > 0, "the coordinator")
            address = open(addr).read().strip()
            for r in range(3):
                spawn(f"rank{r}", ["worker", "--coordinator", address, "--restart"], {"RANK": str(r)})
        ckpt = os.path.join(run_dir, "checkpoints", f"step-{CKPT:08d}.safetensors")
        wait(lambda: os.path.exists(ckpt), f"step {CKPT}'s checkpoint")
        with open(os.path.join(run_dir, "job.json")) as f:
            pid = json.load(f)["members"][victim]["pid"]
        killed_ns = time.time_ns()
        os.kill(pid, signal.SIGKILL)
        metrics = os.path.join(run_dir, "metrics.jsonl")

        def first_step():
            steps = [e["time_unix_ns"] for e in events(metrics)
                     if e.get("kind") == "step" and e.get("attempt") == 1]
            return min(steps) if steps else None
        wait(lambda: first_step() is not None, "the first step of attempt 1")
        ev = events(metrics)
        restart = next(e["time_unix_ns"] for e in ev if e.get("kind") == "restart")
        formed = next(e for e in ev if e.get("kind") == "attempt" and e.get("attempt") == 1)
        steps = lambda a: [e["step"] for e in ev if e.get("kind") == "step" and e.get("attempt") == a]
        s = lambda ns: (ns - killed_ns) / 1e9
        return {"detect": s(restart), "form": s(formed["time_unix_ns"]), "step": s(first_step()),
                "world_size": formed["world_size"], "redone": max(steps(0)) - (min(steps(1)) - 1)}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def fmt(xs):
    return f"{statistics.median(xs):.2f} s [{min(xs):.2f}..{max(xs):.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tries", type=int, default=6)
    ap.add_argument("--mode", default="full,elastic,shrink")
    ap.add_argument("--elastic-wait-s", type=float, default=2.0)
    ap.add_argument("--microddp", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "build", "cli", "microddp"))
    a = ap.parse_args()
    for mode in a.mode.split(","):
        if mode not in ("full", "elastic", "shrink"):
            sys.exit(f"restart_time.py: error: --mode {mode}: give full, elastic and/or shrink")
        rows = []
        for i in range(a.tries):
            victim = i % 3
            with tempfile.TemporaryDirectory(prefix="mddp-restart-") as work:
                r = one_try(a.microddp, mode, victim, a.elastic_wait_s, work)
            rows.append(r)
            print(f"{mode} try {i + 1}: kill -9 rank {victim}: restart line {r['detect']:.2f} s, attempt 1 "
                  f"formed ({r['world_size']} ranks) {r['form']:.2f} s, its first step {r['step']:.2f} s "
                  f"after the kill; {r['redone']} steps computed again")
            sys.stdout.flush()
        print(f"{mode}: kill -9 -> restart line {fmt([r['detect'] for r in rows])}; -> formed "
              f"{fmt([r['form'] for r in rows])}; -> first step {fmt([r['step'] for r in rows])}; "
              f"steps computed again {max(r['redone'] for r in rows)} at most "
              f"({a.tries} tries{'' if mode != 'elastic' else f', --elastic-wait-s {a.elastic_wait_s:g}'})")


if __name__ == "__main__":
    main()
