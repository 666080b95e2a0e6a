#!/usr/bin/env python3
"""Plays the student of a diagnosis Lab (labs/12_hang, 13_straggler,
14_poisoned_shard, 15_mismatched_rank, 16_uneven_work): starts the Lab's job with `microddp lab run` and a random
seed (printed, to replay a failure with --seed), finds the planted fault
from what a user sees (the console, `microddp analyze --json`, the run's
metrics.jsonl), and checks that `microddp lab check` accepts those answers
and rejects each classic misreading with its explanation.

    diagnosis_test.py MICRODDP LAB [--seed N]

If the signals cannot give the answer, the Lab is not fair: the test fails.
"""
import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def hang_answers(binary, run_dir, console):
    """The roll call names the stopped rank and where; the error names a waiter."""
    stopped = re.search(r"rank (\d+) was last seen in (\w+) of step (\d+)", console)
    waiting = re.search(r"wait in ([a-z_]+)(?:\(\w+\))? #(\d+)", console)
    blamed = re.search(r"microddp: error: rank (\d+) \(host", console)
    if not (stopped and waiting and blamed):
        fail("the console shows no roll call naming the stopped rank, or no error")
    rank, phase, step = int(stopped[1]), stopped[2], int(stopped[3])
    right = dict(rank=rank, step=step, phase=phase, collective=waiting[1], sequence=int(waiting[2]))
    wrong = []
    if int(blamed[1]) != rank:
        wrong.append((dict(right, rank=int(blamed[1])), "A timeout names a waiter"))
    wrong.append((dict(right, phase="sync"), "sync is where the other ranks wait"))
    wrong.append((dict(right, sequence=right["sequence"] - 1), "the last collective every rank finished"))
    return right, wrong


def straggler_answers(binary, run_dir, console):
    """analyze's stragglers: the late rank, its phase, the others' wait per step."""
    out = run([binary, "analyze", str(run_dir), "--json"])
    if out.returncode != 0:
        fail(f"analyze --json failed: {out.stderr}")
    a = json.loads(out.stdout)
    worst, late = a["stragglers"].get("worst"), a["stragglers"]["ranks"]
    if not worst or not late:
        fail("analyze found no straggler")
    wait = late[0]["late_ms_total"] / a["steps_used"]
    right = dict(rank=worst["rank"], phase=worst["phase"], wait_ms_per_step=round(wait, 3))
    wrong = [(dict(right, phase="sync"), "communication is where the others wait for it"),
             (dict(right, wait_ms_per_step=round(late[0]["late_ms_total"], 3)), "divide by the steps analysed")]
    waiter = a["phases_ms"]["exposed_comm"]["slowest_rank"]
    if waiter != right["rank"]:
        wrong.insert(0, (dict(right, rank=waiter), "it waited for the straggler"))
    return right, wrong


def poisoned_answers(binary, run_dir, console):
    """Each rank's own loss (metrics.jsonl, NaN as null): who turned NaN first."""
    first_nan = {}
    for line in open(run_dir / "metrics.jsonl"):
        r = json.loads(line)
        if r.get("kind") == "step" and r.get("loss") is None:
            first_nan[r["rank"]] = min(first_nan.get(r["rank"], r["step"]), r["step"])
    if len(first_nan) != 4:
        fail(f"not every rank's loss turned NaN: {first_nan}")
    rank = min(first_nan, key=first_nan.get)
    right = dict(rank=rank, step=first_nan[rank], spread_step=max(first_nan.values()))
    wrong = [(dict(right, step=right["spread_step"]), "that is when every rank's loss is NaN"),
             (dict(right, spread_step=right["step"]), "the console's loss (a mean over ranks) is NaN at once")]
    if rank != 0:
        wrong.insert(0, (dict(right, rank=0), "rank 0 prints the console's lines"))
    return right, wrong


