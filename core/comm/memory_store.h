// MemoryStore: the Store for ranks that are threads of one process (tests).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "core/comm/store.h"

namespace mddp::comm {

// Thread-safe; share one instance between the rank threads.
class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace mddp::comm
