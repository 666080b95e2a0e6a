// Optimisers: state allocated once at construction, one fused update per
// parameter per step (core/tensor/ops.h sgd_update / adam_update).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/nn/module.h"

namespace mddp::nn {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adam
  float lr = 0.01f;
  float momentum = 0.0f;  // sgd
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;  // applies each parameter's current grad
  int64_t steps() const { return steps_; }
  // Named state tensors, views of the optimiser's own buffers (checkpoints
  // read and restore them), under PyTorch's state names:
  // "<param>.momentum_buffer" (SGD with momentum), "<param>.exp_avg" and
  // "<param>.exp_avg_sq" (Adam).
  virtual std::vector<std::pair<std::string, Tensor>> state() = 0;
  // Restoring a checkpoint: the steps taken, which drive SGD's first-step
  // momentum and Adam's bias correction.
  void set_steps(int64_t steps) { steps_ = steps; }

 protected:
  int64_t steps_ = 0;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg,
                                          std::vector<Parameter*> params);

}  // namespace mddp::nn