def mismatched_answers(binary, run_dir, console):
    """The model check's error: the odd rank, and the shapes on each side."""
    m = re.search(r"ranks? ([\d, ]+) built a different model than ranks? [\d, ]+: first difference at "
                  r"parameter '([^']*)' on .*? vs '([^']*)' on", console)
    reporter = re.search(r"microddp: error: (?:the job failed: )?rank (\d+) \(host \S+\) failed", console)
    if not (m and reporter):
        fail("the console does not name the rank that built another model")
    odd = [int(r) for r in m[1].split(", ")]
    if len(odd) != 1:
        fail(f"the error names {odd}, not one odd rank")
    shape = lambda entry: [int(d) for d in re.findall(r"\d+", entry.split(":", 1)[1])]
    odd_shape, rest_shape = shape(m[2]), shape(m[3])
    # Another width: the same layer, square on both sides, of another size;
    # one layer more: a square hidden layer where the others have their output layer.
    square = lambda s: len(s) == 2 and s[0] == s[1]
    setting = "width" if square(odd_shape) and square(rest_shape) else "depth"
    right = dict(rank=odd[0], setting=setting)
    wrong = [(dict(right, setting="depth" if setting == "width" else "width"),
              "job.json's model")]
    if int(reporter[1]) != odd[0]:
        wrong.insert(0, (dict(right, rank=int(reporter[1])), "it only reported the difference first"))
    if odd[0] != 0:
        wrong.insert(0, (dict(right, rank=0), "rank 0 is where the weights come from"))
    return right, wrong


def uneven_answers(binary, run_dir, console):
    """The size error's pair: the rank with the 4-byte message had finished training."""
    m = re.search(r"#(\d+): .* rank (\d+) sent a message of (\d+) bytes but rank (\d+) expected (\d+) bytes",
                  console)
    if not m:
        fail("the console shows no message-size error")
    seq, sender, sent, receiver, expected = (int(x) for x in m.groups())
    short, busy = (sender, receiver) if sent < expected else (receiver, sender)
    last = 0
    for line in open(run_dir / "metrics.jsonl"):
        r = json.loads(line)
        if r.get("kind") == "step":
            last = max(last, r["step"])
    right = dict(rank=short, last_step=last, sequence=seq)
    wrong = [(dict(right, rank=busy), "one sent or expected a 4-byte message"),
             (dict(right, last_step=last + 1), "the others failed inside its first all-reduce")]
    return right, wrong


STUDENTS = {"hang": hang_answers, "straggler": straggler_answers, "poisoned_shard": poisoned_answers,
            "mismatched_rank": mismatched_answers, "uneven_work": uneven_answers}


def write_answers(path, run_dir, answers):
    lines = [f'run = "{run_dir}"']
    for k, v in answers.items():
        lines.append(f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}")
    path.write_text("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("lab", choices=sorted(STUDENTS))
    p.add_argument("--seed", type=int, default=random.randrange(1 << 31))
    a = p.parse_args()
    print(f"lab {a.lab}, seed {a.seed} (replay: --seed {a.seed})")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run_dir, work = tmp / a.lab, tmp / "work"
        work.mkdir()
        job = run([a.binary, "lab", "run", a.lab, "--run-dir", str(run_dir), "--seed", str(a.seed),
                   "--linger", "0"], timeout=240)
        console = job.stdout + job.stderr
        if a.lab in ("straggler", "poisoned_shard") and job.returncode != 0:
            fail(f"the job failed:\n{console[-3000:]}")
        right, misreadings = STUDENTS[a.lab](a.binary, run_dir, console)
        print(f"the student's answers: {right}")
        answers = work / f"{a.lab}.toml"
        check = [a.binary, "lab", "check", a.lab, "--work-dir", str(work)]
        write_answers(answers, run_dir, right)
        out = run(check)
        if out.returncode != 0 or "every answer names the planted fault" not in out.stdout:
            fail(f"lab check refused the answers the signals give:\n{out.stdout}{out.stderr}")
        print(out.stdout)
        for answers_given, why in misreadings:
            write_answers(answers, run_dir, answers_given)
            out = run(check)
            if out.returncode != 1 or why not in out.stdout:
                fail(f"the misreading {answers_given} was not refused with '{why}':\n{out.stdout}{out.stderr}")
            print(f"refused as expected: {answers_given} ({why})")
    print("PASS")


if __name__ == "__main__":
    main()
