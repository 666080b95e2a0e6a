#!/usr/bin/python3
"""PyTorch reference for `microddp bench train`: FullMLP training throughput.

The model and step are the same as microddp's benchmark: 16 x nn.Linear(W, W)
with ReLU between (no head), MSE against synthetic regression targets, SGD
lr 0.01 without momentum, global batch B split evenly over the ranks, one
compute thread per process.

  --ranks 1   one plain process, no DDP
  --ranks N   N local processes, torch.distributed (gloo, 127.0.0.1) and
              DistributedDataParallel(bucket_cap_mb=--bucket-mb)
  --no-sync   (N > 1) run forward/backward inside ddp.no_sync(): the same
              compute on N processes at once with no gradient all-reduce,
              the compute-only reference
  --device cuda  (one rank) the same on the GPU, timed with the GPU
              synchronised at the start and end of the timed steps;
              --precision bf16 runs forward and the loss under
              torch.autocast(bfloat16), as microddp's bf16 GEMMs with
              fp32 master weights (scripts/gpu-check)

Prints one JSON line: samples_per_s (global), step_ms, phases_ms (forward,
backward incl. DDP's all-reduce, optimizer; mean over ranks), peak_rss_mb per
rank (getrusage ru_maxrss), and the BLAS / kernel in use.

Use Debian's /usr/bin/python3 (python3-torch 1.13). Run with
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (set here if unset) and the same
OPENBLAS_CORETYPE as the side it is compared with.
"""
import argparse
import json
import os
import resource
import sys
import time

from pytorch_ranks import launch  # beside this file, here and in a release

# One compute thread per process, before torch (and its BLAS) is loaded.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=1, help="processes; 1 = no DDP")
    p.add_argument("--width", type=int, default=1024, help="hidden width W")
    p.add_argument("--depth", type=int, default=16, help="Linear(W, W) layers")
    p.add_argument("--batch", type=int, default=256, help="global batch (split over ranks)")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    p.add_argument("--no-sync", action="store_true", help="compute only: DDP no_sync(), no all-reduce")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--iters", type=int, default=10, help="timed steps")
    p.add_argument("--synthetic-size", type=int, default=4096, help="samples in the synthetic dataset")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--json", default="", help="also write the result to this file")
    p.add_argument("--gemm", default="", metavar="MxNxK",
                   help="instead: best-of-20 single-thread torch.mm (OpenBLAS sgemm) GFLOP/s for this shape")
    # Internal: set by the launcher for each child process.
    p.add_argument("--device", default="cpu", help="cpu, or cuda (one rank)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16: autocast")
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


def blas_info():
    """Which BLAS and which OpenBLAS kernel (core type) torch's Linear runs on."""
    import ctypes
    import torch

    info = {"torch": torch.__version__, "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", "")}
    for line in torch.__config__.show().splitlines():
        if "BLAS_INFO" in line:
            for kv in line.split(","):
                if "BLAS_INFO" in kv:
                    info["torch_blas_info"] = kv.strip()
    # torch links libblas.so.3 (Debian's alternative, OpenBLAS); ask OpenBLAS itself.
    for name in ("libopenblas.so.0", "libblas.so.3"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            info["openblas_core"] = lib.openblas_get_corename().decode()
            info["openblas_config"] = lib.openblas_get_config().decode().strip()
            break
        except (OSError, AttributeError):
            continue
    try:
        info["libblas_so_3"] = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    except OSError:
        pass
    return info


def build_model(a, device, ddp_on):
    """--depth Linear(W, W) layers with ReLU between them; DDP-wrapped when ddp_on."""
    import torch.nn as nn

    layers = []
    for i in range(a.depth):
        layers.append(nn.Linear(a.width, a.width))
        if i + 1 < a.depth:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers).to(device)
    if ddp_on:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, bucket_cap_mb=a.bucket_mb)
    return model


def regression_data(a, device):
    """Synthetic regression data (X * w_true + noise), generated once, on device."""
    import torch

    W = a.width
    g = torch.Generator().manual_seed(a.seed + 1)
    n = max(a.synthetic_size, a.batch)
    X = torch.randn(n, W, generator=g)
    w_true = torch.randn(W, W, generator=g) / W ** 0.5
    Y = X @ w_true + 0.01 * torch.randn(n, W, generator=g)
    return X.to(device), Y.to(device)


