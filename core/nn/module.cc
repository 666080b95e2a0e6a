#include "core/nn/module.h"

#include "core/tensor/ops.h"

namespace mddp::nn {

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  collect_parameters(out);
  return out;
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (Parameter* p : parameters()) n += p->value.numel();
  return n;
}

void add_prefix(Module& m, const std::string& prefix) {
  for (Parameter* p : m.parameters()) p->name = prefix + p->name;
}

void Module::zero_grad() {
  for (Parameter* p : parameters()) tensor::fill(p->grad, 0.0f);
}

}  // namespace mddp::nn
