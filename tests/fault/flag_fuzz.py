#!/usr/bin/env python3
"""Drives every flag of every microddp command with boundary and random
values (0, negative, huge, NaN, inf, empty, wrong type, odd paths) and fails
on any signal death, `internal check failed`, `internal error`, an exit code
other than 0 or 1, an exit 1 without a `microddp: error:` line, or a hang.

    flag_fuzz.py MICRODDP [--seed N] [--jobs N] [--only COMMAND]
    flag_fuzz.py --self-test

The commands and their flags are read from `--help`, so a new flag is fuzzed
without touching this file. Every invocation gets small base arguments (one
step of a tiny synthetic job, short waits) so that a value that is accepted
finishes quickly; the value under test replaces the base argument of the
same flag. Flags shared by several commands (the training flags) are driven
with every value on `train` and on a seeded random sample elsewhere. Each
run is limited to 6 GiB of address space, so a huge size fails to allocate
instead of taking the machine's memory.

A hang is told from slowness by the CPU time of the invocation's processes
(its session), never by the wall clock alone, so a loaded machine does not
turn a slow case into a failure: a case hangs when its processes use no CPU
for --idle-s seconds in a row (blocked for good), or more than --cpu-s
seconds of CPU in all (spinning). --self-test plants both kinds in a fake
binary, and a slow case that must not count, and checks the verdicts.
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
# no large valid value (100000), small random ones, and the values past any
# limit (1e308, 2^66), which they must refuse rather than wait for.
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
LARGE_BUT_VALID = {"100000"}


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
    vals = [v for v in base + EXTRA.get(flag, []) if not (flag in WAITS and v in LARGE_BUT_VALID)]
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


def session_cpu_s(sid):
    """CPU seconds (user + system) used so far by the processes of session `sid`,
    with the children they have reaped. Those that exited unreaped since the
    last look are missed, so the sum may dip: callers look for growth only."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: the session id
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / tick


def wait_watched(p, idle_s, cpu_s, poll_s=0.25):
    """Waits for `p` (a session leader). Returns None when it exited, else why it
    hangs: no CPU for idle_s seconds of wall clock, or over cpu_s of CPU."""
    last_cpu, last_progress = -1.0, time.monotonic()
    while True:
        try:
            p.wait(timeout=poll_s)
            return None
        except subprocess.TimeoutExpired:
            pass
        cpu = session_cpu_s(p.pid)
        now = time.monotonic()
        if cpu > last_cpu:
            last_cpu, last_progress = cpu, now
        if cpu > cpu_s:
            return f"hang: spinning, {cpu:.0f} s of CPU (over --cpu-s {cpu_s:.0f})"
        if now - last_progress > idle_s:
            return f"hang: no CPU used for {idle_s:.0f} s (blocked; {cpu:.1f} s of CPU in all)"


def run_case(binary, command, args, limits, cwd):
    cmd = [binary] + command.split() + args
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        p = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, preexec_fn=limit_child, cwd=cwd)
        try:
            hang = wait_watched(p, limits.idle_s, limits.cpu_s)
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the hung case, and children of run/scale left
            except ProcessLookupError:
                pass
            p.wait()
        out_f.seek(0)
        err_f.seek(0)
        out = out_f.read().decode(errors="replace")
        err = err_f.read().decode(errors="replace")
    if hang:
        return cmd, hang, err
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


def fuzz_cases(binary, a, rng, run_dir):
    """[(command, args)]: every own flag with every value, and a sample of the shared ones."""
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
    return cases


