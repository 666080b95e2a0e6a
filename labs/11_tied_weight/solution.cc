// Lab 11's reference solution: the rule training uses
// (core/ddp/contributions.cc).
#include "core/ddp/contributions.h"
#include "labs/11_tied_weight/lab.h"

namespace mddp::labs::impl {

bool count_contribution(std::vector<int>& uses_left, std::vector<std::size_t>& pending,
                        std::size_t param, std::size_t bucket) {
  return ddp::count_contribution(uses_left, pending, param, bucket);
}

}  // namespace mddp::labs::impl
