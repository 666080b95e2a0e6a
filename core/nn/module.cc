#include "core/nn/module.h"

#include "core/common/check.h"
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

void share_backward_buffers(Module& m, Module& donor) {
  std::vector<Tensor*> mine, theirs;
  m.collect_backward_buffers(mine);
  donor.collect_backward_buffers(theirs);
  MDDP_CHECK(mine.size() == theirs.size(), "sharing backward buffers between ", m.describe(),
             " and ", donor.describe(), ", which differ");
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (theirs[i]->defined()) *mine[i] = *theirs[i];  // the same storage (tensor.h)
}

void Module::zero_grad() {
  for (Parameter* p : parameters()) tensor::fill(p->grad, 0.0f);
}

}  // namespace mddp::nn
