#!/usr/bin/python3
"""The PyTorch oracle: microddp trains the same model as PyTorch 1.13.

For each case (the FullMLP and the CNN; SGD with momentum and Adam; cross
entropy on Fashion-MNIST and MSE on synthetic regression):

1. PyTorch builds the model (torch.nn's own layers and init, its own seed)
   and saves the initial state_dict as safetensors: microddp starts from it
   with --init-from.
2. microddp trains K steps in one process (`train`) and with bucketed DDP on
   2 and 3 ranks (`run`), writing a checkpoint after every step.
3. PyTorch trains K steps in one process and with DistributedDataParallel
   (gloo) on 2 ranks, on the same batches: reference.py reproduces
   microddp's sampler and data from their definitions, normalised as the
   checkpoint's "input" metadata says.
4. Compared with PyTorch's single process: the first step's gradient
   (microddp's step-1 momentum buffer, which SGD sets to the gradient; for
   Adam the step-1 exp_avg, (1 - beta1) times the gradient) and every final
   parameter.

Tolerance (stated, not slack): |a - b| <= ATOL + RTOL * |b| per element,
RTOL = 2e-4, ATOL = 2e-6 for gradients and 1e-5 for parameters (about 0.01 *
lr for Adam). The two sides run the same float32 arithmetic in a different
order (OpenBLAS kernels of different blockings, DDP's sums over 2 or 3
ranks), which changes results by a few float32 ulps per operation, ~1e-7
relative; K steps compound that to ~1e-6 on the parameters. Adam divides by
sqrt(v): a weight whose gradient is within rounding of zero can move by a
different fraction of lr, hence the absolute floor. A real mistake (a wrong
mask, a missing bias correction, another batch) moves weights by ~lr and
gradients by their own size: far outside.

  oracle.py MICRODDP                   run every case; exit 1 naming the tensor that differs
  oracle.py MICRODDP --mutation NAME   the same with the planted bug NAME on in microddp
                                       (MDDP_TEST_MUTATION, core/common/test_mutation.h): exit 0
                                       only if the oracle catches it and names a tensor
Exits 77 (skipped) when torch is not installed.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")
try:
    import torch
    import torch.distributed as dist
    from torch import nn
except ImportError as e:
    print(f"SKIPPED: PyTorch is not installed ({e}); apt-get install python3-torch")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

STEPS = 6
BATCH = 24  # divisible by 2 and 3 ranks
SEED = 7
RTOL = 2e-4
ATOL = {"grad": 2e-6, "param": 1e-5}

CASES = [  # name, model, loss, optimizer
    ("mlp-xent-sgd", "mlp", "xent", "sgd"),
    ("mlp-xent-adam", "mlp", "xent", "adam"),
    ("cnn-xent-sgd", "cnn", "xent", "sgd"),
    ("cnn-xent-adam", "cnn", "xent", "adam"),
    ("mlp-mse-sgd", "mlp", "mse", "sgd"),
    ("mlp-mse-adam", "mlp", "mse", "adam"),
]


def microddp_flags(model, loss, optimizer):
    f = ["--model", model, "--loss", loss, "--batch", str(BATCH), "--steps", str(STEPS), "--seed", str(SEED),
         "--no-eval", "--log-every", "1"]
    f += ["--width", "32", "--depth", "2"] if model == "mlp" else ["--channels", "4", "8", "--hidden", "32"]
    f += ["--dataset", "fashion-mnist"] if loss == "xent" else ["--dataset", "synthetic-regression",
                                                                 "--synthetic-size", "256"]
    f += ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"] if optimizer == "sgd" else \
         ["--optimizer", "adam", "--lr", "0.001"]
    return f


def torch_model(model, loss):
    """The same layers as microddp's FullMLP / CNN, initialised by PyTorch."""
    if model == "mlp":
        inp, out = (784, 10) if loss == "xent" else (32, 10)
        return nn.Sequential(nn.Flatten(), nn.Linear(inp, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                             nn.Linear(32, out))
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 7 * 7, 32), nn.ReLU(), nn.Linear(32, 10))


def torch_optimizer(optimizer, params):
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.Adam(params, lr=0.001)


