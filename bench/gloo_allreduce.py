#!/usr/bin/env python3
"""torch.distributed all_reduce (backend gloo, float32 sum) timed in the shape
of nccl-tests' all_reduce_perf, so that its table lines up with
`microddp bench allreduce` and bench/mpi_allreduce.c.

N local processes rendezvous on 127.0.0.1 (TCP store, a free port), one
compute thread each (torch.set_num_threads(1)). Per size S (from -b to -e,
multiplied by -f each step): one checked all_reduce of integer-valued data
whose exact sum is known (#wrong counts every element that differs), then
--warmup untimed and --iters timed all_reduces back to back between two
barriers. The time is the slowest rank's mean per all_reduce;
algbw = S / t, busbw = algbw * 2(n-1)/n. The reduction is in place, as
DistributedDataParallel does it.

    /usr/bin/python3 bench/gloo_allreduce.py --nproc 2 -b 4K -e 64M -f 4
    /usr/bin/python3 bench/gloo_allreduce.py --nproc 2 --json gloo.jsonl

--json FILE: one JSON object per size, one per line, written by rank 0.
Use Debian's /usr/bin/python3 (python3-torch 1.13); another python3 earlier on
PATH may have no torch.
"""
import argparse
import json
import os
import re
import socket
import sys
import time


def parse_size(s):
    m = re.fullmatch(r"(\d+)\s*([KMG]?)(I?B)?", s.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r} (bytes, with an optional K, M or G suffix)")
    return int(m[1]) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m[2]]


def sizes(lo, hi, factor):
    out, s = [], float(lo)
    while s <= hi * (1 + 1e-9):
        out.append(int(s))
        s *= factor
    return out


def worker(rank, args, port):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    n = args.nproc
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    max_count = sizes(args.minbytes, args.maxbytes, args.stepfactor)[-1] // 4
    buf = torch.zeros(max_count, dtype=torch.float32)
    jf = open(args.json, "w") if rank == 0 and args.json else None
    if rank == 0:
        print(f"# torch.distributed all_reduce: {n} ranks, backend gloo on 127.0.0.1, float32 sum, in place; "
              f"torch {torch.__version__}, threads {torch.get_num_threads()}")
        print(f"# iters {args.iters}, warmup {args.warmup}; time = slowest rank's mean; busbw = algbw * 2(n-1)/n\n#")
        print("# %12s %12s %6s %6s %12s %12s %12s %8s" % ("size(B)", "count", "type", "redop", "time(us)",
                                                         "algbw(GB/s)", "busbw(GB/s)", "#wrong"))
        sys.stdout.flush()
    total_wrong, busbws = 0, []
    for size in sizes(args.minbytes, args.maxbytes, args.stepfactor):
        count = size // 4
        nbytes = count * 4
        t = buf[:count]
        # Rank r's element i is ((r + i) mod 5) - 2, as in microddp's benchmark.
        reps = count // 5 + 1
        t.copy_(((torch.arange(5) + rank) % 5 - 2).to(torch.float32).repeat(reps)[:count])
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        want = torch.zeros(5)
        for r in range(n):
            want += (torch.arange(5) + r) % 5 - 2
        wrong = int((t != want.repeat(reps)[:count]).sum())
        t.zero_()
        for _ in range(args.warmup):
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t_us = (time.perf_counter() - t0) * 1e6 / args.iters
        stats = torch.tensor([t_us, float(wrong)], dtype=torch.float64)
        tmax = stats[:1].clone()
        dist.all_reduce(tmax, op=dist.ReduceOp.MAX)
        wsum = stats[1:].clone()
        dist.all_reduce(wsum, op=dist.ReduceOp.SUM)
        if rank == 0:
            tm, wr = float(tmax[0]), int(wsum[0])
            algbw = nbytes / (tm * 1e3) if tm > 0 else 0.0
            busbw = algbw * 2 * (n - 1) / n
            print("  %12d %12d %6s %6s %12.2f %12.3f %12.3f %8d" % (nbytes, count, "fp32", "sum", tm, algbw, busbw, wr))
            sys.stdout.flush()
            if jf:
                jf.write(json.dumps({"impl": "gloo", "nproc": n, "bytes": nbytes, "count": count,
                                     "time_us": round(tm, 3), "algbw_gbps": algbw, "busbw_gbps": busbw,
                                     "wrong": wr}) + "\n")
                jf.flush()
            total_wrong += wr
            busbws.append(busbw)
    if rank == 0:
        print(f"# Out of bounds values : {total_wrong} {'FAILED' if total_wrong else 'OK'}")
        print(f"# Avg bus bandwidth    : {sum(busbws) / max(1, len(busbws)):.3f} GB/s")
        if jf:
            jf.close()
    dist.barrier()
    dist.destroy_process_group()
    if total_wrong:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("4K"))
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("64M"))
    p.add_argument("-f", "--stepfactor", type=float, default=4)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--json", default="")
    args = p.parse_args()
    if args.minbytes < 4 or args.minbytes > args.maxbytes or args.stepfactor <= 1 or args.iters < 1:
        p.error("need 4 <= -b <= -e, -f > 1, --iters >= 1")
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(r, args, port)) for r in range(args.nproc)]
    for pr in procs:
        pr.start()
    code = 0
    for pr in procs:
        pr.join()
        code = code or pr.exitcode
    sys.exit(code)


if __name__ == "__main__":
    main()
