#include "core/nn/sequential.h"

#include "core/common/check.h"

namespace mddp::nn {

void Sequential::add(std::unique_ptr<Module> m) {
  std::vector<Parameter*> params;
  m->collect_parameters(params);
  const std::string prefix = std::to_string(children_.size()) + ".";
  for (Parameter* p : params) p->name = prefix + p->name;
  if (hook_) m->set_grad_ready_hook(hook_);
  children_.push_back(std::move(m));
}

const Tensor& Sequential::forward(const Tensor& x) {
  const Tensor* h = &x;
  for (auto& c : children_) h = &c->forward(*h);
  return *h;
}

const Tensor& Sequential::backward(const Tensor& dy, bool need_dx) {
  MDDP_CHECK(!children_.empty(), "empty Sequential");
  const Tensor* g = &dy;
  for (std::size_t i = children_.size(); i-- > 0;)
    g = &children_[i]->backward(*g, i > 0 || need_dx);
  return *g;
}

std::string Sequential::describe() const {
  std::string s;
  for (std::size_t i = 0; i < children_.size(); ++i)
    s += (i ? " -> " : "") + children_[i]->describe();
  return s;
}

std::vector<LayerSpec> Sequential::layer_specs() const {
  std::vector<LayerSpec> out;
  for (const auto& c : children_) out.push_back(c->spec());
  return out;
}

void Sequential::collect_parameters(std::vector<Parameter*>& out) {
  for (auto& c : children_) c->collect_parameters(out);
}

void Sequential::set_grad_ready_hook(GradReadyHook hook) {
  hook_ = hook;
  for (auto& c : children_) c->set_grad_ready_hook(hook);
}

}  // namespace mddp::nn
