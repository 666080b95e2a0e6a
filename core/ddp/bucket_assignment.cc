#include "core/ddp/bucket_assignment.h"

namespace mddp::ddp {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap_bytes,
                                                     std::size_t cap_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t filled = 0;                               // bytes in buckets.back()
  for (std::size_t k = param_bytes.size(); k-- > 0;) {  // reverse registration order
    const std::size_t cap = buckets.size() == 1 ? first_cap_bytes : cap_bytes;  // of buckets.back()
    if (buckets.empty() || filled + param_bytes[k] > cap) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(k);
    filled += param_bytes[k];
  }
  return buckets;
}

std::size_t flush_in_order(const std::vector<std::size_t>& pending, std::size_t next,
                           const std::function<void(std::size_t bucket)>& launch) {
  for (; next < pending.size() && pending[next] == 0; ++next) launch(next);
  return next;
}

}  // namespace mddp::ddp
