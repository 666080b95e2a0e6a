#include "core/nn/gpt.h"

#include <cmath>
#include <initializer_list>

#include "core/common/check.h"
#include "core/common/test_mutation.h"
#include "core/tensor/ops.h"

namespace mddp::nn {

namespace ops = tensor;
using tensor::ensure_shape;

namespace {

constexpr float kInitStd = 0.02f;  // GPT-2's

// The residual projections' smaller std (gpt.h).
float proj_std(int64_t layers) {
  return kInitStd / std::sqrt(2.0f * static_cast<float>(layers));
}

// The config, or an InputError naming the flag that cannot work.
const GptConfig& checked(const GptConfig& cfg) {
  if (cfg.vocab < 1 || cfg.block < 1 || cfg.layers < 1 || cfg.embd < 1)
    throw InputError(str("--model gpt needs a vocabulary, --block, --layers and --embd >= 1 (got ",
                         cfg.vocab, ", ", cfg.block, ", ", cfg.layers, ", ", cfg.embd, ")"));
  if (cfg.heads < 1 || cfg.embd % cfg.heads != 0)
    throw InputError(str("--embd ", cfg.embd, " must be a multiple of --heads ", cfg.heads));
  if (!(cfg.dropout >= 0.0f && cfg.dropout < 1.0f))
    throw InputError(str("--dropout must be in [0, 1), got ", cfg.dropout));
  return cfg;
}

// out = a + b: a residual connection.
void add_into(const Tensor& a, const Tensor& b, Tensor& out) {
  ensure_shape(out, a.shape(), a.device());
  ops::copy(a, out);
  ops::axpy(1.0f, b, out);
}

}  // namespace

Mlp::Mlp(int64_t embd, float dropout, float init_std, float proj_std, Rng& rng,
         tensor::Device device)
    : c_fc_(embd, 4 * embd, init_std, rng, device),
      c_proj_(4 * embd, embd, proj_std, rng, device),
      drop_(dropout) {
  add_prefix(c_fc_, "c_fc.");
  add_prefix(c_proj_, "c_proj.");
}

const Tensor& Mlp::forward(const Tensor& x) {
  shape_ = x.shape();
  x_rows_ = x.reshape({x.numel() / shape_.back(), shape_.back()});
  out_ = drop_.forward(c_proj_.forward(gelu_.forward(c_fc_.forward(x_rows_)))).reshape(shape_);
  return out_;
}

const Tensor& Mlp::backward(const Tensor& dy, bool need_dx) {
  dy_rows_ = dy.reshape(x_rows_.shape());
  const Tensor& dh = gelu_.backward(c_proj_.backward(drop_.backward(dy_rows_, true), true), true);
  const Tensor& dx = c_fc_.backward(dh, need_dx);
  if (need_dx) dx_ = dx.reshape(shape_);
  return dx_;
}

std::string Mlp::describe() const {
  return str("MLP(", c_fc_.weight.value.dim(1), " -> ", c_fc_.weight.value.dim(0), " -> ",
             c_proj_.weight.value.dim(0), ")");
}

void Mlp::collect_parameters(std::vector<Parameter*>& out) {
  c_fc_.collect_parameters(out);
  c_proj_.collect_parameters(out);
}

void Mlp::collect_backward_buffers(std::vector<Tensor*>& out) {
  for (Module* m : std::initializer_list<Module*>{&c_fc_, &gelu_, &c_proj_, &drop_})
    m->collect_backward_buffers(out);
}

void Mlp::set_grad_ready_hook(GradReadyHook hook) {
  hook_ = hook;
  c_fc_.set_grad_ready_hook(hook);
  c_proj_.set_grad_ready_hook(hook);
}

Block::Block(const GptConfig& cfg, Rng& rng, tensor::Device device)
    : ln_1_(cfg.embd, device),
      attn_(cfg.embd, cfg.heads, cfg.dropout, kInitStd, proj_std(cfg.layers), rng, device),
      ln_2_(cfg.embd, device),
      mlp_(cfg.embd, cfg.dropout, kInitStd, proj_std(cfg.layers), rng, device) {
  add_prefix(ln_1_, "ln_1.");
  add_prefix(attn_, "attn.");
  add_prefix(ln_2_, "ln_2.");
  add_prefix(mlp_, "mlp.");
}

const Tensor& Block::forward(const Tensor& x) {
  add_into(x, attn_.forward(ln_1_.forward(x)), mid_);
  add_into(mid_, mlp_.forward(ln_2_.forward(mid_)), y_);
  return y_;
}

// A residual connection passes its gradient through unchanged and adds the
// branch's: d(mid) = dy + d(mlp branch), dx = d(mid) + d(attention branch).
const Tensor& Block::backward(const Tensor& dy, bool) {
  add_into(dy, ln_2_.backward(mlp_.backward(dy, true), true), dmid_);  // dy's last read
  // dx_ may be dy's storage, written last (Note [Shared backward buffers]).
  add_into(dmid_, ln_1_.backward(attn_.backward(dmid_, true), true), dx_);
  return dx_;
}

void Block::collect_parameters(std::vector<Parameter*>& out) {
  ln_1_.collect_parameters(out);
  attn_.collect_parameters(out);
  ln_2_.collect_parameters(out);
  mlp_.collect_parameters(out);
}

void Block::collect_backward_buffers(std::vector<Tensor*>& out) {
  out.push_back(&dmid_);
  out.push_back(&dx_);
  for (Module* m : std::initializer_list<Module*>{&ln_1_, &attn_, &ln_2_, &mlp_})
    m->collect_backward_buffers(out);
}

void Block::set_grad_ready_hook(GradReadyHook hook) {
  hook_ = hook;
  for (Module* m : std::initializer_list<Module*>{&ln_1_, &attn_, &ln_2_, &mlp_})
    m->set_grad_ready_hook(hook);
}

void Block::set_dropout(bool training, uint64_t seed) {
  Rng rng(seed);  // Note [Dropout seeds]
  attn_.set_dropout(training, rng.next_u64());
  mlp_.set_dropout(training, rng.next_u64());
}

Gpt::Gpt(const GptConfig& cfg, Rng& rng, tensor::Device device)
    : cfg_(checked(cfg)),
      wte_(cfg.vocab, cfg.embd, kInitStd, rng, device),
      wpe_(cfg.block, cfg.embd, kInitStd, rng, device),
      drop_(cfg.dropout),
      ln_f_(cfg.embd, device) {
  // The embedding lookup and the head (Note [Tied weight]). The planted bug
  // tied_grad_first_contribution (core/common/test_mutation.h) counts one:
  // DDP sends the gradient with the head's share alone.
  wte_.weight.uses = test_mutation("tied_grad_first_contribution") ? 1 : 2;
  add_prefix(wte_, "transformer.wte.");
  add_prefix(wpe_, "transformer.wpe.");
  for (int64_t i = 0; i < cfg.layers; ++i) {
    blocks_.push_back(std::make_unique<Block>(cfg, rng, device));
    add_prefix(*blocks_.back(), str("transformer.h.", i, "."));
  }
  add_prefix(ln_f_, "transformer.ln_f.");
}

const Tensor& Gpt::forward(const Tensor& ids) {
  MDDP_CHECK(ids.ndim() == 2 && ids.dim(1) >= 1 && ids.dim(1) <= cfg_.block, describe(),
             " takes token ids [B, T] with T <= ", cfg_.block, ", got ",
             tensor::shape_str(ids.shape()));
  const int64_t b = ids.dim(0), t = ids.dim(1), c = cfg_.embd;
  if (positions_.numel() != b * t || x_.ndim() != 3 || x_.dim(1) != t) {
    std::vector<float> pos(static_cast<std::size_t>(b * t));
    for (int64_t i = 0; i < b * t; ++i) pos[i] = static_cast<float>(i % t);
    positions_ = Tensor::from_vector({b * t}, pos, ids.device());
  }
  add_into(wte_.forward(ids).reshape({b, t, c}), wpe_.forward(positions_).reshape({b, t, c}), x_);
  const Tensor* h = &drop_.forward(x_);
  for (auto& block : blocks_) h = &block->forward(*h);
  hidden_rows_ = ln_f_.forward(*h).reshape({b * t, c});
  ensure_shape(logits_, {b * t, cfg_.vocab}, ids.device());
  ops::gemm(false, true, 1.0f, hidden_rows_, wte_.weight.value, 0.0f, logits_);  // the tied head
  return logits_;
}

const Tensor& Gpt::backward(const Tensor& dlogits, bool) {
  MDDP_CHECK(hidden_rows_.defined(), "backward before forward");
  // The head: the first of the tied weight's two contributions (Note [Tied weight]).
  ensure_shape(dhidden_, hidden_rows_.shape(), dlogits.device());
  ops::gemm(true, false, 1.0f, dlogits, hidden_rows_, 1.0f, wte_.weight.grad);
  grad_ready(wte_.weight);
  ops::gemm(false, false, 1.0f, dlogits, wte_.weight.value, 0.0f, dhidden_);
  dhidden_3d_ = dhidden_.reshape(x_.shape());
  const Tensor* g = &ln_f_.backward(dhidden_3d_, true);
  for (std::size_t i = blocks_.size(); i-- > 0;) {
    if (i + 1 < blocks_.size()) share_backward_buffers(*blocks_[i], *blocks_[i + 1]);
    g = &blocks_[i]->backward(*g, true);
  }
  dx_rows_ = drop_.backward(*g, true).reshape({x_.dim(0) * x_.dim(1), cfg_.embd});
  wpe_.backward(dx_rows_, false);
  if (wte_.weight.uses == 2) {
    wte_.backward(dx_rows_, false);  // the embedding's share: wte's hook fires again
  } else {  // tied_grad_first_contribution (the constructor): the embedding's share unannounced
    wte_.set_grad_ready_hook({});
    wte_.backward(dx_rows_, false);
    wte_.set_grad_ready_hook(hook_);
  }
  return none_;
}

std::string Gpt::describe() const {
  return str("GPT(", cfg_.layers, "x", cfg_.embd, ", ", cfg_.heads, " heads, block ", cfg_.block,
             ", vocab ", cfg_.vocab, ")");
}

LayerSpec Gpt::spec() const {
  return {"GPT",
          {{"vocab_size", cfg_.vocab},
           {"block_size", cfg_.block},
           {"n_layer", cfg_.layers},
           {"n_head", cfg_.heads},
           {"n_embd", cfg_.embd}}};
}

// The tied weight first, so that it fires last (Note [Tied weight]).
void Gpt::collect_parameters(std::vector<Parameter*>& out) {
  wte_.collect_parameters(out);
  wpe_.collect_parameters(out);
  for (auto& block : blocks_) block->collect_parameters(out);
  ln_f_.collect_parameters(out);
}

void Gpt::set_grad_ready_hook(GradReadyHook hook) {
  hook_ = hook;
  wte_.set_grad_ready_hook(hook);
  wpe_.set_grad_ready_hook(hook);
  for (auto& block : blocks_) block->set_grad_ready_hook(hook);
  ln_f_.set_grad_ready_hook(hook);
}

void Gpt::set_dropout(bool training, uint64_t seed) {
  Rng rng(seed);  // Note [Dropout seeds]
  drop_.set_dropout(training, rng.next_u64());
  for (auto& block : blocks_) block->set_dropout(training, rng.next_u64());
}

}  // namespace mddp::nn
