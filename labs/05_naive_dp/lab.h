// Lab 5 — naive data parallelism: after backward, all-reduce every gradient
// (docs/naive.md). What you write (my_work/naive_dp.cc): a ddp::GradSync
// (core/ddp/grad_sync.h), the interface the reference strategies satisfy;
// the reference is ddp::make_grad_sync with Mode::kNaive (core/ddp/naive_sync.cc).
#pragma once

#include <memory>
#include <vector>

#include "core/ddp/grad_sync.h"

namespace mddp::labs::impl {

// The strategy for `params` (registration order) over `group`.
std::unique_ptr<ddp::GradSync> make_naive_sync(std::vector<nn::Parameter*> params,
                                               comm::ProcessGroup& group);

}  // namespace mddp::labs::impl
