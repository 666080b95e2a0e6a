#!/usr/bin/python3
"""The PyTorch oracle for the GPT: microddp's `--model gpt` trains the same
model as nanoGPT's GPT in PyTorch 1.13, step for step.

1. PyTorch builds the GPT (gpt_model.py, GPT-2's initialisation, its own
   seed) and saves its parameters as safetensors; microddp starts from them
   with --init-from.
2. microddp trains STEPS steps on the committed tests/data/tiny_corpus.txt
   (`--dataset text:`) with the GPT's defaults — AdamW (lr 1e-3, weight decay
   0.1), the gradient norm clipped at 1.0 (it is about 2 here, so clipping
   acts at every step), the cosine schedule to lr / 10 — plus a 10-step
   warm-up: in one process (`train`), with bucketed DDP on 2 ranks (small buckets, so that
   there are several), with ZeRO-1 (`--ddp sharded`) and with hooked DDP
   (an all-reduce per gradient) on 2 ranks.
3. PyTorch builds the same GPT from the checkpoint's metadata alone (its
   GPTConfig; the optimiser, schedule and sampler from the state file's),
   loads the initial parameters, and trains on the same batches, in one
   process and with DistributedDataParallel (gloo) on 2 processes:
   gpt_model.CharText reproduces the corpus, vocabulary and windows, and
   reference.py the sampler, from their definitions. The vocabulary must
   equal the checkpoint's.
4. Each run's loss at every step (train.jsonl; the mean over ranks) is
   compared with PyTorch's single process.

Tolerance (stated, not slack): |loss - PyTorch's| <= 2e-5 + 2e-5 * |PyTorch's|
per step. Both sides run the same float32 arithmetic in a different order
(other GEMM blockings, DDP's sums over two ranks), a few ulps (~1e-7) per
operation; Adam divides by sqrt(v), which amplifies a rounding difference in
a gradient element near zero, and STEPS steps compound it: measured, every
run stays within 5e-7 of PyTorch's loss (the table shows it), PyTorch's
own DDP included. A real
mistake moves the loss far more: a causal mask that lets a position see the
next token drives the loss down by whole nats within 60 steps, a tied
gradient all-reduced with half its sum or local clipping change every update
by a fraction of lr (measured: 1e-3 and more).

  gpt_oracle.py MICRODDP                   every run; exit 1 naming the run and step that differ
  gpt_oracle.py MICRODDP --mutation NAME   the planted bug NAME on in microddp (MDDP_TEST_MUTATION,
                                           core/common/test_mutation.h), in the run it concerns:
                                           exit 0 only if the oracle catches it and names the step
                                           (and, for a bug that makes replicas differ, microddp's
                                           replica check stops the run first when left on)
Exits 77 (skipped) when torch is not installed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# oracle.py sets one compute thread and skips (exit 77) without PyTorch,
# before anything here loads torch: its imports serve this oracle too.
from oracle import dist, free_port, nn, torch  # noqa: E402
import gpt_model  # noqa: E402
import reference  # noqa: E402

CORPUS = os.path.join(HERE, "..", "data", "tiny_corpus.txt")
STEPS = 60
BATCH = 8  # global; 4 per rank on 2 ranks
SEED = 7
MODEL = {"vocab_size": None, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32}
TRAIN_FLAGS = ["--warmup-steps", "10"]
RTOL = ATOL = 2e-5

RUNS = [  # label, microddp arguments after the command
    ("microddp 1 process", ["train"]),
    ("microddp bucketed DDP, 2 ranks", ["run", "--nproc", "2", "--ddp", "bucketed", "--bucket-mb", "0.02",
                                        "--first-bucket-mb", "0.01"]),
    ("microddp ZeRO-1, 2 ranks", ["run", "--nproc", "2", "--ddp", "sharded"]),
    ("microddp hooked DDP, 2 ranks", ["run", "--nproc", "2", "--ddp", "hooked"]),
]
TORCH_DDP = "PyTorch DDP (gloo), 2 ranks"
# The run in which each planted bug shows (a DDP bug is invisible in one process).
# A tied gradient's early hook is certain to send the head's share alone with
# hooked DDP, which all-reduces each gradient as its hook fires; the bucketed
# reducer holds the tied weight's bucket until last (Note [Tied weight] in
# core/nn/gpt.h), so there the early hook only races with the embedding's share.
MUTATION_RUN = {"causal_mask_off_by_one": RUNS[0], "tied_grad_first_contribution": RUNS[3],
                "clip_before_allreduce": RUNS[1]}
# The planted bugs that leave the ranks' replicas different: microddp's own
# replica check (docs/ddp.md) stops such a run before its final checkpoint,
# naming them. The oracle's runs turn the check off (--check-replicas-every
# -1), so that the oracle proves it would catch the bug too.
DIVERGING = {"tied_grad_first_contribution"}
REPLICA_CHECK_OFF = ["--check-replicas-every", "-1"]


def microddp_flags(block, layers, heads, embd):
    return ["--model", "gpt", "--dataset", f"text:{CORPUS}", "--block", str(block), "--layers", str(layers),
            "--heads", str(heads), "--embd", str(embd), "--batch", str(BATCH), "--steps", str(STEPS),
            "--seed", str(SEED), "--no-eval", "--log-every", "1"] + TRAIN_FLAGS


def microddp_command(binary, label, command, init_path, work):
    """The command line of one microddp run, and its run directory."""
    run_dir = os.path.join(work, label.replace(" ", "_").replace(",", ""))
    return [binary] + command + (["--http-port", "-1"] if command[0] == "run" else []) + microddp_flags(
        MODEL["block_size"], MODEL["n_layer"], MODEL["n_head"], MODEL["n_embd"]) + [
        "--init-from", init_path, "--run-dir", run_dir], run_dir


def microddp_train(binary, label, command, init_path, work, env):
    """(losses by step, checkpoint metadata, state metadata) of one microddp run."""
    cmd, run_dir = microddp_command(binary, label, command, init_path, work)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    records = [json.loads(line) for line in open(os.path.join(run_dir, "train.jsonl"))]
    losses = {rec["step"]: rec["loss"] for rec in records if "loss" in rec and "step" in rec}
    _, meta = reference.read_safetensors(os.path.join(run_dir, "checkpoint.safetensors"))
    _, state = reference.read_safetensors(os.path.join(run_dir, "checkpoint.state.safetensors"))
    return [losses[s] for s in range(1, STEPS + 1)], meta, state


def torch_train(meta, state, init, rank=0, world=1):
    """PyTorch's losses (the mean over ranks) from the checkpoint's metadata alone."""
    config = gpt_model.config_from_metadata(meta)
    data = gpt_model.CharText(CORPUS, config.block_size)
    vocabulary = json.loads(meta["dataset"])["vocabulary"]
    if data.vocabulary != vocabulary:
        sys.exit(f"FAIL: the vocabulary differs from the checkpoint's: {data.vocabulary!r} vs {vocabulary!r}")
    opt_meta, sched, sampler = (json.loads(state[k]) for k in ("optimizer", "schedule", "sampler"))
    torch.manual_seed(0)  # any: the weights are replaced
    model = gpt_model.GPT(config)
    model.load_state_dict(init, strict=False)  # no lm_head.weight: it is wte (tied)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = gpt_model.adamw(model, opt_meta["lr"], (opt_meta["beta1"], opt_meta["beta2"]), opt_meta["eps"],
                          opt_meta["weight_decay"])
    local = sampler["global_batch"] // world
    losses = []
    batches = reference.global_batches(len(data), sampler["global_batch"], sampler["shuffle_seed"], STEPS)
    for step, indices in enumerate(batches, start=1):
        x, y = data.batch(indices[rank * local:(rank + 1) * local])
        for g in opt.param_groups:
            g["lr"] = gpt_model.lr_at(step, sched["lr"], sched["lr_min"], sched["warmup_steps"],
                                      sched["total_steps"])
        opt.zero_grad()
        _, loss = net(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), opt_meta["grad_clip"])
        opt.step()
        mean = loss.detach().clone()
        if world > 1:
            dist.all_reduce(mean)
            mean /= world
        losses.append(mean.item())
    return losses


def ddp_worker(rank, port, work):
    """One rank of PyTorch DDP (gloo); rank 0 writes the losses."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    init, _ = reference.read_safetensors(os.path.join(work, "init.safetensors"))
    meta = json.load(open(os.path.join(work, "meta.json")))
    losses = torch_train(meta["model"], meta["state"], init, rank, 2)
    if rank == 0:
        json.dump(losses, open(os.path.join(work, "torch_ddp.json"), "w"))
    dist.destroy_process_group()