class Stepper:
    """One training step of this rank: its contiguous shard of the next global
    batch (a view, no copy), forward/backward/optimizer timed when asked."""

    def __init__(self, a, rank, world, model, X, Y):
        import torch
        import torch.nn as nn

        self.a, self.rank, self.model, self.X, self.Y = a, rank, model, X, Y
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.0)
        self.loss_fn = nn.MSELoss()
        self.autocast = torch.autocast(X.device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16")
        self.local = a.batch // world
        self.batches_per_epoch = X.shape[0] // a.batch
        self.no_sync = world > 1 and a.no_sync
        self.phases = {"forward_ms": 0.0, "backward_ms": 0.0, "optimizer_ms": 0.0}

    def sync_ctx(self):
        if self.no_sync:
            return self.model.no_sync()
        import contextlib

        return contextlib.nullcontext()

    def step(self, i, timed):
        b = i % self.batches_per_epoch
        lo = b * self.a.batch + self.rank * self.local
        x, y = self.X[lo : lo + self.local], self.Y[lo : lo + self.local]
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=False)
        with self.sync_ctx():
            with self.autocast:
                loss = self.loss_fn(self.model(x), y)
            t1 = time.perf_counter()
            loss.backward()  # under DDP this includes the gradient all-reduce
        t2 = time.perf_counter()
        self.opt.step()
        t3 = time.perf_counter()
        if timed:
            self.phases["forward_ms"] += (t1 - t0) * 1e3
            self.phases["backward_ms"] += (t2 - t1) * 1e3
            self.phases["optimizer_ms"] += (t3 - t2) * 1e3


def run_rank(a, rank, world):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)  # same initial weights on every rank (DDP broadcasts anyway)
    ddp_on = world > 1
    if ddp_on:
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a._port}", rank=rank, world_size=world)

    device = torch.device(a.device)
    on_gpu = device.type == "cuda"
    model = build_model(a, device, ddp_on)
    X, Y = regression_data(a, device)
    stepper = Stepper(a, rank, world, model, X, Y)

    def barrier():
        if ddp_on:
            dist.barrier()
        if on_gpu:
            torch.cuda.synchronize()

    for i in range(a.warmup):
        stepper.step(i, False)
    barrier()
    t0 = time.perf_counter()
    for i in range(a.iters):
        stepper.step(a.warmup + i, True)
    barrier()
    wall = time.perf_counter() - t0
    res = {
        "rank": rank,
        "wall_s": wall,
        "phases_ms": {k: v / a.iters for k, v in stepper.phases.items()},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,  # KiB on Linux
    }
    if on_gpu:
        res["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    if ddp_on:
        dist.destroy_process_group()
    return res


def gemm_rate(shape, reps=20):
    """Best single-thread GFLOP/s of torch.mm for C[m,n] = A[m,k] B[k,n] (torch's BLAS: OpenBLAS here)."""
    import torch

    torch.set_num_threads(1)
    m, n, k = (int(v) for v in shape.lower().split("x"))
    a, b = torch.rand(m, k) * 2 - 1, torch.rand(k, n) * 2 - 1
    c = torch.empty(m, n)
    torch.mm(a, b, out=c)  # untimed warm-up
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        best = min(best, time.perf_counter() - t0)
    return {"impl": "pytorch", "gemm": [m, n, k], "best_ms": best * 1e3, "gflops": 2.0 * m * n * k / best * 1e-9,
            "blas": blas_info()}


def main():
    argv = sys.argv[1:]
    a = parse_args(argv)
    if a.gemm:
        line = json.dumps(gemm_rate(a.gemm))
        print(line, flush=True)
        if a.json:
            with open(a.json, "w") as f:
                f.write(line + "\n")
        return
    if a._rank >= 0:  # a child of the launcher
        print(json.dumps(run_rank(a, a._rank, a.ranks)), flush=True)
        return
    ranks = [run_rank(a, 0, 1)] if a.ranks == 1 else launch(__file__, a.ranks, argv, "pytorch_fullmlp")
    wall = max(r["wall_s"] for r in ranks)
    phases = {k: sum(r["phases_ms"][k] for r in ranks) / len(ranks) for k in ranks[0]["phases_ms"]}
    out = {
        "impl": "pytorch",
        "ranks": a.ranks,
        "ddp": "none" if a.ranks == 1 else ("no_sync" if a.no_sync else "ddp"),
        "bucket_mb": a.bucket_mb if a.ranks > 1 else None,
        "width": a.width,
        "depth": a.depth,
        "batch": a.batch,
        "warmup": a.warmup,
        "iters": a.iters,
        "samples_per_s": a.iters * a.batch / wall,
        "step_ms": wall * 1e3 / a.iters,
        "phases_ms": phases,
        "peak_rss_mb": [r["peak_rss_mb"] for r in ranks],
        "threads": 1,
        "blas": blas_info(),
    }
    line = json.dumps(out)
    print(line, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
