#!/usr/bin/python3
"""PyTorch reference for `microddp bench train --model gpt`: GPT training
throughput, and the GPT's quality run on a text corpus.

The model is the one the GPT oracle checks microddp against
(tests/pytorch/gpt_model.py: nanoGPT's GPT, tied head, tanh GELU), and the
step is microddp's GPT defaults: AdamW (lr 1e-3, weight decay 0.1 on the
weight matrices), the gradient norm clipped at 1.0, global batch B split
evenly over the ranks, one compute thread per process.

Throughput (the default): random token ids of a --vocab vocabulary (the data
does not change the work), warm-up then timed steps.

  --ranks 1   one plain process, no DDP
  --ranks N   N local processes, torch.distributed (gloo, 127.0.0.1) and
              DistributedDataParallel(bucket_cap_mb=--bucket-mb)

Prints one JSON line: tokens_per_s and samples_per_s (global), step_ms,
phases_ms (forward, backward incl. DDP's all-reduce, optimizer incl. the
clipping; mean over ranks), peak_rss_mb per rank (getrusage ru_maxrss).

  --quality TEXT_PATH   instead: train --steps steps on `--dataset text:PATH`
              as microddp reads it (tests/pytorch/gpt_model.py CharText),
              with microddp's sampler and schedule (cosine to lr / 10),
              from the initial weights --init-from (a safetensors file),
              writing a checkpoint of nanoGPT-named weights every
              --checkpoint-every steps into --out-dir; one process.
  --quality TEXT_PATH --write-init FILE
              instead: write the GPT's initial weights (PyTorch's GPT-2
              initialisation from --seed) for that corpus's vocabulary, the
              file both sides start from (microddp with --init-from).
  --quality TEXT_PATH --evaluate CHECKPOINT...
              instead: the validation loss of each checkpoint (microddp's or
              this script's), on the same EVAL_WINDOWS windows of the
              validation split (the last 10 %, evenly spaced): one JSON line.

Use Debian's /usr/bin/python3 (python3-torch 1.13).
"""
import argparse
import json
import os
import resource
import sys
import time

from pytorch_ranks import launch  # beside this file, here and in a release

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
# gpt_model.py: tests/pytorch in the repository, beside this file in a release.
sys.path[:0] = [os.path.join(HERE, "..", "tests", "pytorch"), HERE]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=1, help="processes; 1 = no DDP")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--embd", type=int, default=128)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--vocab", type=int, default=64, help="vocabulary (throughput runs)")
    p.add_argument("--batch", type=int, default=12, help="global batch (split over ranks)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--iters", type=int, default=10, help="timed steps")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cpu", help="cpu or cuda (throughput, one rank: the GPU check)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16: autocast on cuda")
    p.add_argument("--json", default="", help="also write the result to this file")
    p.add_argument("--quality", default="", metavar="TEXT_PATH", help="train on this corpus instead (see above)")
    p.add_argument("--steps", type=int, default=2000, help="--quality: optimiser steps")
    p.add_argument("--init-from", default="", help="--quality: initial weights (safetensors)")
    p.add_argument("--checkpoint-every", type=int, default=200, help="--quality: steps between checkpoints")
    p.add_argument("--out-dir", default="", help="--quality: where the checkpoints go")
    p.add_argument("--write-init", default="", help="--quality: write the initial weights here and exit")
    p.add_argument("--evaluate", nargs="+", default=[], help="--quality: checkpoints to evaluate")
    p.add_argument("--_rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--_port", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.batch % a.ranks:
        p.error("--batch must be divisible by --ranks")
    if a.iters < 1 or a.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    if a.device != "cpu" and a.ranks != 1:
        p.error("--device cuda runs one rank")
    return a


def run_rank(a, rank, world):
    import torch
    import torch.distributed as dist

    import gpt_model

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP broadcasts anyway)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a._port}", rank=rank, world_size=world)
    dev = torch.device(a.device)
    # On a GPU, PyTorch's fused attention: the reference is what its users run.
    config = gpt_model.GPTConfig(a.vocab, a.block, a.layers, a.heads, a.embd, fused_attention=dev.type == "cuda")
    model = gpt_model.GPT(config).to(dev)
    net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb) if world > 1 else model
    opt = gpt_model.adamw(model, a.lr)
    local = a.batch // world
    g = torch.Generator().manual_seed(a.seed + 1 + rank)
    phases = {"forward_ms": 0.0, "backward_ms": 0.0, "optimizer_ms": 0.0}

    def now():  # a GPU's phases end when its queued kernels have run
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    def step(timed):
        x = torch.randint(a.vocab, (local, a.block), generator=g).to(dev)
        y = torch.randint(a.vocab, (local, a.block), generator=g).to(dev)
        t0 = now()
        opt.zero_grad(set_to_none=False)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            _, loss = net(x, y)
        t1 = now()
        loss.backward()  # under DDP this includes the gradient all-reduce
        t2 = now()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t3 = now()
        if timed:
            phases["forward_ms"] += (t1 - t0) * 1e3
            phases["backward_ms"] += (t2 - t1) * 1e3
            phases["optimizer_ms"] += (t3 - t2) * 1e3

    for _ in range(a.warmup):
        step(False)
    if world > 1:
        dist.barrier()
    t0 = now()
    for _ in range(a.iters):
        step(True)
    if world > 1:
        dist.barrier()
    wall = now() - t0
    res = {"rank": rank, "wall_s": wall, "phases_ms": {k: v / a.iters for k, v in phases.items()},
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,  # KiB on Linux
           "parameters": sum(p.numel() for p in model.parameters())}
    if world > 1:
        dist.destroy_process_group()
    return res


