#include "core/comm/gloo/gloo_store.h"

#include <algorithm>

#include "core/comm/types.h"

namespace mddp::comm::gloo {

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_.set(prefix_ + key, std::string(data.begin(), data.end()));
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  const std::string v = store_.get(prefix_ + key, timeout_);
  return {v.begin(), v.end()};
}

void StoreAdapter::wait(const std::vector<std::string>& keys,
                        const std::chrono::milliseconds& timeout) {
  const Deadline deadline = Clock::now() + timeout;
  for (const auto& key : keys) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    store_.get(prefix_ + key, std::max(left, std::chrono::milliseconds(0)));
  }
}

}  // namespace mddp::comm::gloo
