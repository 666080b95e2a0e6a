"""microddp's GPT (--model gpt) in PyTorch 1.13, and what it trains on, for
the GPT oracle (gpt_oracle.py) and the benchmark (bench/pytorch_gpt.py):
one definition, which both import.

* GPT: nanoGPT's model (GPT-2's decoder) as a checkpoint's "model" metadata
  describes it (GPTConfig: vocab_size, block_size, n_layer, n_head, n_embd,
  bias, dropout), with nanoGPT's state_dict names; the head is tied to the
  token embedding, and the MLP's GELU is GPT-2's tanh approximation, as in
  microddp (docs/pytorch.md). Torch 1.13 has no scaled_dot_product_attention:
  the attention is the masked softmax of nanoGPT's slow path.
* adamw(): AdamW with microddp's decay groups (core/nn/optimizer.h decays():
  weight matrices decay; biases, LayerNorm and the embeddings do not).
* lr_at(): microddp's schedule (core/nn/lr_schedule.cc): linear warm-up,
  then a cosine decay to lr_min at the last step.
* CharText: `--dataset text:PATH` from its definition (core/data/text_files.h
  Note [Which files], char_tokenizer.h, text_dataset.h Note [Text windows]):
  the corpus, its sorted-code-point vocabulary, the train (first 90 %) and
  validation splits, and sample i's window of block + 1 tokens.
"""
import json
import math
import os
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 64
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True
    # The fused attention kernel (F.scaled_dot_product_attention), what a
    # PyTorch user runs on a GPU; off, the explicit masked softmax below,
    # which is what the oracle compares microddp's arithmetic with.
    fused_attention: bool = False


def config_from_metadata(meta):
    """The GPTConfig a microddp checkpoint's "model" metadata describes."""
    model = json.loads(meta["model"])
    assert model["type"] == "GPT", model["type"]
    return GPTConfig(**model["config"])


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head = c.n_head
        self.fused = c.fused_attention and hasattr(F, "scaled_dot_product_attention")  # PyTorch 2
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd, bias=c.bias)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd, bias=c.bias)
        self.attn_dropout = nn.Dropout(c.dropout)
        self.resid_dropout = nn.Dropout(c.dropout)
        mask = torch.tril(torch.ones(c.block_size, c.block_size)).view(1, 1, c.block_size, c.block_size)
        self.register_buffer("bias", mask, persistent=False)  # nanoGPT's name; not in the state_dict

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.attn_dropout.p if self.training else 0.0)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = self.attn_dropout(F.softmax(att, dim=-1)) @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd, bias=c.bias)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd, bias=c.bias)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c.vocab_size, c.n_embd),
            wpe=nn.Embedding(c.block_size, c.n_embd),
            drop=nn.Dropout(c.dropout),
            h=nn.ModuleList([Block(c) for _ in range(c.n_layer)]),
            ln_f=nn.LayerNorm(c.n_embd),
        ))
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's smaller residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        """logits [B, T, V]; with targets, also the mean cross entropy over every position."""
        T = idx.size(1)
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def weights(model):
    """The parameters by name, the tied head once (as transformer.wte.weight): microddp's tensors."""
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def adamw(model, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1):
    """AdamW whose decay group is microddp's: the weight matrices, not the embeddings."""
    embeddings = {"transformer.wte.weight", "transformer.wpe.weight"}
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and n not in embeddings]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2 or n in embeddings]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=lr, betas=betas, eps=eps)


def lr_at(step, lr, lr_min, warmup, total):
    """The rate of optimiser step `step` (from 1), as core/nn/lr_schedule.cc computes it."""
    if step <= warmup:
        return lr * step / warmup
    if lr_min < 0:
        return lr
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr_min + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - lr_min)


def corpus_files(path):
    """The files of `--dataset text:PATH` in microddp's order (Note [Which files])."""
    if not os.path.isdir(path):
        return [path]
    found = []
    for d, dirs, files in os.walk(path):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not os.path.islink(os.path.join(d, x))]
        for f in files:
            full = os.path.join(d, f)
            if f.startswith(".") or f.endswith(".dat") or os.path.islink(full) or not os.path.isfile(full):
                continue
            if os.path.getsize(full) > 0:
                found.append(full)
    return sorted(found, key=lambda p: os.path.relpath(p, path).split(os.sep))


class CharText:
    """One split of `--dataset text:PATH` with windows of `block` tokens."""

    def __init__(self, path, block, split="train"):
        text = "\n".join(open(f, encoding="utf-8").read() for f in corpus_files(path))
        self.vocabulary = "".join(sorted(set(text)))
        index = {c: i for i, c in enumerate(self.vocabulary)}
        ids = torch.tensor([index[c] for c in text], dtype=torch.long)
        cut = len(ids) * 9 // 10
        self.tokens = ids[:cut] if split == "train" else ids[cut:]
        self.block = block

    def __len__(self):
        return len(self.tokens) - self.block

    def batch(self, indices):
        """x [B, block] = tokens[i, i + block), y the same one token later."""
        rows = torch.stack([self.tokens[i:i + self.block + 1] for i in indices])
        return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
