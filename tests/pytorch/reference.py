"""Python reproductions of what microddp trains on, written from its
definitions (not from its outputs), for the PyTorch oracle test:

* mddp::Rng (xoshiro256** seeded by splitmix64, core/common/rng.h) and
  derive_seed (core/data/seeds.h);
* the global-batch sampler: the permutation of epoch e from
  Rng(derive_seed(seed, e)) by Fisher-Yates, step s taking
  perm[s*B:(s+1)*B] and rank r the slice [r*b, (r+1)*b) of it
  (Note [Global batch], core/data/sampler.h);
* Fashion-MNIST read from Debian's IDX files and normalised by the input
  encoding a microddp checkpoint records (its "input" metadata);
* synthetic regression data (core/data/synthetic.cc);
* safetensors files read and written with json and struct (Debian has no
  python3-safetensors).

So the batches are the same on both sides because both follow one
definition, which the test then checks: a wrong sampler, normalisation or
loss in microddp shows up as a difference.
"""
import gzip
import json
import math
import os
import struct

import numpy as np
import torch

M64 = (1 << 64) - 1


def _splitmix64_finalise(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def derive_seed(seed, purpose):
    return _splitmix64_finalise((seed ^ (purpose * 0x9E3779B97F4A7C15)) & M64)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Rng:
    """mddp::Rng, bit for bit."""

    def __init__(self, seed):
        self.s = []
        x = seed & M64
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            self.s.append(_splitmix64_finalise(x))

    def next_u64(self):
        s = self.s
        result = (_rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, n):
        return self.next_u64() % n

    def normal(self):
        """Box-Muller in double, rounded to float32 (as the C++ static_cast)."""
        u1 = ((self.next_u64() >> 11) + 1.0) * 2.0**-53
        u2 = (self.next_u64() >> 11) * 2.0**-53
        return np.float32(math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))


def permutation(n, seed, epoch):
    perm = list(range(n))
    rng = Rng(derive_seed(seed, epoch))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def global_batches(n, global_batch, seed, steps):
    """The sample indices of each step's global batch (the last partial batch of an epoch is dropped)."""
    per_epoch = n // global_batch
    out, perm, perm_epoch = [], None, -1
    for step in range(steps):
        epoch, s = divmod(step, per_epoch)
        if epoch != perm_epoch:
            perm, perm_epoch = permutation(n, seed, epoch), epoch
        out.append(perm[s * global_batch:(s + 1) * global_batch])
    return out


# ---- data -------------------------------------------------------------------

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (plain or .gz): uint8 array shaped by its header."""
    if not os.path.exists(path):
        path += ".gz"
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class ImageData:
    """Fashion-MNIST's training split, normalised as a checkpoint's "input" metadata says."""

    def __init__(self, directory, encoding):
        self.images = read_idx(os.path.join(directory, "train-images-idx3-ubyte"))
        self.labels = read_idx(os.path.join(directory, "train-labels-idx1-ubyte")).astype(np.int64)
        f32 = np.float32
        raw = np.arange(256, dtype=f32)
        # (raw / scale - mean) / std, each operation in float32 as microddp does
        self.lut = ((raw / f32(encoding["scale"])) - f32(encoding["mean"])) / f32(encoding["std"])

    def __len__(self):
        return len(self.labels)

    def batch(self, indices):
        x = self.lut[self.images[indices]][:, None, :, :]  # [B, 1, 28, 28]
        return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(self.labels[indices])


class SyntheticRegression:
    """core/data/synthetic.cc's regression set: X ~ N(0, 1), y = X W* + noise N(0, 1)."""

    TEACHER = 0x7465616368657221  # "teacher!"
    SAMPLES = 0x73616D706C657321  # "samples!"

    def __init__(self, n, in_dim, out_dim, seed, noise=np.float32(0.1)):
        f32 = np.float32
        teacher = Rng(derive_seed(seed, self.TEACHER))
        scale = f32(1.0) / np.sqrt(f32(in_dim))
        w = np.array([scale * teacher.normal() for _ in range(in_dim * out_dim)], dtype=f32).reshape(in_dim, out_dim)
        rng = Rng(derive_seed(derive_seed(seed, 1), self.SAMPLES))  # the train split's sample seed
        x = np.array([rng.normal() for _ in range(n * in_dim)], dtype=f32).reshape(n, in_dim)
        clean = np.zeros((n, out_dim), dtype=np.float64)
        for k in range(in_dim):  # accumulated in double, in microddp's order
            clean += x[:, k:k + 1].astype(np.float64) * w[k:k + 1, :].astype(np.float64)
        y = clean.astype(f32).reshape(-1)
        for k in range(y.size):
            y[k] = y[k] + noise * rng.normal()
        self.x, self.y = x, y.reshape(n, out_dim)

    def __len__(self):
        return len(self.x)

    def batch(self, indices):
        return torch.from_numpy(self.x[indices]), torch.from_numpy(self.y[indices])


# ---- safetensors ------------------------------------------------------------

def read_safetensors(path):
    """({name: float32 tensor}, metadata) of a safetensors file of F32 tensors."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        assert e["dtype"] == "F32", (path, name, e["dtype"])
        tensors[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(e["shape"])
    return tensors, meta


def write_safetensors(path, tensors, metadata=None):
    """What safetensors.torch.save_file writes, for F32 tensors."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        b = tensors[name].detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
