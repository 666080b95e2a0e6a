#!/usr/bin/env python3
"""Chaos soak (docs/recovery.md, "Proof under chaos"): a job that heals,
killed at random, and what it cost.

`microddp run --nproc N --on-failure heal` of a small synthetic job on this
host; every 15-30 s (--every) one of its current ranks, chosen at random, is
killed with -9; `run` starts it again and it heals from the live ranks.
After --duration the job is stopped with SIGINT (as Ctrl-C would) and the
soak reports:
  * the kills, and the failures the job survived (the attempts that ended
    in a shrink), the heals (membership.jsonl's "grow" lines) and how long
    each change took to the next step;
  * the steps lost (metrics.jsonl's resume lines) and the goodput (time on
    steps that count / wall time, `microddp analyze`);
  * the loss against an uninterrupted run of the same job to the same step
    (the mean loss over the last 10% of the steps, both);
  * the coordinator's memory (VmRSS) at the start and at the end;
  * what is left behind: processes of the run, shared-memory segments,
    temporary files in the run directory (there must be none).
--quick is the CI version: 5 kills about every 8-12 s, no reference run.
--check exits 1 unless every kill was survived, the job trained to the end
and nothing was left behind.

    python3 bench/chaos_soak.py [--duration 600] [--every 15,30] [--nproc 4] [--seed 1]
              [--quick] [--check] [--json FILE] [--keep] [--microddp PATH]
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from restart_time import events, interrupt  # a JSON-lines file parsed; `run` stopped

JOB = ["--dataset", "fashion-mnist", "--width", "128", "--batch", "64",
       "--no-eval", "--log-every", "1000000", "--steps", "100000000", "--http-port", "-1",
       "--optimizer", "adam", "--lr", "0.001", "--seed", "3", "--check-replicas-every", "200",
       "--heartbeat-ms", "200", "--heartbeat-timeout-ms", "2000"]


def members(run_dir):
    """The pids of the current attempt's ranks (empty while it forms)."""
    try:
        with open(os.path.join(run_dir, "job.json")) as f:
            return [m["pid"] for m in json.load(f)["members"]]
    except (OSError, ValueError, KeyError):
        return []


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def coordinator_pid(run_pid):
    """run's child that is the coordinator."""
    for pid in subprocess.run(["pgrep", "-P", str(run_pid)], capture_output=True, text=True).stdout.split():
        try:
            if b"\0coordinator\0" in open(f"/proc/{pid}/cmdline", "rb").read():
                return int(pid)
        except OSError:
            pass
    return 0


def shm_names():
    return set(os.listdir("/dev/shm"))


def owned_by(name, pids):
    """Whether shared-memory segment `name` ("mddp-<job>-<pid ns>-<pid>-...")
    was made by one of `pids` (other jobs may run meanwhile)."""
    parts = name.split("-")
    return len(parts) > 3 and parts[0] == "mddp" and parts[3].isdigit() and int(parts[3]) in pids


