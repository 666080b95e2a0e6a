// Lab 7 — bucketing: assign parameters to buckets, launch buckets in order.
// Read labs/07_bucketing/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check bucketing
#include "labs/07_bucketing/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap_bytes,
                                                     std::size_t cap_bytes) {
  // EXERCISE: walk the parameters from the last (index size-1) to the first,
  // the order their gradients become ready. Append each to the current
  // bucket, opening a new one when there is none yet or when this parameter
  // would take the current bucket past its cap (bucket 0: first_cap_bytes,
  // the others: cap_bytes).
  MDDP_LAB_TODO("assign_buckets");
}

std::size_t flush_in_order(const std::vector<std::size_t>& pending, std::size_t next,
                           const std::function<void(std::size_t bucket)>& launch) {
  // EXERCISE: every rank must launch the same buckets in the same order, so a
  // bucket may go only once every bucket before it went. Launch bucket
  // `next`, then the one after it, ... while they are complete (pending 0),
  // and return the index of the first one you did not launch.
  MDDP_LAB_TODO("flush_in_order");
}

}  // namespace mddp::labs::impl
