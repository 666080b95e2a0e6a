#!/usr/bin/env python3
"""Drives every flag of every microddp command with boundary and random
values (0, negative, huge, NaN, inf, empty, wrong type, odd paths) and fails
on any signal death, `internal check failed`, `internal error`, an exit code
other than 0 or 1, an exit 1 without a `microddp: error:` line, or a hang.

    flag_fuzz.py MICRODDP [--seed N] [--jobs N] [--only COMMAND]

The commands and their flags are read from `--help`, so a new flag is fuzzed
without touching this file. Every invocation gets small base arguments (one
step of a tiny synthetic job, short waits) so that a value that is accepted
finishes quickly; the value under test replaces the base argument of the
same flag. Flags shared by several commands (the training flags) are driven
with every value on `train` and on a seeded random sample elsewhere. Each
run is bounded (--timeout-s) and limited to 6 GiB of address space, so a
huge size fails to allocate instead of taking the machine's memory.
"""
import argparse
import concurrent.futures as futures
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time

TINY_JOB = ["--dataset", "synthetic", "--synthetic-size", "64", "--width", "8", "--depth", "1",
            "--batch", "8", "--steps", "1", "--no-eval", "--log-every", "1"]
# Base arguments per command: small, quick, never waiting long.
BASE = {
    "train": TINY_JOB,
    "run": ["--nproc", "1", "--http-port", "-1", "--rendezvous-timeout-s", "20"] + TINY_JOB,
    "coordinator": ["--world-size", "1", "--port", "0", "--http-port", "-1", "--rendezvous-timeout-s", "0.3"]
    + TINY_JOB,
    "worker": ["--coordinator", "127.0.0.1:1", "--connect-timeout-s", "0.3", "--join-timeout-s", "1"],
    "bench train": ["--nproc", "1", "--warmup", "0", "--iters", "1"] + TINY_JOB,
    "bench allreduce": ["--nproc", "1", "-b", "4", "-e", "4", "--iters", "1", "--warmup", "0",
                        "--fit-budget-s", "0.01", "--fit-rounds", "1"],
    "bench gemm": ["-m", "8", "-n", "8", "-k", "8", "--iters", "1"],
    "demo manual": ["--steps", "1", "--batch", "8"],
    "demo hooks": ["--nproc", "1", "--width", "8", "--depth", "1"],
    "demo bucketing": ["--nproc", "1", "--iters", "1"] + TINY_JOB,
    "demo collectives": ["--nproc", "1"],
    "verify": ["--nproc", "1"] + TINY_JOB,
    "model": ["--params", "1000"],
    "scale": ["--world-sizes", "1", "--steps", "1", "--skip", "0", "--batch", "8", "--rank-batch", "8",
              "--dataset", "synthetic", "--synthetic-size", "64", "--width", "8", "--http-port", "-1"],
    "analyze": ["RUN_DIR", "--no-report"],
    "data verify": [],
    "demo ring": ["--nproc", "2", "--elements", "4"],
    # Lab 1 runs in this process in well under a second; reset and list work in a scratch directory.
    "lab check": ["manual", "--speed-ranks", "0", "--work-dir", "lab-work"],
    "lab list": ["--work-dir", "lab-work"],
    "lab reset": ["manual", "--work-dir", "lab-work"],
    "lab solution": ["manual"],
}
# Flags whose large values legitimately make the command wait, work or fork
# that long or that much (a timeout, a linger, repetitions, ranks): they get
# no huge values, and small random ones.
WAITS = {"--rendezvous-timeout-s", "--connect-timeout-s", "--join-timeout-s", "--http-linger",
         "--heartbeat-timeout-ms", "--comm-timeout-ms", "--timeout-ms", "--steps", "--epochs", "--iters",
         "--warmup", "--fit-rounds", "--fit-budget-s", "--rounds", "--skip", "--heartbeat-ms", "--accumulate",
         "--synthetic-size", "--world-sizes", "--nproc", "--world-size", "--log-every"}
# Values that reach the parsing of particular flags (beyond their type's).
EXTRA = {
    "--dataset": ["idx:", "idx:/nonexistent", "fashion-mnist:x"],
    "--straggler": ["1:forward:nan", "0:data:1e9", "0:nowhere:1", "x:y:z"],
    "--device": ["cuda:99", "cuda:-1", "tpu"],
    "--coordinator": ["::", "127.0.0.1:99999", "[::1", "nonexistent.invalid:1"],
    "--world-sizes": ["1,0", "1,,2", "-2", "nan"],
    "--world-size": ["0,4", "1,x", "nan"],
    "--minbytes": ["nan", "99999999999999999999", "-4K", "4Q"],
    "--maxbytes": ["nan", "1000G", "0"],
    "--channels": ["0", "-3"],
}

BAD_TEXT = ["", "x", "-1", "x" * 4097, "/dev/null/x"]
INT_VALUES = ["0", "-1", "100000", "99999999999999999999", "x"]
FLOAT_VALUES = ["0", "-1", "nan", "inf", "1e308", "x"]
HUGE = {"100000", "99999999999999999999", "1e308", "inf"}


def parse_help(binary, command):
    """[(flag, type)] of `microddp COMMAND --help`; type is INT, UINT, FLOAT, TEXT or FLAG.
    Positionals come back as (name, type) with a name not starting with '-'."""
    out = subprocess.run([binary] + command.split() + ["--help"], capture_output=True, text=True,
                         timeout=30).stdout
    flags, section = [], ""
    for line in out.splitlines():
        if line and not line.startswith(" "):
            section = line.rstrip(":")
            continue
        m = re.match(r"^  ((?:-\w,)?(?:--[\w-]+)(?:,--[\w-]+)?|-\w)(\{\w+\})?(?:\s+(INT|UINT|FLOAT|TEXT))?", line)
        if m and not m.group(1).endswith("--help"):
            name = m.group(1).split(",")[-1]
            flags.append((name, m.group(3) or "FLAG"))
        elif section == "Positionals":
            p = re.match(r"^  (\w+)\s+(TEXT|INT|FLOAT)", line)
            if p:
                flags.append((p.group(1), p.group(2)))
    return flags


