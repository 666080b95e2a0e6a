// Which parameters share a bucket — a pure function, tested on its own.
//
// Note [Bucket order]: gradients become ready in reverse order of
// registration (the last layer first; Note [Grad-ready hooks] in
// core/nn/module.h), so buckets are filled in that order: bucket 0 holds the
// last parameters and is the first to be ready. The first bucket is kept
// small (default 1 MB) so communication starts as early as possible; the
// others fill up to the cap (default 25 MB), like PyTorch's Reducer. Every
// rank computes the same assignment from the same sizes, and buckets are
// launched strictly in index order, so all ranks issue the same sequence of
// collectives.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "core/ddp/contributions.h"

namespace mddp::ddp {

// `param_bytes[i]` is the gradient size of parameter i (registration order).
// Returns buckets, each a list of parameter indices in the order their
// gradients become ready. A bucket is closed when adding the next parameter
// would exceed its cap (first bucket: first_cap_bytes, others: cap_bytes); a
// parameter larger than the cap gets a bucket of its own. Every parameter is
// in exactly one bucket.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap_bytes,
                                                     std::size_t cap_bytes);

// The flush rule (Note [Bucket order]): buckets [0, next) are launched, and
// pending[b] counts the gradients bucket b still waits for. Calls launch(b)
// for every bucket that may go now — strictly in index order, so a complete
// bucket waits while an earlier one is not — and returns the new `next`.
std::size_t flush_in_order(const std::vector<std::size_t>& pending, std::size_t next,
                           const std::function<void(std::size_t bucket)>& launch);

// The rules of bucketed DDP as functions the Reducer is given: training
// uses these; the course's Labs 7 and 11 (labs/) run the Reducer with a
// student's (count: Note [Contributions] in contributions.h).
struct BucketRules {
  decltype(&assign_buckets) assign = assign_buckets;
  decltype(&flush_in_order) flush = flush_in_order;
  decltype(&count_contribution) count = count_contribution;
};

}  // namespace mddp::ddp
