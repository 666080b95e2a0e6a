#include "core/nn/attention.h"

#include <cmath>
#include <initializer_list>

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::nn {

namespace ops = tensor;
using tensor::ensure_shape;

CausalSelfAttention::CausalSelfAttention(int64_t embd, int64_t heads, float dropout, float init_std,
                                         float proj_std, Rng& rng, tensor::Device device)
    : embd_(embd),
      heads_(heads),
      c_attn_(embd, 3 * embd, init_std, rng, device),
      c_proj_(embd, embd, proj_std, rng, device),
      att_drop_(dropout),
      resid_drop_(dropout) {
  MDDP_CHECK(heads > 0 && embd % heads == 0, "attention: --embd ", embd,
             " is not divisible by --heads ", heads);
  add_prefix(c_attn_, "c_attn.");
  add_prefix(c_proj_, "c_proj.");
}

Tensor CausalSelfAttention::part(const Tensor& heads, int64_t part) const {
  const int64_t n = b_ * heads_, d = embd_ / heads_;
  return heads.view(part * n * t_ * d, {n, t_, d});
}

const Tensor& CausalSelfAttention::forward(const Tensor& x) {
  MDDP_CHECK(x.ndim() == 3 && x.dim(2) == embd_, describe(), " got input ",
             tensor::shape_str(x.shape()));
  b_ = x.dim(0);
  t_ = x.dim(1);
  const int64_t c = embd_, h = heads_, d = c / h;
  const tensor::Device dev = x.device();
  x_rows_ = x.reshape({b_ * t_, c});
  ensure_shape(qkv_heads_, {3, b_, h, t_, d}, dev);
  ops::split_heads(c_attn_.forward(x_rows_).reshape({b_, t_, 3 * c}), qkv_heads_);
  ensure_shape(att_, {b_ * h, t_, t_}, dev);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  ops::gemm_batched(false, true, scale, part(qkv_heads_, 0), part(qkv_heads_, 1), 0.0f, att_);
  ops::causal_softmax_forward(att_, att_);
  att_used_ = &att_drop_.forward(att_);
  ensure_shape(y_heads_, {1, b_, h, t_, d}, dev);
  Tensor y_heads = part(y_heads_, 0);
  ops::gemm_batched(false, false, 1.0f, *att_used_, part(qkv_heads_, 2), 0.0f, y_heads);
  ensure_shape(y_, {b_ * t_, c}, dev);
  Tensor y = y_.reshape({b_, t_, c});
  ops::merge_heads(y_heads_, y);
  out_ = resid_drop_.forward(c_proj_.forward(y_)).reshape({b_, t_, c});
  return out_;
}

// The forward backwards: d(att v) gives datt and dv, the softmax's
// backward dscores, and dscores gives dq and dk (the 1/sqrt(D) again).
const Tensor& CausalSelfAttention::backward(const Tensor& dy, bool need_dx) {
  MDDP_CHECK(att_used_ != nullptr, "backward before forward");
  const int64_t c = embd_, h = heads_, d = c / h;
  const tensor::Device dev = dy.device();
  dy_rows_ = dy.reshape({b_ * t_, c});
  const Tensor& dy_proj = c_proj_.backward(resid_drop_.backward(dy_rows_, true), true);
  ensure_shape(dy_heads_, {1, b_, h, t_, d}, dev);
  ops::split_heads(dy_proj.reshape({b_, t_, c}), dy_heads_);
  const Tensor dyh = part(dy_heads_, 0);
  ensure_shape(datt_, {b_ * h, t_, t_}, dev);
  ensure_shape(dqkv_heads_, {3, b_, h, t_, d}, dev);
  ops::gemm_batched(false, true, 1.0f, dyh, part(qkv_heads_, 2), 0.0f, datt_);
  Tensor dv = part(dqkv_heads_, 2);
  ops::gemm_batched(true, false, 1.0f, *att_used_, dyh, 0.0f, dv);
  ops::causal_softmax_backward(att_, att_drop_.backward(datt_, true), datt_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Tensor dq = part(dqkv_heads_, 0), dk = part(dqkv_heads_, 1);
  ops::gemm_batched(false, false, scale, datt_, part(qkv_heads_, 1), 0.0f, dq);
  ops::gemm_batched(true, false, scale, datt_, part(qkv_heads_, 0), 0.0f, dk);
  ensure_shape(dqkv_, {b_ * t_, 3 * c}, dev);
  Tensor dqkv = dqkv_.reshape({b_, t_, 3 * c});
  ops::merge_heads(dqkv_heads_, dqkv);
  const Tensor& dx = c_attn_.backward(dqkv_, need_dx);
  if (need_dx) dx_ = dx.reshape({b_, t_, c});
  return dx_;
}

std::string CausalSelfAttention::describe() const {
  return str("CausalSelfAttention(", embd_, ", ", heads_, " heads)");
}

LayerSpec CausalSelfAttention::spec() const {
  return {"CausalSelfAttention", {{"n_embd", embd_}, {"n_head", heads_}}};
}

void CausalSelfAttention::collect_parameters(std::vector<Parameter*>& out) {
  c_attn_.collect_parameters(out);
  c_proj_.collect_parameters(out);
}

void CausalSelfAttention::collect_backward_buffers(std::vector<Tensor*>& out) {
  for (Tensor* t : {&dy_heads_, &datt_, &dqkv_heads_, &dqkv_}) out.push_back(t);
  for (Module* m : std::initializer_list<Module*>{&c_attn_, &c_proj_, &att_drop_, &resid_drop_})
    m->collect_backward_buffers(out);
}

void CausalSelfAttention::set_grad_ready_hook(GradReadyHook hook) {
  hook_ = hook;
  c_attn_.set_grad_ready_hook(hook);
  c_proj_.set_grad_ready_hook(hook);
}

void CausalSelfAttention::set_dropout(bool training, uint64_t seed) {
  Rng rng(seed);  // each child its own draw (gpt.h: Note [Dropout seeds])
  att_drop_.set_dropout(training, rng.next_u64());
  resid_drop_.set_dropout(training, rng.next_u64());
}

}  // namespace mddp::nn
