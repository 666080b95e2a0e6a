// Internal helper for Dataset::get_batch implementations: datasets live on the
// host, the batch tensors may live on any device. On the CPU the samples are
// written straight into the tensor; elsewhere they are staged in a host buffer
// and copied over once per batch.
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
  if (t.device().is_cpu()) {
    fill(std::span<float>(t.data(), static_cast<std::size_t>(numel)));
    return;
  }
  std::vector<float> host(static_cast<std::size_t>(numel));
  fill(std::span<float>(host));
  t.copy_from(host);
}

}  // namespace mddp::data::detail
