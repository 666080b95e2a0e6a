#!/usr/bin/env python3
"""How fast a dead rank is noticed (docs/failures.md), with default flags.

Each try starts a coordinator and 3 `microddp worker` processes on this host
(default heartbeat flags, a small synthetic job), waits until every rank has
made progress, then `kill -9`s one rank (ranks 0, 1, 2 in turn) and measures,
from the kill:
  * each survivor's exit,
  * the coordinator's verdict (its "job 'local' failed: ..." log line),
  * the coordinator's exit.
Prints one line per try, then median [min..max] of each, per transport.

    python3 bench/detection.py [--tries 6] [--transport tcp,shm] [--microddp PATH]
              [--stop]   # SIGSTOP instead of kill -9 (the heartbeat-timeout path)
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

JOB = ["--dataset", "synthetic", "--synthetic-size", "1024", "--width", "32", "--batch", "30",
       "--no-eval", "--log-every", "1000000", "--steps", "100000000"]


def lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


def one_try(binary, transport, victim, sig, work):
    addr = os.path.join(work, "addr")
    run_dir = os.path.join(work, "run")
    logs = {}

    def spawn(name, args):
        logs[name] = os.path.join(work, name + ".log")
        out = open(logs[name], "wb")
        return subprocess.Popen([binary] + args, stdout=out, stderr=subprocess.STDOUT)

    coord = spawn("coordinator", ["coordinator", "--world-size", "3", "--port", "0", "--address-file", addr,
                                  "--http-port", "-1", "--run-dir", run_dir, "--transport", transport] + JOB)
    procs = {}
    try:
        deadline = time.monotonic() + 30
        while not (os.path.exists(addr) and os.path.getsize(addr) > 0):
            if time.monotonic() > deadline or coord.poll() is not None:
                raise RuntimeError("the coordinator did not start")
            time.sleep(0.02)
        address = open(addr).read().strip()
        for r in range(3):
            env = dict(os.environ, RANK=str(r))
            logs[f"rank{r}"] = os.path.join(work, f"rank{r}.log")
            procs[r] = subprocess.Popen([binary, "worker", "--coordinator", address], env=env,
                                        stdout=open(logs[f"rank{r}"], "wb"), stderr=subprocess.STDOUT)
        metrics = os.path.join(run_dir, "metrics.jsonl")
        deadline = time.monotonic() + 60
        while lines(metrics) < 60:  # every rank well into training
            if time.monotonic() > deadline:
                raise RuntimeError("no progress")
            time.sleep(0.05)
        time.sleep(2.5)  # a few heartbeats into training: the verdict can say where the rank was
        t0 = time.monotonic()
        os.kill(procs[victim].pid, sig)
        exits, verdict = {}, None
        coord_exit = None
        while time.monotonic() - t0 < 60:
            now = time.monotonic() - t0
            for r, p in procs.items():
                if r != victim and r not in exits and p.poll() is not None:
                    exits[r] = now
            if verdict is None:
                with open(logs["coordinator"], "rb") as f:
                    if b"job 'local' failed" in f.read():
                        verdict = now
            if coord_exit is None and coord.poll() is not None:
                coord_exit = now
            if len(exits) == 2 and coord_exit is not None:
                break
            time.sleep(0.005)
        errors = {}
        for name, path in logs.items():
            with open(path, errors="replace") as f:
                errs = [l.strip() for l in f if l.startswith("microddp: error:")]
            errors[name] = errs[-1] if errs else ""
        return exits, verdict, coord_exit, errors
    finally:
        for p in list(procs.values()) + [coord]:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                except ProcessLookupError:
                    pass
            p.wait()


def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    return f"{statistics.median(xs):.2f} s [{min(xs):.2f}..{max(xs):.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tries", type=int, default=6)
    ap.add_argument("--transport", default="tcp,shm")
    ap.add_argument("--stop", action="store_true", help="SIGSTOP the victim instead of SIGKILL")
    ap.add_argument("--microddp", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "build", "cli", "microddp"))
    ap.add_argument("--verbose", action="store_true", help="print every process's error line")
    a = ap.parse_args()
    sig = signal.SIGSTOP if a.stop else signal.SIGKILL
    for transport in a.transport.split(","):
        survivors, verdicts, coord_exits = [], [], []
        for i in range(a.tries):
            victim = i % 3
            with tempfile.TemporaryDirectory(prefix="mddp-detect-") as work:
                exits, verdict, coord_exit, errors = one_try(a.microddp, transport, victim, sig, work)
            survivors += list(exits.values())
            verdicts.append(verdict)
            coord_exits.append(coord_exit)
            ex = ", ".join(f"rank {r} {t:.2f} s" for r, t in sorted(exits.items()))
            print(f"{transport} try {i + 1}: {'SIGSTOP' if a.stop else 'kill -9'} rank {victim}: "
                  f"survivors exit {ex}; coordinator verdict {verdict if verdict is None else f'{verdict:.2f} s'}, "
                  f"exit {coord_exit if coord_exit is None else f'{coord_exit:.2f} s'}")
            print(f"    coordinator: {errors['coordinator']}")
            if a.verbose:
                for r in range(3):
                    if r != victim:
                        print(f"    rank {r}: {errors[f'rank{r}']}")
            sys.stdout.flush()
        print(f"{transport}: survivors exit {fmt(survivors)}; coordinator verdict {fmt(verdicts)}, "
              f"exit {fmt(coord_exits)} ({a.tries} tries)")


if __name__ == "__main__":
    main()
