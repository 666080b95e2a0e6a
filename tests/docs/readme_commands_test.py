#!/usr/bin/env python3
"""Every `microddp ...` command line in a code block of README.md: the
commands a reader types first must work as written. A line that lists
alternatives stands for each (`bench train|allreduce|gemm` is three
commands, `train [--model cnn]` two). The short ones run for real (exit 0);
those in PARSE_ONLY, for the reason given there, are only parsed: every
flag, value and check, with MDDP_PARSE_ONLY=1 (cli/main.cc), nothing run.

    readme_commands_test.py MICRODDP README.md
"""
import itertools
import os
import re
import shlex
import subprocess
import sys
import tempfile

PARSE_ONLY = [  # (pattern on the command line, why it is not run here)
    (r"^run ", "a whole training job (Fashion-MNIST, 3 epochs): a long run"),
    (r"^train", "a whole training job: a long run"),
    (r"^coordinator ", "waits for workers started on other hosts"),
    (r"^worker ", "needs a coordinator at HOST:29500"),
    (r"^verify ", "trains the model 4 ways on 4 ranks: a long run"),
    (r"^bench (train|allreduce)$", "a benchmark sweep: a long run"),
    (r"^analyze ", "needs the directory of an earlier run"),
    (r"^sample ", "needs the checkpoint of an earlier GPT run"),
    (r"^scale ", "one training job per world size: a long run"),
    (r"^demo bucketing$", "trains a model several ways: a long run"),
    (r"^data verify ", "needs the dataset-fashion-mnist package"),  # only when it is missing
]


def commands(readme):
    """The microddp command lines of README's code blocks, alternatives expanded."""
    out, in_code = [], False
    for line in open(readme, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
            continue
        line = line.split("#", 1)[0].strip()
        if not in_code or not line.startswith("microddp "):
            continue
        words = []
        for w in re.findall(r'\[[^\]]*\]|"[^"]*"|\S+', line[len("microddp "):]):
            if w.startswith("["):
                words.append(["", w[1:-1]])  # optional: without, with
            elif "|" in w and not w.startswith("-"):
                words.append(w.split("|"))
            else:
                words.append([w])
        for combo in itertools.product(*words):
            out.append(" ".join(c for c in combo if c))
    return out


def reason_to_parse_only(cmd):
    for pattern, why in PARSE_ONLY:
        if re.search(pattern, cmd):
            if pattern.startswith("^data verify") and os.path.isdir(cmd.split()[-1]):
                return None
            return why
    return None


def main():
    binary, readme = sys.argv[1], sys.argv[2]
    cmds = commands(readme)
    if len(cmds) < 10:
        sys.exit(f"FAIL: found only {len(cmds)} microddp commands in {readme}")
    failed = []
    with tempfile.TemporaryDirectory() as work:
        for cmd in cmds:
            why = reason_to_parse_only(cmd)
            env = dict(os.environ, MDDP_PARSE_ONLY="1") if why else os.environ
            r = subprocess.run([binary] + shlex.split(cmd), cwd=work, env=env, capture_output=True,
                               text=True, timeout=300)
            print(f"{'parsed' if why else 'ran':6} exit {r.returncode}: microddp {cmd}"
                  + (f"   ({why})" if why else ""))
            if r.returncode != 0:
                failed.append(f"microddp {cmd}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    if failed:
        sys.exit("FAIL:\n" + "\n".join(failed))
    print("PASS")


if __name__ == "__main__":
    main()
