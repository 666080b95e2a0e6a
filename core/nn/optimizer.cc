#include "core/nn/optimizer.h"

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::nn {
namespace {

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerConfig& cfg, std::vector<Parameter*> params)
      : cfg_(cfg), params_(std::move(params)) {
    if (cfg_.momentum != 0.0f)
      for (Parameter* p : params_)
        bufs_.push_back(Tensor::zeros(p->value.shape(), p->value.device()));
  }
  void step() override {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      Tensor none;
      tensor::sgd_update(params_[i]->value, params_[i]->grad, bufs_.empty() ? none : bufs_[i],
                         cfg_.lr, cfg_.momentum, cfg_.weight_decay, steps_ == 0);
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
  std::vector<Parameter*> params_;
  std::vector<Tensor> bufs_;
};

class Adam : public Optimizer {
 public:
  Adam(const OptimizerConfig& cfg, std::vector<Parameter*> params)
      : cfg_(cfg), params_(std::move(params)) {
    for (Parameter* p : params_) {
      m_.push_back(Tensor::zeros(p->value.shape(), p->value.device()));
      v_.push_back(Tensor::zeros(p->value.shape(), p->value.device()));
    }
  }
  void step() override {
    ++steps_;
    for (std::size_t i = 0; i < params_.size(); ++i)
      tensor::adam_update(params_[i]->value, params_[i]->grad, m_[i], v_[i], cfg_.lr, cfg_.beta1,
                          cfg_.beta2, cfg_.eps, cfg_.weight_decay, steps_);
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
  std::vector<Parameter*> params_;
  std::vector<Tensor> m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg,
                                          std::vector<Parameter*> params) {
  if (cfg.lr <= 0.0f) throw InputError(str("--lr must be positive, got ", cfg.lr));
  if (cfg.name == "sgd") {
    if (cfg.momentum < 0.0f || cfg.momentum >= 1.0f)
      throw InputError(str("--momentum must be in [0, 1), got ", cfg.momentum));
    return std::make_unique<Sgd>(cfg, std::move(params));
  }
  if (cfg.name == "adam") return std::make_unique<Adam>(cfg, std::move(params));
  throw InputError("unknown optimizer '" + cfg.name + "' (use sgd or adam)");
}

}  // namespace mddp::nn
