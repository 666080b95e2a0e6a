// The job's key/value store: what the ranks broadcast through the
// coordinator (the data-plane peer table "comm/addr/<rank>", the NCCL unique
// id). set() overwrites and wakes every get() waiting for the key; get()
// answers at once when the key exists, else waits until its deadline.
// Keys and values are bounded (Limits) so a bad client cannot exhaust memory.
// Waits follow Note [Waits complete exactly once] (outcome.h). Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "coordinator/outcome.h"

namespace mddp::coordinator {

class KvStore {
 public:
  struct Limits {
    std::size_t max_key_bytes = 512;
    std::size_t max_value_bytes = 1 << 20;   // 1 MiB
    std::size_t max_total_bytes = 64 << 20;  // keys + values
    std::size_t max_keys = 1 << 17;          // 131072: 13 per rank at 10,000 ranks
  };
  using GetCallback = std::function<void(Outcome, std::string value)>;

  KvStore() = default;
  explicit KvStore(Limits limits) : limits_(limits) {}

  Outcome set(const std::string& key, std::string value);
  Ticket get(const std::string& key, TimePoint deadline, TimePoint now, GetCallback done);
  void cancel(uint64_t id);
  void expire(TimePoint now);
  void abort(const std::string& why);

  std::optional<std::string> peek(const std::string& key) const;
  std::size_t size() const;

 private:
  struct Waiter {
    std::string key;
    TimePoint deadline, since;
    GetCallback done;
  };
  Outcome check_key(const std::string& key) const;

  const Limits limits_{};
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::string> values_;
  std::size_t total_bytes_ = 0;
  std::map<uint64_t, Waiter> waiters_;
  std::optional<std::string> aborted_;
};

}  // namespace mddp::coordinator
