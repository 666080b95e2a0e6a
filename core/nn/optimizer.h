// Optimisers: state allocated once at construction, one fused update per
// parameter per step (core/tensor/ops.h sgd_update / adam_update /
// adamw_update), and gradient clipping by the global norm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/nn/module.h"

namespace mddp::nn {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adam | adamw
  float lr = 0.01f;          // the peak rate; a schedule moves it (lr_schedule.h)
  float momentum = 0.0f;     // sgd
  // sgd, adam: L2 on every parameter; adamw: decoupled, on the parameters decays() picks.
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
  float grad_clip = 0.0f;  // > 0: clip the global gradient norm to this before each step
};

// AdamW's rule for which parameters decay: nanoGPT's, with the embedding
// tables left out too. The weight matrices of Linear and Conv2d layers
// (two or more dimensions) decay; biases and LayerNorm's weights (one
// dimension) and embeddings (Parameter::embedding, the GPT's tied
// token table included) do not.
bool decays(const Parameter& p);

class Optimizer {
 public:
  Optimizer(std::vector<Parameter*> params, float lr) : params_(std::move(params)), lr_(lr) {}
  virtual ~Optimizer() = default;
  virtual void step() = 0;  // applies each parameter's current grad
  int64_t steps() const { return steps_; }
  // The rate of the next step(): a schedule sets it before each (lr_schedule.h).
  void set_lr(float lr) { lr_ = lr; }
  float lr() const { return lr_; }
  // torch.nn.utils.clip_grad_norm_: when the L2 norm of all the gradients
  // step() reads, taken together, exceeds max_norm, scales them by
  // max_norm / (norm + 1e-6). Returns the norm before clipping. Collective
  // for ZeRO-1, whose ranks each hold a shard of the gradient.
  float clip_grad_norm(float max_norm);
  // Named state tensors, views of the optimiser's own buffers (checkpoints
  // read and restore them), under PyTorch's state names:
  // "<param>.momentum_buffer" (SGD with momentum), "<param>.exp_avg" and
  // "<param>.exp_avg_sq" (Adam, AdamW).
  virtual std::vector<std::pair<std::string, Tensor>> state() = 0;
  // Restoring a checkpoint: the steps taken, which drive SGD's first-step
  // momentum and Adam's bias correction.
  void set_steps(int64_t steps) { steps_ = steps; }

 protected:
  // The sum of the squared elements of every gradient step() reads: the
  // squared global norm (the same on every rank).
  virtual float grad_squares();
  virtual void scale_grads(float factor);

  std::vector<Parameter*> params_;
  float lr_;
  int64_t steps_ = 0;
  Tensor squares_;  // grad_squares()'s one-element sum, on the parameters' device
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg,
                                          std::vector<Parameter*> params);

}  // namespace mddp::nn
