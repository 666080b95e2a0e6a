#include "core/ddp/contributions.h"

#include "core/common/check.h"
#include "core/nn/module.h"

namespace mddp::ddp {

bool count_contribution(std::vector<int>& uses_left, std::vector<std::size_t>& pending,
                        std::size_t param, std::size_t bucket) {
  if (--uses_left[param] > 0) return false;  // more of this gradient is still to come
  return --pending[bucket] == 0;
}

std::vector<int> uses_of(const std::vector<nn::Parameter*>& params) {
  std::vector<int> uses;
  for (const nn::Parameter* p : params) {
    MDDP_CHECK(p->uses >= 1, "parameter ", p->name, " is used ", p->uses, " times");
    uses.push_back(p->uses);
  }
  return uses;
}

}  // namespace mddp::ddp