def dataset(loss, input_meta):
    if loss == "xent":
        return reference.ImageData(reference.FASHION_MNIST, input_meta)
    return reference.SyntheticRegression(256, 32, 10, SEED)


def torch_train(case, init, data, rank=0, world=1):
    """K steps; returns (step-1 gradient-like state, final parameters and optimiser state) by name."""
    name, model_kind, loss, optimizer = case
    model = torch_model(model_kind, loss)
    model.load_state_dict(init)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch_optimizer(optimizer, model.parameters())
    loss_fn = nn.CrossEntropyLoss() if loss == "xent" else nn.MSELoss()
    local = BATCH // world
    first = {}
    for step, indices in enumerate(reference.global_batches(len(data), BATCH, SEED, STEPS)):
        x, y = data.batch(indices[rank * local:(rank + 1) * local])
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()
        if step == 0:
            key = "momentum_buffer" if optimizer == "sgd" else "exp_avg"
            first = {n: opt.state[p][key].clone() for n, p in model.named_parameters()}
    return first, {n: p.detach().clone() for n, p in model.named_parameters()}


def microddp_train(binary, case, init_path, work, nproc, env):
    """K steps of microddp; returns (step-1 state, final parameters) by name."""
    name, model_kind, loss, optimizer = case
    run_dir = os.path.join(work, f"{name}-{nproc}")
    flags = microddp_flags(model_kind, loss, optimizer) + [
        "--init-from", init_path, "--run-dir", run_dir, "--checkpoint-every", "1", "--keep-checkpoints", "0"]
    cmd = [binary, "train"] + flags if nproc == 0 else \
          [binary, "run", "--nproc", str(nproc), "--http-port", "-1", "--ddp", "bucketed",
           "--bucket-mb", "0.01", "--first-bucket-mb", "0.005"] + flags
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    step1, _ = reference.read_safetensors(os.path.join(run_dir, "checkpoints", "step-00000001.state.safetensors"))
    final, meta = reference.read_safetensors(os.path.join(run_dir, "checkpoint.safetensors"))
    key = ".momentum_buffer" if optimizer == "sgd" else ".exp_avg"
    return {n[:-len(key)]: t for n, t in step1.items() if n.endswith(key)}, final, meta


def compare(label, what, got, want):
    """Max abs and rel differences; the first tensor outside the tolerance, or None."""
    worst_abs = worst_rel = 0.0
    failure = None
    for name in sorted(want):
        if name not in got:
            return worst_abs, worst_rel, f"{label}: {what} tensor '{name}' is missing"
        a, b = got[name].double(), want[name].double()
        if a.shape != b.shape:
            return worst_abs, worst_rel, f"{label}: {what} tensor '{name}' has shape {list(a.shape)}, want {list(b.shape)}"
        diff = (a - b).abs()
        worst_abs = max(worst_abs, diff.max().item())
        worst_rel = max(worst_rel, (diff.max() / b.abs().max().clamp(min=1e-30)).item())
        bad = diff > ATOL[what] + RTOL * b.abs()
        if bad.any() and failure is None:
            i = int(bad.flatten().nonzero()[0])
            failure = (f"{label}: {what} tensor '{name}' differs from PyTorch: element {i} is "
                       f"{a.flatten()[i].item():.9g}, PyTorch {b.flatten()[i].item():.9g} "
                       f"(|diff| {diff.flatten()[i].item():.3g} > {ATOL[what]} + {RTOL} * |PyTorch|)")
    return worst_abs, worst_rel, failure


