// Lab 7's reference solution: the rules training uses
// (core/ddp/bucket_assignment.cc).
#include "core/ddp/bucket_assignment.h"
#include "labs/07_bucketing/lab.h"

namespace mddp::labs::impl {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap_bytes,
                                                     std::size_t cap_bytes) {
  return ddp::assign_buckets(param_bytes, first_cap_bytes, cap_bytes);
}

std::size_t flush_in_order(const std::vector<std::size_t>& pending, std::size_t next,
                           const std::function<void(std::size_t bucket)>& launch) {
  return ddp::flush_in_order(pending, next, launch);
}

}  // namespace mddp::labs::impl
