// Runs children in order forward and in reverse backward; parameters are
// named "<child index>.<role>" ("0.weight", "0.bias", "2.weight", ...).
#pragma once

#include <memory>
#include <vector>

#include "core/nn/module.h"

namespace mddp::nn {

class Sequential : public Module {
 public:
  void add(std::unique_ptr<Module> m);
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx = true) override;
  std::string describe() const override;
  LayerSpec spec() const override { return {"Sequential", {}}; }
  // Each child's spec, in order: what torch.nn.Sequential(*layers) needs.
  std::vector<LayerSpec> layer_specs() const;
  void collect_parameters(std::vector<Parameter*>& out) override;
  void set_grad_ready_hook(GradReadyHook hook) override;

  std::size_t size() const { return children_.size(); }
  Module& child(std::size_t i) { return *children_.at(i); }

 private:
  std::vector<std::unique_ptr<Module>> children_;
};

}  // namespace mddp::nn
