#!/usr/bin/python3
"""The three GEMMs of a FullMLP layer, through oneDNN and through OpenBLAS.

A Linear(W, W) layer with batch B runs, per step (row-major, as microddp's
core/nn/layers.cc calls them):

  forward      y  = x @ W^T     NT  m=B n=W k=W
  weight grad  dW = dy^T @ x    TN  m=W n=W k=B
  input grad   dx = dy @ W      NN  m=B n=W k=W   (not for the first layer)

This measures each one single-threaded, best of --reps, through the same
shared libraries the two trainers use: oneDNN's dnnl_sgemm (libdnnl.so.2,
microddp's GEMM) on 64-byte-aligned buffers like microddp's tensors, and also
with B moved off 32-byte alignment (to show alignment effects), and OpenBLAS's
cblas_sgemm (libopenblas.so.0, what torch's Linear calls through libblas.so.3).
It then gives the step's GEMM lower bound from the per-shape rates (16 NT +
16 TN + 15 NN). Prints a markdown table, or JSON with --json.
"""
import argparse
import ctypes
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402  (after the thread settings)

I64, F32, PF = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p


def aligned(n, align, offset):
    """float32 array of n elements whose address is `offset` bytes past an `align`-byte boundary."""
    raw = np.empty(n + (align + offset) // 4 + 16, dtype=np.float32)
    skip = (-raw.ctypes.data) % align + offset
    a = raw[skip // 4 : skip // 4 + n]
    assert (a.ctypes.data - offset) % align == 0
    return a


def load():
    dnnl = ctypes.CDLL("libdnnl.so.2")
    dnnl.dnnl_sgemm.argtypes = [ctypes.c_char, ctypes.c_char, I64, I64, I64, F32, PF, I64, PF, I64, F32, PF, I64]
    dnnl.dnnl_sgemm.restype = ctypes.c_int
    ob = ctypes.CDLL("libopenblas.so.0")
    ob.cblas_sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               F32, PF, ctypes.c_int, PF, ctypes.c_int, F32, PF, ctypes.c_int]
    ob.cblas_sgemm.restype = None
    ob.openblas_get_corename.restype = ctypes.c_char_p
    return dnnl, ob


def rate(fn, flops, reps):
    fn()
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return flops / best * 1e-9


def measure(width, batch, reps, dnnl, ob):
    shapes = [("forward y=x·Wᵀ", "N", "T", batch, width, width, 16),
              ("weight grad dW=dyᵀ·x", "T", "N", width, width, batch, 16),
              ("input grad dx=dy·W", "N", "N", batch, width, width, 15)]
    rng = np.random.default_rng(1)
    rows = []
    for name, ta, tb, m, n, k, count in shapes:
        lda = m if ta == "T" else k
        ldb = k if tb == "T" else n
        flops = 2.0 * m * n * k
        res = {"gemm": name, "trans": ta + tb, "m": m, "n": n, "k": k, "per_step": count}
        for label, b_off in (("onednn_aligned", 0), ("onednn_b_off16", 16)):
            a, b, c = aligned(m * k, 64, 0), aligned(k * n, 64, b_off), aligned(m * n, 64, 0)
            a[:] = rng.uniform(-1, 1, a.size)
            b[:] = rng.uniform(-1, 1, b.size)
            call = lambda: dnnl.dnnl_sgemm(ta.encode(), tb.encode(), m, n, k, 1.0, a.ctypes.data, lda,
                                           b.ctypes.data, ldb, 0.0, c.ctypes.data, n)
            res[label] = rate(call, flops, reps)
        a, b, c = aligned(m * k, 64, 0), aligned(k * n, 64, 0), aligned(m * n, 64, 0)
        a[:] = rng.uniform(-1, 1, a.size)
        b[:] = rng.uniform(-1, 1, b.size)
        row_major, no, tr = 101, 111, 112
        call = lambda: ob.cblas_sgemm(row_major, tr if ta == "T" else no, tr if tb == "T" else no, m, n, k, 1.0,
                                      a.ctypes.data, lda, b.ctypes.data, ldb, 0.0, c.ctypes.data, n)
        res["openblas"] = rate(call, flops, reps)
        rows.append(res)
    bound = {}
    for lib in ("onednn_aligned", "onednn_b_off16", "openblas"):
        bound[lib] = sum(2.0 * r["m"] * r["n"] * r["k"] * r["per_step"] / (r[lib] * 1e9) for r in rows) * 1e3
    return {"width": width, "batch": batch, "rows": rows, "bound_ms": bound,
            "openblas_core": ob.openblas_get_corename().decode(),
            "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", "")}


def markdown(r):
    L = [f"GEMMs of one FullMLP step, W={r['width']} B={r['batch']}, single thread, best-of GFLOP/s "
         f"(OpenBLAS kernel: {r['openblas_core']}):", "",
         "| GEMM | op | m×n×k | per step | oneDNN, 64-B aligned (as microddp) | oneDNN, B 16 B off | OpenBLAS |",
         "|---|---|---|---|---|---|---|"]
    for x in r["rows"]:
        L.append(f"| {x['gemm']} | {x['trans']} | {x['m']}×{x['n']}×{x['k']} | {x['per_step']} | "
                 f"{x['onednn_aligned']:.1f} | {x['onednn_b_off16']:.1f} | {x['openblas']:.1f} |")
    b = r["bound_ms"]
    L.append(f"| step lower bound (ms) | | | 47 | {b['onednn_aligned']:.1f} | {b['onednn_b_off16']:.1f} | "
             f"{b['openblas']:.1f} |")
    return "\n".join(L)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--reps", type=int, default=30, help="timed repetitions per GEMM (best is kept)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = p.parse_args()
    dnnl, ob = load()
    r = measure(a.width, a.batch, a.reps, dnnl, ob)
    print(json.dumps(r) if a.json else markdown(r))


if __name__ == "__main__":
    main()