def ddp_worker(rank, port, work, cases):
    """One rank of PyTorch DDP (gloo) over every case; rank 0 saves the results."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    for case in cases:
        name, _, loss, _ = case
        init, _ = reference.read_safetensors(os.path.join(work, f"{name}-init.safetensors"))
        input_meta = reference.json.loads(reference.read_safetensors(
            os.path.join(work, f"{name}-0", "checkpoint.safetensors"))[1]["input"])
        first, final = torch_train(case, init, dataset(loss, input_meta), rank, 2)
        if rank == 0:
            reference.write_safetensors(os.path.join(work, f"{name}-torchddp-first.safetensors"), first)
            reference.write_safetensors(os.path.join(work, f"{name}-torchddp-final.safetensors"), final)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("microddp")
    p.add_argument("--mutation", default="", help="planted bug to switch on in microddp; the oracle must catch it")
    p.add_argument("--_ddp_rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--_port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--_work", default="", help=argparse.SUPPRESS)
    p.add_argument("--_cases", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    torch.set_num_threads(1)
    if a._ddp_rank >= 0:
        ddp_worker(a._ddp_rank, a._port, a._work, [c for c in CASES if c[0] in a._cases.split(",")])
        return 0

    env = dict(os.environ)
    if a.mutation:
        env["MDDP_TEST_MUTATION"] = a.mutation
    # A mutation shows in one process already: run that, on the cases of the optimiser it concerns.
    cases = CASES
    if a.mutation:
        cases = [c for c in CASES if c[3] == ("adam" if "adam" in a.mutation else "sgd")]
    runs = [("microddp 1 process", 0), ("microddp bucketed DDP, 2 ranks", 2), ("microddp bucketed DDP, 3 ranks", 3)]
    if a.mutation:
        runs = runs[:1]
    failures = []
    with tempfile.TemporaryDirectory(prefix="microddp-oracle-") as work:
        torch.manual_seed(SEED)
        results = {}
        for case in cases:
            name, model_kind, loss, optimizer = case
            init = torch_model(model_kind, loss).state_dict()
            init_path = os.path.join(work, f"{name}-init.safetensors")
            reference.write_safetensors(init_path, init)  # a state_dict saved from PyTorch
            for label, nproc in runs:
                first, final, meta = microddp_train(a.microddp, case, init_path, work, nproc, env)
                results[(name, label)] = (first, final)
                input_meta = reference.json.loads(meta["input"])
            data = dataset(loss, input_meta)
            results[(name, "PyTorch")] = torch_train(case, init, data)
        if not a.mutation:
            port = free_port()
            names = ",".join(c[0] for c in cases)
            procs = [subprocess.Popen([sys.executable, __file__, a.microddp, "--_ddp_rank", str(r), "--_port", str(port),
                                       "--_work", work, "--_cases", names]) for r in range(2)]
            if any(pr.wait(timeout=600) != 0 for pr in procs):
                sys.exit("FAIL: PyTorch DDP (gloo, 2 ranks) failed")
            for case in cases:
                first, _ = reference.read_safetensors(os.path.join(work, f"{case[0]}-torchddp-first.safetensors"))
                final, _ = reference.read_safetensors(os.path.join(work, f"{case[0]}-torchddp-final.safetensors"))
                results[(case[0], "PyTorch DDP (gloo), 2 ranks")] = (first, final)
            runs = runs + [("PyTorch DDP (gloo), 2 ranks", 2)]

        print(f"{STEPS} steps, global batch {BATCH}; against PyTorch {torch.__version__} in one process; "
              f"pass: |diff| <= atol + {RTOL} * |PyTorch| (atol {ATOL['grad']} gradients, {ATOL['param']} parameters)")
        print(f"{'case':<15} {'run':<32} {'grad max abs':>12} {'grad max rel':>12} {'param max abs':>13} {'param max rel':>13}")
        for case in cases:
            want_first, want_final = results[(case[0], "PyTorch")]
            for label, _ in runs:
                first, final = results[(case[0], label)]
                ga, gr, gf = compare(f"{case[0]}, {label}", "grad", first, want_first)
                pa, pr_, pf = compare(f"{case[0]}, {label}", "param", final, want_final)
                print(f"{case[0]:<15} {label:<32} {ga:12.3g} {gr:12.3g} {pa:13.3g} {pr_:13.3g}"
                      f"{'' if not (gf or pf) else '  FAIL'}")
                failures += [f for f in (gf, pf) if f]
    for f in failures:
        print("FAIL:", f)
    if a.mutation:
        if failures:
            print(f"OK: the planted bug '{a.mutation}' was caught")
            return 0
        print(f"FAIL: the planted bug '{a.mutation}' was not caught")
        return 1
    print("OK: microddp matches PyTorch" if not failures else f"{len(failures)} comparison(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
