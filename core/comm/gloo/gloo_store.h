// gloo's rendezvous Store over microddp's (the coordinator's key/value
// store, or a MemoryStore/FileStore in tests): gloo's ranks publish their
// addresses through it. Private to the gloo backend.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/comm/store.h"

namespace mddp::comm::gloo {

class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  // Keys are prefixed with `prefix` + "/"; gets and waits are bounded by `timeout`.
  StoreAdapter(comm::Store& store, std::string prefix, std::chrono::milliseconds timeout)
      : store_(store), prefix_(std::move(prefix) + "/"), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  comm::Store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace mddp::comm::gloo