def torch_ddp(binary, work, meta, state):
    json.dump({"model": meta, "state": state}, open(os.path.join(work, "meta.json"), "w"))
    port = free_port()
    procs = [subprocess.Popen([sys.executable, __file__, binary, "--_ddp_rank", str(r), "--_port", str(port),
                               "--_work", work]) for r in range(2)]
    if any(p.wait(timeout=600) != 0 for p in procs):
        sys.exit(f"FAIL: {TORCH_DDP} failed")
    return json.load(open(os.path.join(work, "torch_ddp.json")))


def first_difference(label, got, want):
    """(max |diff|, the first step outside the tolerance as a message, or None)."""
    worst, failure = 0.0, None
    for step, (a, b) in enumerate(zip(got, want), start=1):
        diff = abs(a - b)
        worst = max(worst, diff)
        if diff > ATOL + RTOL * abs(b) and failure is None:
            failure = (f"{label}: the loss at step {step} is {a:.7f}, PyTorch's {b:.7f} "
                       f"(|diff| {diff:.3g} > {ATOL} + {RTOL} * |PyTorch|)")
    return worst, failure


def initial_weights(work):
    """PyTorch's GPT with the corpus's vocabulary, saved for --init-from; its weights."""
    config = dict(MODEL, vocab_size=len(gpt_model.CharText(CORPUS, MODEL["block_size"]).vocabulary))
    torch.manual_seed(SEED)
    init = gpt_model.weights(gpt_model.GPT(gpt_model.GPTConfig(**config)))
    path = os.path.join(work, "init.safetensors")
    reference.write_safetensors(path, init)
    return path, init


