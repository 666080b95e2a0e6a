#include "core/ddp/manual_average.h"

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::ddp {

void average_replica_gradients(const std::vector<nn::Module*>& replicas) {
  if (replicas.size() < 2) return;
  std::vector<std::vector<nn::Parameter*>> params;
  for (nn::Module* m : replicas) {
    params.push_back(m->parameters());
    MDDP_CHECK(params.back().size() == params[0].size(), "replica ", params.size() - 1,
               " is another model");
  }
  const auto k = static_cast<float>(replicas.size());
  for (std::size_t i = 0; i < params[0].size(); ++i) {
    tensor::Tensor& sum = params[0][i]->grad;  // replica 0 accumulates, then hands out the mean
    for (std::size_t r = 1; r < params.size(); ++r) tensor::axpy(1.0f, params[r][i]->grad, sum);
    tensor::scale(sum, 1.0f / k);
    for (std::size_t r = 1; r < params.size(); ++r) tensor::copy(sum, params[r][i]->grad);
  }
}

}  // namespace mddp::ddp
