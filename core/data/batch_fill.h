// Internal helper for Dataset::get_batch implementations: datasets live on the
// host, the batch tensors may live on any device. On the CPU the samples are
// written straight into the tensor; on a GPU into pinned host memory whose
// copy is queued without a host wait (Tensor::fill_from_host).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/common/check.h"
#include "core/tensor/tensor.h"

namespace mddp::data::detail {

// Checks that `t` holds exactly `numel` elements (its shape is the caller's
// business: [B, ...] for x, [B] or [B, D] for y), then calls fill(span) with a
// host buffer of that size and makes sure the values end up in `t`.
template <typename Fill>
void fill_host(tensor::Tensor& t, int64_t numel, const char* what, Fill&& fill) {
  MDDP_CHECK(t.defined(), "get_batch: ", what, " must be preallocated");
  MDDP_CHECK_EQ(t.numel(), numel, "get_batch: ", what, " has shape ", tensor::shape_str(t.shape()));
  t.fill_from_host(fill);
}

}  // namespace mddp::data::detail