def run_all(binary, cases, a, cwd):
    """Runs the cases a.jobs at a time; prints each failure; returns them and the time per command."""
    failures, spent = [], {}
    with futures.ThreadPoolExecutor(a.jobs) as pool:
        for (command, _), (cmd, why, detail) in zip(cases, pool.map(
                lambda c: run_case(binary, c[0], c[1], a, cwd), cases)):
            if not why:
                n, t = spent.get(command, (0, 0.0))
                spent[command] = (n + 1, t + detail)
                continue
            failures.append((cmd, why, detail))
            tail = "\n".join(str(detail).strip().splitlines()[-3:])
            shown = " ".join(repr(x if len(x) < 40 else x[:20] + "...") for x in cmd[1:])
            print(f"FAIL: {shown}\n  {why}\n  {tail}", flush=True)
    return failures, spent


# A stand-in for microddp with one command whose flags plant each kind of
# case: --block waits forever, --spin burns CPU forever, --slow works for a
# few seconds of CPU (slow, not hung), --ok returns at once.
FAKE = r"""#!/usr/bin/env python3
import sys, time
args = sys.argv[1:]
if args == ["--help"]:
    print("Usage: fake [OPTIONS] SUBCOMMAND\n\nSubcommands:\n  work  a command")
elif args[:1] == ["work"] and "--help" in args:
    print("Usage: fake work [OPTIONS]\n\nOptions:\n  --block\n  --spin\n  --slow\n  --ok")
elif "--block" in args:
    time.sleep(10**6)
elif "--spin" in args:
    while True:
        pass
elif "--slow" in args:
    end = time.process_time() + 3
    while time.process_time() < end:
        pass
"""


def self_test():
    """The hang detector against planted cases; 0 when every verdict is right."""
    root = tempfile.mkdtemp(prefix="microddp-fuzz-self-")
    fake = os.path.join(root, "fake")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, 0o755)
    # Tight limits: blocked after 2 s without CPU, spinning past 6 s of CPU;
    # the slow case's 3 s of CPU at 1 s idle-free progress is neither.
    limits = argparse.Namespace(idle_s=2.0, cpu_s=6.0, jobs=4)
    want = {"--block": "no CPU used", "--spin": "spinning", "--slow": None, "--ok": None}
    cases = [("work", [flag]) for flag in want]
    bad = 0
    for (_, args), (cmd, why, _) in zip(cases, map(lambda c: run_case(fake, c[0], c[1], limits, root), cases)):
        expected = want[args[0]]
        ok = (why is None) if expected is None else (why is not None and expected in why)
        print(f"{'ok  ' if ok else 'BAD '} {args[0]:8} -> {why or 'passed'} (want {expected or 'passed'})")
        bad += not ok
    subprocess.run(["rm", "-rf", root])
    print("flag_fuzz self-test:", "PASS" if not bad else f"FAIL ({bad} wrong verdicts)")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", "1")))
    ap.add_argument("--jobs", type=int, default=3, help="invocations at a time (most wait, few compute)")
    ap.add_argument("--sample", type=int, default=24, help="cases per command for the shared training flags")
    ap.add_argument("--idle-s", type=float, default=90,
                    help="a case using no CPU this long hangs (longer than any wait the values ask for)")
    ap.add_argument("--cpu-s", type=float, default=300, help="a case using more CPU than this spins")
    ap.add_argument("--only", default="")
    ap.add_argument("--self-test", action="store_true", help="check the hang detector on planted cases")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.binary:
        ap.error("the microddp binary is required")
    binary = os.path.abspath(a.binary)
    rng = random.Random(a.seed)
    root = tempfile.mkdtemp(prefix="microddp-fuzz-")
    cases = fuzz_cases(binary, a, rng, make_run_dir(binary, root))
    print(f"flag_fuzz: {len(cases)} invocations (seed {a.seed}, {a.jobs} at a time)", flush=True)
    t0 = time.monotonic()
    failures, spent = run_all(binary, cases, a, root)
    subprocess.run(["rm", "-rf", root])
    for command, (n, t) in sorted(spent.items(), key=lambda kv: -kv[1][1])[:6]:
        print(f"  {command}: {n} invocations, {t:.0f} s")
    print(f"flag_fuzz: {len(cases)} invocations in {time.monotonic() - t0:.0f} s, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
