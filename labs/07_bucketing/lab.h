// Lab 7 — bucketing: which parameters share a bucket, and when a bucket may
// be launched (docs/bucketing.md). What you write (my_work/bucketing.cc):
// the two rules of ddp::BucketRules (core/ddp/bucket_assignment.h), with the
// signatures of the references ddp::assign_buckets and ddp::flush_in_order
// (core/ddp/bucket_assignment.cc). The checker runs the real Reducer
// (core/ddp/reducer.cc) with your rules.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace mddp::labs::impl {

// param_bytes[i] is parameter i's gradient size (registration order).
// Buckets in the order gradients become ready (reverse registration order),
// each a list of parameter indices in that order; bucket 0 is capped at
// first_cap_bytes, the others at cap_bytes; a parameter larger than the cap
// gets a bucket of its own.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap_bytes,
                                                     std::size_t cap_bytes);

// Buckets [0, next) are launched; pending[b] counts the gradients bucket b
// still waits for. Call launch(b) for every bucket that may go now, and
// return the new next.
std::size_t flush_in_order(const std::vector<std::size_t>& pending, std::size_t next,
                           const std::function<void(std::size_t bucket)>& launch);

}  // namespace mddp::labs::impl