def replica_check_names_it(binary, label, command, env):
    """True when the run with the replica check on fails naming replicas that diverged."""
    with tempfile.TemporaryDirectory(prefix="microddp-replicas-") as work:
        init_path, _ = initial_weights(work)
        cmd, _ = microddp_command(binary, label, command, init_path, work)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    line = next((l for l in r.stderr.splitlines() if "the replicas diverged by step" in l), "")
    print(f"with the replica check: exit {r.returncode}, {line.strip() or 'no line naming diverged replicas'}")
    if r.returncode == 1 and line:
        return True
    print(f"FAIL: the replica check did not stop the run with '{label}'")
    return False


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("microddp")
    p.add_argument("--mutation", default="", choices=[""] + list(MUTATION_RUN),
                   help="planted bug to switch on in microddp; the oracle must catch it")
    p.add_argument("--_ddp_rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--_port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--_work", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    torch.set_num_threads(1)
    if a._ddp_rank >= 0:
        ddp_worker(a._ddp_rank, a._port, a._work)
        return 0
    env = dict(os.environ)
    if a.mutation:
        env["MDDP_TEST_MUTATION"] = a.mutation
    runs = [MUTATION_RUN[a.mutation]] if a.mutation else RUNS
    if a.mutation:
        label, command = runs[0]
        runs = [(label, command + (REPLICA_CHECK_OFF if command[0] == "run" else []))]
        if a.mutation in DIVERGING and not replica_check_names_it(a.microddp, label, command, env):
            return 1
    with tempfile.TemporaryDirectory(prefix="microddp-gpt-oracle-") as work:
        init_path, init = initial_weights(work)
        results = {}
        for label, command in runs:
            results[label], meta, state = microddp_train(a.microddp, label, command, init_path, work, env)
        want = torch_train(meta, state, init)
        if not a.mutation:
            results[TORCH_DDP] = torch_ddp(a.microddp, work, meta, state)
    print(f"{STEPS} steps of {json.loads(meta['model'])['summary']}, global batch {BATCH}, on "
          f"tiny_corpus.txt; against PyTorch {torch.__version__} in one process; "
          f"pass: |diff| <= {ATOL} + {RTOL} * |PyTorch's loss| at every step")
    print(f"{'run':<32} {'loss 1':>10} {'loss ' + str(STEPS):>10} {'max |diff|':>11}")
    print(f"{'PyTorch 1 process':<32} {want[0]:10.6f} {want[-1]:10.6f}")
    failures = []
    for label, losses in results.items():
        worst, failure = first_difference(label, losses, want)
        print(f"{label:<32} {losses[0]:10.6f} {losses[-1]:10.6f} {worst:11.3g}{'  FAIL' if failure else ''}")
        failures += [failure] if failure else []
    for f in failures:
        print("FAIL:", f)
    if a.mutation:
        if failures:
            print(f"OK: the planted bug '{a.mutation}' was caught")
            return 0
        print(f"FAIL: the planted bug '{a.mutation}' was not caught")
        return 1
    print("OK: microddp's GPT matches PyTorch" if not failures else f"{len(failures)} run(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
