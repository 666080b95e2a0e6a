#!/usr/bin/env python3
"""Plays the student of a diagnosis Lab (labs/12_hang, 13_straggler,
14_poisoned_shard, 15_mismatched_rank, 16_uneven_work, 17_slow_link): starts the Lab's
job with `microddp lab run` and a random seed (printed, to replay a failure
with --seed), finds the planted fault from what a user sees (the console,
the lingering dashboard's /api/ranks, `microddp analyze --json`, the run's
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
import signal
import tempfile
import urllib.request
from pathlib import Path


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def hang_answers(binary, run_dir, console, ranks):
    """The roll call names the stopped rank and where; the error names a waiter."""
    stopped = re.search(r"rank (\d+) was last seen in (\w+) of step (\d+)", console)
    waiting = re.search(r"wait in ([a-z_]+)(?:\(\w+\))? #(\d+)", console)
    # The job's verdict is the console's last error line (rank 0's own error may come before it).
    verdicts = re.findall(r"microddp: error: (?:the job failed: )?rank (\d+) \(host \S+\) failed", console)
    blamed = verdicts[-1] if verdicts else None
    if not (stopped and waiting and blamed):
        fail("the console shows no roll call naming the stopped rank, or no error")
    rank, phase, step = int(stopped[1]), stopped[2], int(stopped[3])
    right = dict(rank=rank, step=step, phase=phase, collective=waiting[1], sequence=int(waiting[2]))
    wrong = []
    if int(blamed) != rank:
        wrong.append((dict(right, rank=int(blamed)), "A timeout names a waiter"))
    wrong.append((dict(right, phase="sync"), "sync is where the other ranks wait"))
    wrong.append((dict(right, sequence=right["sequence"] - 1), "the last collective every rank finished"))
    return right, wrong


def straggler_answers(binary, run_dir, console, ranks):
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


def poisoned_answers(binary, run_dir, console, ranks):
    """Each rank's own loss: /api/ranks says from which step it was NaN."""
    since = {k["rank"]: k["nonfinite_since"] for k in ranks}
    if None in since.values() or len(since) != 4:
        fail(f"the rank table does not show every rank's loss turning NaN: {since}")
    rank = min(since, key=since.get)
    right = dict(rank=rank, step=since[rank], spread_step=max(since.values()))
    # The same from the run's metrics.jsonl (NaN written as null).
    first_nan = {}
    for line in open(run_dir / "metrics.jsonl"):
        r = json.loads(line)
        if r.get("kind") == "step" and r.get("loss") is None:
            first_nan[r["rank"]] = min(first_nan.get(r["rank"], r["step"]), r["step"])
    if first_nan != since:
        fail(f"/api/ranks says {since}, metrics.jsonl {first_nan}")
    wrong = [(dict(right, step=right["spread_step"]), "that is when every rank's loss is NaN"),
             (dict(right, spread_step=right["step"]), "the console's loss (a mean over ranks) is NaN at once")]
    if rank != 0:
        wrong.insert(0, (dict(right, rank=0), "rank 0 prints the console's lines"))
    return right, wrong


def mismatched_answers(binary, run_dir, console, ranks):
    """The model check's error: the odd rank, and the shapes on each side."""
    m = re.search(r"ranks? ([\d, ]+) built a different model than ranks? [\d, ]+: first difference at "
                  r"parameter '([^']*)' on .*? vs '([^']*)' on", console)
    reporters = re.findall(r"microddp: error: (?:the job failed: )?rank (\d+) \(host \S+\) failed", console)
    reporter = reporters[-1] if reporters else None  # the job's verdict: the last error line
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
    if int(reporter) != odd[0]:
        wrong.insert(0, (dict(right, rank=int(reporter)), "it only reported the difference first"))
    if odd[0] != 0:
        wrong.insert(0, (dict(right, rank=0), "rank 0 is where the weights come from"))
    return right, wrong


def uneven_answers(binary, run_dir, console, ranks):
    """The size error's pair, from the job's verdict (the line the checker reads: every rank that
    noticed the sizes differ reports its own pair): the rank with the 4-byte message had finished."""
    m = re.search(r"job '[^']*' failed: .*?#(\d+): .* rank (\d+) sent a message of (\d+) bytes but rank (\d+) "
                  r"expected (\d+) bytes", console)
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


def slow_link_answers(binary, run_dir, console, ranks):
    """analyze's links table names the slow link; its all-reduces' busbw is its rate."""
    out = run([binary, "analyze", str(run_dir), "--json"])
    if out.returncode != 0:
        fail(f"analyze --json failed: {out.stderr}")
    a = json.loads(out.stdout)
    links, busbw = a["links"], a["allreduces"][0]["busbw_gbps"]
    rates = sorted(l["gbps"] for l in links)
    if len(links) != 4 or rates[0] * 3 > rates[len(rates) // 2]:
        fail(f"the links table does not single out one slow link: {links}")
    slow = links[0]
    right = dict(link=f"{slow['from']}-{slow['to']}", mbps=round(busbw * 1000, 1))
    n = a["config"]["world_size"]
    wrong = [(dict(right, mbps=round(busbw * 1000 * n / (2 * (n - 1)), 1)), "the algorithm bandwidth"),
             (dict(right, mbps=round(busbw, 4)), "the figure in GB/s")]
    late = (a["stragglers"].get("worst") or {}).get("rank")
    if late is not None and late != slow["from"]:
        wrong.insert(0, (dict(right, link=f"{late}-{(late + 1) % n}"), "the slow link is the one into the late rank"))
    return right, wrong


STUDENTS = {"hang": hang_answers, "straggler": straggler_answers, "poisoned_shard": poisoned_answers,
            "mismatched_rank": mismatched_answers, "uneven_work": uneven_answers,
            "slow_link": slow_link_answers}


def run_lab(binary, lab, run_dir, seed):
    """`lab run`; the poisoned shard's job lingers so that its rank table is
    read over HTTP as the student would, then Ctrl-C ends it. Returns the
    console and /api/ranks (None for the other Labs)."""
    cmd = [binary, "lab", "run", lab, "--run-dir", str(run_dir), "--seed", str(seed)]
    if lab != "poisoned_shard":
        job = run(cmd + ["--linger", "0"], timeout=240)
        if lab in ("straggler", "slow_link") and job.returncode != 0:
            fail(f"the job failed:\n{(job.stdout + job.stderr)[-3000:]}")
        return job.stdout + job.stderr, None
    job = subprocess.Popen(cmd + ["--linger", "60"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    console, url, ranks = [], None, None
    for line in job.stdout:
        console.append(line)
        url = url or (re.search(r"dashboard at (http://\S+/)", line) or [None, None])[1]
        if "the dashboard stays up" in line:
            break
    if url:
        ranks = json.load(urllib.request.urlopen(url + "api/ranks", timeout=10))
    job.send_signal(signal.SIGINT)
    rest, _ = job.communicate(timeout=60)
    if not url:
        fail(f"no dashboard address on the console:\n{''.join(console)}{rest}")
    return "".join(console) + rest, ranks


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
        console, ranks = run_lab(a.binary, a.lab, run_dir, a.seed)
        right, misreadings = STUDENTS[a.lab](a.binary, run_dir, console, ranks)
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
