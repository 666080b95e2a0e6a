// A tiny key/value store for rendezvous: ranks publish their data-plane
// address (and, on GPUs, the NCCL unique id) and read each other's. Tests use
// MemoryStore (threads) or FileStore (processes on one host); real runs use
// the coordinator's gRPC store (worker/), so collectives never need a
// coordinator to be tested.
#pragma once

#include <chrono>
#include <string>

namespace mddp::comm {

class Store {
 public:
  virtual ~Store() = default;
  // Publishes `value` under `key` (overwrites). Thread-safe.
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists, then returns its value; throws TimeoutError
  // naming the key after `timeout`.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

}  // namespace mddp::comm
