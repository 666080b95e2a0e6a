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
A fourth mode measures a heal instead (docs/recovery.md, "A newcomer heals"):
  heal     `microddp run --nproc 3 --on-failure heal --max-restarts 1` of an
           MLP whose parameters and Adam state weigh --state-mb (about 100 MB);
           one rank killed -9 after step 10, run starts it again, it joins the
           two survivors (which trained on meanwhile) and takes the state from
           them. Split from the coordinator's "grow" line (the newcomer joined):
             pause:    -> the grown attempt's first step ends, less one step
                       (what the running job lost to the heal),
             copy:     the state's transfer and check, from the worker's log line,
           against the job's step time and, for the copy's MB/s, the all-reduce
           busbw of `microddp bench allreduce` at 4 MB (the copy's chunk) on
           the same transport.
Prints one line per try, then median [min..max] per mode.

    python3 bench/restart_time.py [--tries 6] [--mode full,elastic,shrink,heal] [--elastic-wait-s 2]
              [--state-mb 100] [--microddp PATH]
"""
import argparse
import glob
import json
import os
import re
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


def heal_job(state_mb):
    """JOB with a 2-layer MLP whose fp32 parameters and two Adam moments weigh state_mb."""
    width = int((state_mb * 1e6 / 12 / 2) ** 0.5)  # about 2 width^2 parameters
    job = [a for a in JOB if a not in ("--checkpoint-every", "50", "--keep-checkpoints", "0")]
    job[job.index("--width") + 1] = str(width)
    return job + ["--depth", "2", "--optimizer", "adam", "--check-replicas-every", "-1"]


COPY_LINE = re.compile(r"took the state of step (\d+) from (\d+) live ranks?: ([\d.]+) MB in ([\d.]+) s "
                       r".*checked in ([\d.]+) s")


def heal_try(binary, victim, state_mb, work):
    """One heal: the pause it cost the running job, the copy, the step time (seconds)."""
    run_dir = os.path.join(work, "run")
    out = open(os.path.join(work, "run.log"), "wb")
    p = subprocess.Popen([binary, "run", "--nproc", "3", "--run-dir", run_dir, "--on-failure", "heal",
                          "--max-restarts", "1"] + heal_job(state_mb), stdout=out, stderr=subprocess.STDOUT)
    try:
        metrics = os.path.join(run_dir, "metrics.jsonl")
        steps_of = lambda ev, a: [e for e in ev if e.get("kind") == "step" and e.get("attempt") == a]

        def running(cond):
            if p.poll() is not None:
                raise RuntimeError(f"run ended (exit {p.returncode}): see {out.name}")
            return cond()
        wait(lambda: running(lambda: len(steps_of(events(metrics), 0)) >= 30), "10 steps of attempt 0", 300)
        with open(os.path.join(run_dir, "job.json")) as f:
            os.kill(json.load(f)["members"][victim]["pid"], signal.SIGKILL)
        grown = lambda: next((e["attempt"] for e in events(metrics) if e.get("grow")), None)
        wait(lambda: running(lambda: grown() is not None and steps_of(events(metrics), grown())),
             "the grown attempt's first step", 300)
        ev = events(metrics)
        grow_ns = next(e["time_unix_ns"] for e in ev if e.get("grow"))
        step_s = statistics.median(e["step_ms"] for e in steps_of(ev, 0)) / 1e3
        first_ns = min(e["time_unix_ns"] for e in steps_of(ev, grown()))
        copies = [COPY_LINE.search(line) for f in glob.glob(os.path.join(work, "*.log")) +
                  glob.glob(os.path.join(run_dir, "*.log")) for line in open(f, errors="replace")]
        copy = next(m for m in copies if m)
        return {"pause": (first_ns - grow_ns) / 1e9 - step_s, "step": step_s, "mb": float(copy.group(3)),
                "copy": float(copy.group(4)), "check": float(copy.group(5)), "sources": int(copy.group(2))}
    finally:
        interrupt(p, 30)


def interrupt(p, timeout):
    """Stops `run` process p as Ctrl-C would (it stops its children), or kills it after `timeout` s."""
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def allreduce_busbw(binary, work):
    """busbw (GB/s) of a 4 MB all-reduce over 3 ranks on shared memory."""
    out = os.path.join(work, "allreduce.json")
    subprocess.run([binary, "bench", "allreduce", "--nproc", "3", "--transport", "shm", "-b", "4M", "-e", "4M",
                    "--json", out], check=True, stdout=subprocess.DEVNULL)
    rows = json.load(open(out))
    rows = rows.get("results", rows) if isinstance(rows, dict) else rows
    return rows[-1]["busbw_gbps"]


def heal_mode(a):
    rows = []
    for i in range(a.tries):
        with tempfile.TemporaryDirectory(prefix="mddp-heal-") as work:
            r = heal_try(a.microddp, 2 - i % 3, a.state_mb, work)
        rows.append(r)
        print(f"heal try {i + 1}: kill -9 rank {2 - i % 3}: the newcomer took {r['mb']:.1f} MB from "
              f"{r['sources']} rank{'' if r['sources'] == 1 else 's'} in {r['copy']:.2f} s ({r['mb'] / r['copy']:.0f} MB/s), checked in {r['check']:.2f} s; the job paused "
              f"{r['pause']:.2f} s beyond its step of {r['step']:.2f} s")
        sys.stdout.flush()
    with tempfile.TemporaryDirectory(prefix="mddp-heal-") as work:
        busbw = allreduce_busbw(a.microddp, work)
    print(f"heal: pause beyond one step {fmt([r['pause'] for r in rows])}; copy {fmt([r['copy'] for r in rows])} "
          f"at {statistics.median(r['mb'] / r['copy'] for r in rows):.0f} MB/s, then the check "
          f"{fmt([r['check'] for r in rows])}, against a 4 MB all-reduce's busbw "
          f"of {busbw * 1e3:.0f} MB/s on the same transport; step {fmt([r['step'] for r in rows])} "
          f"({a.tries} tries, {rows[0]['mb']:.0f} MB of state)")


def fmt(xs):
    return f"{statistics.median(xs):.2f} s [{min(xs):.2f}..{max(xs):.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tries", type=int, default=6)
    ap.add_argument("--mode", default="full,elastic,shrink")
    ap.add_argument("--elastic-wait-s", type=float, default=2.0)
    ap.add_argument("--state-mb", type=float, default=100.0)
    ap.add_argument("--microddp", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "build", "cli", "microddp"))
    a = ap.parse_args()
    for mode in a.mode.split(","):
        if mode not in ("full", "elastic", "shrink", "heal"):
            sys.exit(f"restart_time.py: error: --mode {mode}: give full, elastic, shrink and/or heal")
        if mode == "heal":
            heal_mode(a)
            continue
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
