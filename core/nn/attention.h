// GPT-2's causal multi-head self-attention. One Linear makes the queries,
// keys and values of every head at once (c_attn, C -> 3C); each head, of
// D = C / H features, attends from every position to itself and the
// positions before it; c_proj (C -> C) mixes the heads' outputs. Per head:
//
//   att = causal_softmax(q k^T / sqrt(D))   [T, T], zero above the diagonal
//   y   = att v                            [T, D]
//
// computed for all B*H (sequence, head) pairs by gemm_batched on the heads
// layout of ops.h split_heads. Input and output [B, T, C].
#pragma once

#include "core/common/rng.h"
#include "core/nn/layers.h"
#include "core/nn/transformer_layers.h"

namespace mddp::nn {

class CausalSelfAttention : public Module {
 public:
  // Weights ~ N(0, init_std^2), c_proj's ~ N(0, proj_std^2) (GPT-2 scales the
  // residual projections down); dropout on the attention weights and the output.
  CausalSelfAttention(int64_t embd, int64_t heads, float dropout, float init_std, float proj_std,
                      Rng& rng, tensor::Device device = {});
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override;
  LayerSpec spec() const override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_backward_buffers(std::vector<Tensor*>& out) override;
  void set_grad_ready_hook(GradReadyHook hook) override;
  void set_dropout(bool training, uint64_t seed) override;

 private:
  // Part `part` (0 q, 1 k, 2 v) of a [3, B, H, T, D] heads tensor, as [B*H, T, D].
  Tensor part(const Tensor& heads, int64_t part) const;

  int64_t embd_, heads_;
  Linear c_attn_, c_proj_;
  Dropout att_drop_, resid_drop_;
  int64_t b_ = 0, t_ = 0;  // the last forward's batch and sequence length
  Tensor x_rows_, qkv_heads_, att_, y_heads_, y_, out_;        // forward
  const Tensor* att_used_ = nullptr;                           // att_, or its dropped-out copy
  Tensor dy_rows_, dy_heads_, datt_, dqkv_heads_, dqkv_, dx_;  // backward
};

}  // namespace mddp::nn