def subcommands(binary):
    def names(cmd):
        out = subprocess.run([binary] + cmd + ["--help"], capture_output=True, text=True, timeout=30).stdout
        part = out.split("Subcommands:")[1] if "Subcommands:" in out else ""
        return [l.split()[0] for l in part.splitlines() if l.startswith("  ") and l.split()]
    cmds = []
    for c in names([]):
        subs = names([c])
        cmds += [f"{c} {s}" for s in subs] if subs else [c]
    return cmds


def values_for(flag, kind, rng):
    if kind == "FLAG":
        return [None]
    base = {"INT": INT_VALUES, "UINT": INT_VALUES, "FLOAT": FLOAT_VALUES}.get(kind, BAD_TEXT)
    vals = [v for v in base + EXTRA.get(flag, []) if not (flag in WAITS and v in HUGE)]
    # A random value of the type, from the seeded generator (small for WAITS).
    if kind in ("INT", "UINT"):
        vals.append(str(rng.randrange(-3, 50) if flag in WAITS else rng.randrange(-(1 << 40), 1 << 40)))
    elif kind == "FLOAT":
        vals.append(repr(rng.uniform(-1, 3) if flag in WAITS else rng.uniform(-1e6, 1e6)))
    else:
        vals.append("".join(rng.choice("abc:/-_.,0129 ") for _ in range(rng.randrange(1, 12))))
    return vals


def with_value(base, flag, value):
    """base args with `flag`'s own base value (if any) replaced by `value`."""
    args, i = [], 0
    while i < len(base):
        if base[i] == flag:
            i += 2 if i + 1 < len(base) and not base[i + 1].startswith("--") else 1
            continue
        args.append(base[i])
        i += 1
    if not flag.startswith("-"):  # a positional: replaces the base's positional
        args = [value if a == "RUN_DIR" else a for a in args]
        return args if "RUN_DIR" in base else args + [value]
    return args + ([flag] if value is None else [flag, value])


def limit_child():
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def run_case(binary, command, args, timeout_s, cwd):
    cmd = [binary] + command.split() + args
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                         preexec_fn=limit_child, cwd=cwd)
    try:
        out, err = p.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return cmd, f"hang: still running after {timeout_s} s", err
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # children of run/scale, if any are left
        except ProcessLookupError:
            pass
    rc, text = p.returncode, out + err
    dt = time.monotonic() - t0
    if rc < 0:
        return cmd, f"killed by signal {-rc} ({signal.Signals(-rc).name})", text
    if rc > 128:
        return cmd, f"exit {rc} (a child killed by signal {rc - 128}?)", text
    for bad in ("internal check failed", "internal error"):
        if bad in text:
            return cmd, f"'{bad}' in the output", text
    if rc not in (0, 1):
        return cmd, f"exit {rc}, want 0 or 1", text
    if rc == 1 and "microddp: error:" not in err:
        return cmd, "exit 1 without a 'microddp: error:' line on stderr", text
    return cmd, None, dt


def make_run_dir(binary, root):
    run_dir = os.path.join(root, "run")
    args = with_value(with_value(TINY_JOB, "--steps", "12"), "--run-dir", run_dir)
    subprocess.run([binary, "run", "--nproc", "2", "--http-port", "-1"] + args, check=True, capture_output=True,
                   timeout=120)
    return run_dir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", "1")))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sample", type=int, default=24, help="cases per command for the shared training flags")
    ap.add_argument("--timeout-s", type=float, default=60)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    rng = random.Random(a.seed)
    root = tempfile.mkdtemp(prefix="microddp-fuzz-")
    run_dir = make_run_dir(binary, root)
    train_flags = {f for f, _ in parse_help(binary, "train")}

    cases = []
    for command in subcommands(binary):
        if a.only and command != a.only:
            continue
        base = [run_dir if x == "RUN_DIR" else x for x in BASE.get(command, [])]
        own, shared = [], []
        for flag, kind in parse_help(binary, command):
            for v in values_for(flag, kind, rng):
                case = (command, with_value(base, flag, v))
                (shared if command != "train" and flag in train_flags else own).append(case)
        cases += own + rng.sample(shared, min(a.sample, len(shared)))
    print(f"flag_fuzz: {len(cases)} invocations (seed {a.seed}, {a.jobs} at a time)", flush=True)

    failures, t0, spent = [], time.monotonic(), {}
    with futures.ThreadPoolExecutor(a.jobs) as pool:
        for (command, _), (cmd, why, detail) in zip(cases, pool.map(
                lambda c: run_case(binary, c[0], c[1], a.timeout_s, root), cases)):
            if not why:
                n, t = spent.get(command, (0, 0.0))
                spent[command] = (n + 1, t + detail)
            if why:
                failures.append((cmd, why, detail))
                tail = "\n".join(str(detail).strip().splitlines()[-3:])
                shown = " ".join(repr(x if len(x) < 40 else x[:20] + "...") for x in cmd[1:])
                print(f"FAIL: {shown}\n  {why}\n  {tail}", flush=True)
    subprocess.run(["rm", "-rf", root])
    for command, (n, t) in sorted(spent.items(), key=lambda kv: -kv[1][1])[:6]:
        print(f"  {command}: {n} invocations, {t:.0f} s")
    print(f"flag_fuzz: {len(cases)} invocations in {time.monotonic() - t0:.0f} s, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
