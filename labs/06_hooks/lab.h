// Lab 6 — hooks: launch each parameter's all-reduce from its grad-ready hook
// (docs/hooks.md). What you write (my_work/hooks.cc): a ddp::GradSync
// (core/ddp/grad_sync.h); the reference is ddp::make_grad_sync with
// Mode::kHooked (core/ddp/hooked_sync.cc).
#pragma once

#include <memory>
#include <vector>

#include "core/ddp/grad_sync.h"

namespace mddp::labs::impl {

// The strategy for `params` (registration order) over `group`.
std::unique_ptr<ddp::GradSync> make_hooked_sync(std::vector<nn::Parameter*> params,
                                                comm::ProcessGroup& group);

}  // namespace mddp::labs::impl
