#include "core/nn/optimizer.h"

#include <cmath>

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::nn {

bool decays(const Parameter& p) {
  return p.value.ndim() >= 2 && !p.embedding;
}

float Optimizer::grad_squares() {
  if (params_.empty()) return 0.0f;
  tensor::ensure_shape(squares_, {1}, params_.front()->grad.device());
  tensor::fill(squares_, 0.0f);
  for (Parameter* p : params_) tensor::sum_squares(p->grad, squares_);
  return squares_.to_vector()[0];
}

void Optimizer::scale_grads(float factor) {
  for (Parameter* p : params_) tensor::scale(p->grad, factor);
}

float Optimizer::clip_grad_norm(float max_norm) {
  const float norm = std::sqrt(grad_squares());
  if (max_norm > 0.0f && norm > max_norm) scale_grads(max_norm / (norm + 1e-6f));
  return norm;
}

namespace {

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerConfig& cfg, std::vector<Parameter*> params)
      : Optimizer(std::move(params), cfg.lr), cfg_(cfg) {
    if (cfg_.momentum != 0.0f)
      for (Parameter* p : params_)
        bufs_.push_back(Tensor::zeros(p->value.shape(), p->value.device()));
  }
  void step() override {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      Tensor none;
      tensor::sgd_update(params_[i]->value, params_[i]->grad, bufs_.empty() ? none : bufs_[i], lr_,
                         cfg_.momentum, cfg_.weight_decay, steps_ == 0);
    }
    ++steps_;
  }
  std::vector<std::pair<std::string, Tensor>> state() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (std::size_t i = 0; i < bufs_.size(); ++i)
      out.emplace_back(params_[i]->name + ".momentum_buffer", bufs_[i]);
    return out;
  }

 private:
  OptimizerConfig cfg_;
  std::vector<Tensor> bufs_;
};

// Adam, and AdamW when cfg.name is "adamw" (the same moments; the decay
// shrinks the weights that decays() picks instead of entering the gradient).
class Adam : public Optimizer {
 public:
  Adam(const OptimizerConfig& cfg, std::vector<Parameter*> params)
      : Optimizer(std::move(params), cfg.lr), cfg_(cfg), decoupled_(cfg.name == "adamw") {
    for (Parameter* p : params_) {
      m_.push_back(Tensor::zeros(p->value.shape(), p->value.device()));
      v_.push_back(Tensor::zeros(p->value.shape(), p->value.device()));
    }
  }
  void step() override {
    ++steps_;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      Parameter& p = *params_[i];
      if (decoupled_)
        tensor::adamw_update(p.value, p.grad, m_[i], v_[i], lr_, cfg_.beta1, cfg_.beta2, cfg_.eps,
                             decays(p) ? cfg_.weight_decay : 0.0f, steps_);
      else
        tensor::adam_update(p.value, p.grad, m_[i], v_[i], lr_, cfg_.beta1, cfg_.beta2, cfg_.eps,
                            cfg_.weight_decay, steps_);
    }
  }
  std::vector<std::pair<std::string, Tensor>> state() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      out.emplace_back(params_[i]->name + ".exp_avg", m_[i]);
      out.emplace_back(params_[i]->name + ".exp_avg_sq", v_[i]);
    }
    return out;
  }

 private:
  OptimizerConfig cfg_;
  bool decoupled_;
  std::vector<Tensor> m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg,
                                          std::vector<Parameter*> params) {
  if (cfg.lr <= 0.0f) throw InputError(str("--lr must be positive, got ", cfg.lr));
  if (!(cfg.grad_clip >= 0.0f))
    throw InputError(str("--grad-clip must be >= 0 (0: off), got ", cfg.grad_clip));
  if (cfg.name == "sgd") {
    if (cfg.momentum < 0.0f || cfg.momentum >= 1.0f)
      throw InputError(str("--momentum must be in [0, 1), got ", cfg.momentum));
    return std::make_unique<Sgd>(cfg, std::move(params));
  }
  if (cfg.name == "adam" || cfg.name == "adamw")
    return std::make_unique<Adam>(cfg, std::move(params));
  throw InputError("unknown optimizer '" + cfg.name + "' (use sgd, adam or adamw)");
}

}  // namespace mddp::nn
