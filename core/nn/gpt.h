// A GPT-2-style language model (--model gpt): token and position
// embeddings, `layers` pre-LayerNorm blocks of causal self-attention and an
// MLP, each added to a residual stream, a final LayerNorm, and an LM head
// that is the token embedding itself (tied weights):
//
//   x = drop(wte[ids] + wpe[0..T))                       [B, T, C]
//   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))         per block
//   logits = ln_f(x) wte^T                                [B*T, V]
//
// Parameters carry nanoGPT's state_dict names ("transformer.h.0.attn.c_attn
// .weight"); the head has no parameter of its own (nanoGPT's lm_head.weight
// is transformer.wte.weight). Initialisation is GPT-2's: N(0, 0.02^2) for
// every Linear and embedding weight, biases 0, LayerNorm 1 and 0, and the
// residual projections (attention c_proj and MLP c_proj) N(0, (0.02 /
// sqrt(2 * layers))^2), so the residual stream's variance does not grow with
// depth. The draws come from one mddp::Rng in construction order, so a seed
// gives bitwise the same model everywhere.
//
// Note [Tied weight]
// ~~~~~~~~~~~~~~~~~~
// transformer.wte.weight gets two gradient contributions in one backward:
// the head's (dW += dlogits^T ln_f(x), the first thing backward does) and
// the embedding's (rows of dx scatter-added, the last thing). It has uses =
// 2, and its grad-ready hook fires after each (Note [Grad-ready hooks]):
// first of all hooks, with the head's share alone, and last of all, with
// the whole gradient. It is registered first in parameters(), so its last
// firing is in reverse parameters() order as every other one. DDP counts
// the two (Note [Contributions] in core/ddp/contributions.h): its bucket
// may leave only after the second (tests/ddp/ddp_tied_weight_test.cc;
// docs/transformer.md).
//
// Note [Dropout seeds]: set_dropout(true, seed) seeds this forward's masks;
// a composite gives each child, in order, its own draw of Rng(seed), down to
// every Dropout. The trainer derives `seed` from (--seed, rank, step,
// micro-batch), so masks differ per rank and a resumed run redraws them.
#pragma once

#include <memory>
#include <vector>

#include "core/nn/attention.h"
#include "core/nn/layers.h"
#include "core/nn/transformer_layers.h"

namespace mddp::nn {

struct GptConfig {
  int64_t vocab = 0;   // from the data (Dataset::num_classes)
  int64_t block = 64;  // the longest sequence (position embeddings)
  int64_t layers = 4, heads = 4, embd = 128;
  float dropout = 0.0f;
};

// c_fc (C -> 4C), GELU, c_proj (4C -> C), dropout. [B, T, C] in and out.
class Mlp : public Module {
 public:
  Mlp(int64_t embd, float dropout, float init_std, float proj_std, Rng& rng,
      tensor::Device device = {});
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override;
  LayerSpec spec() const override { return {"MLP", {{"n_embd", c_fc_.weight.value.dim(1)}}}; }
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_backward_buffers(std::vector<Tensor*>& out) override;
  void set_grad_ready_hook(GradReadyHook hook) override;
  void set_dropout(bool training, uint64_t seed) override { drop_.set_dropout(training, seed); }

 private:
  Linear c_fc_;
  Gelu gelu_;
  Linear c_proj_;
  Dropout drop_;
  tensor::Shape shape_;
  Tensor x_rows_, out_, dy_rows_, dx_;
};

// x + attn(ln_1(x)), then that + mlp(ln_2(that)). [B, T, C] in and out.
class Block : public Module {
 public:
  Block(const GptConfig& cfg, Rng& rng, tensor::Device device = {});
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override { return "Block(" + attn_.describe() + ")"; }
  LayerSpec spec() const override { return attn_.spec(); }
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_backward_buffers(std::vector<Tensor*>& out) override;
  void set_grad_ready_hook(GradReadyHook hook) override;
  void set_dropout(bool training, uint64_t seed) override;

 private:
  LayerNorm ln_1_;
  CausalSelfAttention attn_;
  LayerNorm ln_2_;
  Mlp mlp_;
  Tensor mid_, y_, dmid_, dx_;  // mid_: the residual stream between the two halves
};

// Note [Shared backward buffers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Forward's results must live until backward, but a block's backward
// buffers (the gradients it hands on, its scratch: collect_backward_buffers)
// are dead once the block before it has run its backward. So every block
// runs its backward in the last block's buffers: block i takes block i+1's.
// One of them is live: block i's input dy is block i+1's output gradient,
// the buffer where block i writes its own. That is safe because writing its
// output gradient is the last thing Block::backward does, after the last
// read of dy (the residual sum dmid = dy + ...): keep it so. One set of
// buffers instead of one per block; at 6 layers of 384 on a batch of 12 x 64
// tokens that is about 140 MiB of the step's peak memory. Forward's
// activations are not shared.
class Gpt : public Module {
 public:
  Gpt(const GptConfig& cfg, Rng& rng, tensor::Device device = {});
  // ids [B, T] token ids (floats), T <= block -> logits [B*T, vocab].
  const Tensor& forward(const Tensor& ids) override;
  // dlogits [B*T, vocab]; the ids have no gradient (returns an empty tensor).
  const Tensor& backward(const Tensor& dlogits, bool need_dx) override;
  std::string describe() const override;
  // {"GPT", {vocab_size, block_size, n_layer, n_head, n_embd}}: nanoGPT's GPTConfig.
  LayerSpec spec() const override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  void set_grad_ready_hook(GradReadyHook hook) override;
  void set_dropout(bool training, uint64_t seed) override;
  const GptConfig& config() const { return cfg_; }

 private:
  GptConfig cfg_;
  Embedding wte_, wpe_;
  Dropout drop_;
  std::vector<std::unique_ptr<Block>> blocks_;
  LayerNorm ln_f_;
  Tensor positions_;  // [B*T]: 0..T-1 for each sequence, wpe's ids
  Tensor x_, hidden_rows_, logits_, dhidden_, dhidden_3d_, dx_rows_, none_;
};

}  // namespace mddp::nn