def throughput(a, argv):
    ranks = [run_rank(a, 0, 1)] if a.ranks == 1 else launch(__file__, a.ranks, argv, "pytorch_gpt")
    wall = max(r["wall_s"] for r in ranks)
    sps = a.iters * a.batch / wall
    return {"impl": "pytorch", "ranks": a.ranks, "ddp": "none" if a.ranks == 1 else "ddp",
            "layers": a.layers, "heads": a.heads, "embd": a.embd, "block": a.block, "batch": a.batch,
            "parameters": ranks[0]["parameters"], "warmup": a.warmup, "iters": a.iters,
            "samples_per_s": sps, "tokens_per_s": sps * a.block, "step_ms": wall * 1e3 / a.iters,
            "phases_ms": {k: sum(r["phases_ms"][k] for r in ranks) / len(ranks) for k in ranks[0]["phases_ms"]},
            "peak_rss_mb": [r["peak_rss_mb"] for r in ranks], "threads": 1}


def quality(a):
    """--quality: microddp's training run of the GPT on a text corpus, in PyTorch."""
    import torch

    import gpt_model
    import reference

    torch.set_num_threads(1)
    data = gpt_model.CharText(a.quality, a.block)
    config = gpt_model.GPTConfig(len(data.vocabulary), a.block, a.layers, a.heads, a.embd)
    model = gpt_model.GPT(config)
    init, _ = reference.read_safetensors(a.init_from)
    model.load_state_dict(init, strict=False)  # lm_head.weight is wte (tied)
    opt = gpt_model.adamw(model, a.lr)
    os.makedirs(a.out_dir, exist_ok=True)
    t0 = time.perf_counter()
    for step, indices in enumerate(reference.global_batches(len(data), a.batch, a.seed, a.steps), start=1):
        x, y = data.batch(indices)
        for group in opt.param_groups:
            group["lr"] = gpt_model.lr_at(step, a.lr, a.lr / 10, 0, a.steps)
        opt.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % a.checkpoint_every == 0 or step == a.steps:
            reference.write_safetensors(os.path.join(a.out_dir, f"step-{step:08d}.safetensors"),
                                        gpt_model.weights(model))
            print(f"step {step}: train loss {loss.item():.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return {"impl": "pytorch", "steps": a.steps, "wall_s": time.perf_counter() - t0}


EVAL_WINDOWS = 1000


def write_init(a):
    import torch

    import gpt_model
    import reference

    data = gpt_model.CharText(a.quality, a.block)
    torch.manual_seed(a.seed)
    model = gpt_model.GPT(gpt_model.GPTConfig(len(data.vocabulary), a.block, a.layers, a.heads, a.embd))
    reference.write_safetensors(a.write_init, gpt_model.weights(model))
    return {"init": a.write_init, "vocab_size": len(data.vocabulary)}


def evaluate(a):
    """{checkpoint: validation loss}, the model rebuilt from each file's tensors."""
    import torch

    import gpt_model
    import reference

    torch.set_num_threads(1)
    val = gpt_model.CharText(a.quality, a.block, split="validation")
    windows = list(range(0, len(val), max(1, len(val) // EVAL_WINDOWS)))[:EVAL_WINDOWS]
    out = {}
    for path in a.evaluate:
        w, _ = reference.read_safetensors(path)
        config = gpt_model.GPTConfig(w["transformer.wte.weight"].shape[0], w["transformer.wpe.weight"].shape[0],
                                     a.layers, a.heads, a.embd)
        model = gpt_model.GPT(config)
        model.load_state_dict(w, strict=False)
        model.eval()
        total = 0.0
        with torch.no_grad():
            for begin in range(0, len(windows), 100):
                x, y = val.batch(windows[begin:begin + 100])
                total += model(x, y)[1].item() * len(x)
        out[path] = total / len(windows)
    return out


def main():
    argv = sys.argv[1:]
    a = parse_args(argv)
    if a._rank >= 0:  # a child of the launcher
        print(json.dumps(run_rank(a, a._rank, a.ranks)), flush=True)
        return
    if a.quality:
        out = write_init(a) if a.write_init else evaluate(a) if a.evaluate else quality(a)
    else:
        out = throughput(a, argv)
    print(json.dumps(out), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
