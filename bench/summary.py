"""What the summaries of the side-by-side benchmarks share (train_vs_pytorch.sh,
allreduce_vs_mpi_gloo.sh; bench/lib.sh's `write_summary` puts this file on the
path): numbers to about three significant digits, medians with their range
over rounds, ratios taken per round, the CPU share /usr/bin/time -v reported
for a run, and printing and writing the markdown."""
import os
import re
import statistics


def env_lines(work):
    """The lines of work/env.txt (the machine, the versions, the load)."""
    return open(os.path.join(work, "env.txt")).read().strip().splitlines()


def cpu_pct(work, name):
    """The CPU share (% of one core) run `name` got, from its .time file, or None."""
    t = os.path.join(work, name + ".time")
    if os.path.exists(t):
        m = re.search(r"Percent of CPU this job got: (\d+)%", open(t).read())
        if m:
            return int(m[1])
    return None


def fmt(x):
    if x is None:
        return "—"
    a = abs(x)
    return f"{x:.0f}" if a >= 100 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 0.1 else f"{x:.3f}"


def clean(xs):
    return [x for x in xs if x is not None]


def mval(xs):
    """The median of the values present, or None."""
    xs = clean(xs)
    return statistics.median(xs) if xs else None


def med(xs, f=fmt, missing="—"):
    """'median [min..max]' of the values present (one value alone; `missing` for none)."""
    xs = clean(xs)
    if not xs:
        return missing
    if len(xs) == 1:
        return f(xs[0])
    return f"{f(statistics.median(xs))} [{f(min(xs))}..{f(max(xs))}]"


def ratio(a, b):
    """a / b per round (None where either is missing or b is 0)."""
    return [x / y if x is not None and y else None for x, y in zip(a, b)]


def emit(lines, out):
    """Prints the summary and, when `out` names a file, writes it there."""
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)
        print(f"summary written to {out}")