def mean_loss_tail(metrics, last_step):
    """The mean training loss over the last 10% of steps 1..last_step (the
    record of the latest attempt for each step and rank)."""
    by_step = {}
    for r in metrics:
        if r.get("kind") == "step" and r["step"] <= last_step:
            key = (r["step"], r["rank"])
            if key not in by_step or by_step[key][0] <= r["attempt"]:
                by_step[key] = (r["attempt"], r["loss"])
    first = last_step - max(1, last_step // 10)
    tail = [v[1] for (s, _), v in by_step.items() if s > first]
    return sum(tail) / len(tail) if tail else float("nan")


def soak(a, work):
    run_dir = os.path.join(work, "run")
    shm_before = shm_names()
    log = open(os.path.join(work, "run.log"), "wb")
    run = subprocess.Popen([a.microddp, "run", "--nproc", str(a.nproc), "--on-failure", "heal",
                            "--max-restarts", "1000", "--run-dir", run_dir] + JOB,
                           stdout=log, stderr=subprocess.STDOUT)
    rng = random.Random(a.seed)
    kills = []
    seen = set()  # every worker's pid: the segments they made are the job's
    try:
        deadline = time.monotonic() + 60
        while len(members(run_dir)) < a.nproc:
            if run.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the job did not form (run.log in {work})")
            time.sleep(0.05)
        coord = coordinator_pid(run.pid)
        rss_start = rss_kb(coord)
        start = time.monotonic()
        next_kill = start + rng.uniform(*a.every)
        while time.monotonic() - start < a.duration and (a.kills == 0 or len(kills) < a.kills):
            if run.poll() is not None:
                raise RuntimeError(f"run ended (exit {run.returncode}) during the soak: see {work}/run.log")
            seen.update(members(run_dir))
            if time.monotonic() >= next_kill:
                pids = members(run_dir)
                if pids:
                    victim = rng.randrange(len(pids))
                    try:
                        os.kill(pids[victim], signal.SIGKILL)
                        kills.append({"t": time.monotonic() - start, "rank": victim, "pid": pids[victim]})
                        print(f"  {kills[-1]['t']:6.1f} s: kill -9 rank {victim} (pid {pids[victim]})", flush=True)
                    except ProcessLookupError:
                        pass
                next_kill = time.monotonic() + rng.uniform(*a.every)
            time.sleep(0.05)
        time.sleep(a.every[0] / 2)  # the last kill healed, the job back to its size
        rss_end = rss_kb(coord)
        wall = time.monotonic() - start
    finally:
        interrupt(run, 60)
    time.sleep(0.5)
    leftovers = subprocess.run(["pgrep", "-f", run_dir], capture_output=True, text=True).stdout.split()
    temps = [f for f in os.listdir(run_dir) if ".tmp" in f]
    return {"kills": kills, "wall_s": wall, "run_exit": run.returncode, "rss_start_kb": rss_start,
            "rss_end_kb": rss_end, "leftover_pids": leftovers,
            "leftover_shm": sorted(n for n in shm_names() - shm_before if owned_by(n, seen)),
            "leftover_temps": temps, "run_dir": run_dir}


def report(a, work, s):
    run_dir = s["run_dir"]
    metrics = events(os.path.join(run_dir, "metrics.jsonl"))
    membership = events(os.path.join(run_dir, "membership.jsonl"))
    analysis = json.loads(subprocess.run([a.microddp, "analyze", run_dir, "--json", "--no-report"],
                                         capture_output=True, text=True, check=True).stdout)
    left = sum(len(m["left"]) for m in membership)
    heals = [m for m in membership if m["how"] == "grow"]
    shrinks = [m for m in membership if m["how"] == "shrink"]
    steps_lost = sum(r.get("steps_lost", 0) for r in metrics if r.get("kind") == "resume")
    # Each kill the job survived ended an attempt in a shrink (a kill of a
    # newcomer before its first step leaves no membership line of its own).
    survived = sum(1 for r in metrics if r.get("kind") == "restart" and r.get("shrink"))
    last_step = max((r["step"] for r in metrics if r.get("kind") == "step"), default=0)
    out = {"kills": len(s["kills"]), "survived": survived, "left": left, "shrinks": len(shrinks), "heals": len(heals),
           "steps_lost": steps_lost, "last_step": last_step, "goodput": analysis["goodput"],
           "heal_s": [round(m["to_first_step_s"], 3) for m in heals],
           "shrink_s": [round(m["to_first_step_s"], 3) for m in shrinks],
           **{k: s[k] for k in ("wall_s", "run_exit", "rss_start_kb", "rss_end_kb", "leftover_pids",
                                "leftover_shm", "leftover_temps")}}
    out["loss_tail"] = mean_loss_tail(metrics, last_step)
    if not a.quick:
        ref = os.path.join(work, "reference")
        subprocess.run([a.microddp, "run", "--nproc", str(a.nproc), "--run-dir", ref] +
                       [x if x != "100000000" else str(last_step) for x in JOB],
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=True)
        out["reference_loss_tail"] = mean_loss_tail(events(os.path.join(ref, "metrics.jsonl")), last_step)
    med = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")
    print(f"chaos soak: {a.nproc} ranks, {out['wall_s']:.0f} s, {out['kills']} kills -9, {survived} survived "
          f"({out['shrinks']} shrinks, median {med(out['shrink_s']):.2f} s to the next step), "
          f"{out['heals']} heals (median {med(out['heal_s']):.2f} s to the next step); steps lost {steps_lost}; "
          f"{last_step} steps; goodput {out['goodput'] * 100:.1f}%")
    ref_text = (f", uninterrupted {out['reference_loss_tail']:.4f}" if "reference_loss_tail" in out else "")
    print(f"  loss over the last 10% of the steps: {out['loss_tail']:.4f}{ref_text}")
    print(f"  coordinator VmRSS {out['rss_start_kb'] / 1024:.1f} MiB at the start, {out['rss_end_kb'] / 1024:.1f} MiB "
          f"at the end; left behind: {len(out['leftover_pids'])} processes, {len(out['leftover_shm'])} shared-memory "
          f"segments, {len(out['leftover_temps'])} temporary files; run exited {out['run_exit']} (SIGINT at the end)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--every", default="15,30", help="seconds between kills: MIN,MAX")
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="5 kills about every 8-12 s, no reference run")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every kill was survived and nothing left")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the run directory and logs (printed)")
    ap.add_argument("--microddp", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "build", "cli", "microddp"))
    a = ap.parse_args()
    a.every = tuple(float(x) for x in a.every.split(","))
    a.kills = 0
    if a.quick:
        a.every, a.kills, a.duration = (8.0, 12.0), 5, 120
    work = tempfile.mkdtemp(prefix="mddp-chaos-")
    try:
        s = soak(a, work)
        out = report(a, work, s)
    finally:
        if a.keep:
            print(f"  kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    if a.check:
        problems = []
        # A rank slow to heartbeat on a loaded machine is one more shrink, and survived too.
        if out["survived"] < out["kills"]:
            problems.append(f"{out['kills']} kills but {out['survived']} shrinks the job went on from")
        if out["run_exit"] != 128 + signal.SIGINT:
            problems.append(f"run exited {out['run_exit']}, not by the SIGINT that ended the soak")
        if out["leftover_pids"] or out["leftover_shm"] or out["leftover_temps"]:
            problems.append("something was left behind")
        if problems:
            sys.exit("chaos_soak.py: " + "; ".join(problems))


if __name__ == "__main__":
    main()
