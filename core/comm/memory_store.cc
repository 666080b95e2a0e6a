#include "core/comm/memory_store.h"

#include "core/comm/types.h"

namespace mddp::comm {

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mu_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::string MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  auto it = values_.end();
  bool found = changed_.wait_for(lock, timeout, [&] {
    it = values_.find(key);
    return it != values_.end();
  });
  if (!found)
    throw TimeoutError(str("store: key '", key, "' was not set within ", timeout.count(),
                           " ms (a rank that should publish it is missing or late)"));
  return it->second;
}

}  // namespace mddp::comm
