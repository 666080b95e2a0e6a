// Lab 6's reference solution: core's HookedSync (core/ddp/hooked_sync.cc).
#include "labs/06_hooks/lab.h"

namespace mddp::labs::impl {

std::unique_ptr<ddp::GradSync> make_hooked_sync(std::vector<nn::Parameter*> params,
                                                comm::ProcessGroup& group) {
  return ddp::make_grad_sync({.mode = ddp::Mode::kHooked}, std::move(params), group);
}

}  // namespace mddp::labs::impl
