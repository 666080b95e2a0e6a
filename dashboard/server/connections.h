// The open connections (HTTP and WebSocket) of the server: counted, so the
// listener can refuse the 257th, and closable all at once at shutdown.
// io thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

namespace mddp::dashboard {

class Connections {
 public:
  static constexpr std::size_t kMax = 256;

  // Registers a connection; `close` ends it (called by close_all). Returns
  // the id to remove() it with when it is gone.
  uint64_t add(std::function<void()> close) {
    closers_.emplace(++last_id_, std::move(close));
    return last_id_;
  }
  void remove(uint64_t id) { closers_.erase(id); }
  std::size_t size() const { return closers_.size(); }
  bool full() const { return closers_.size() >= kMax; }
  void close_all() {
    auto closers = closers_;  // a closer may remove itself
    for (auto& [id, close] : closers) close();
  }

 private:
  uint64_t last_id_ = 0;
  std::map<uint64_t, std::function<void()>> closers_;
};

}  // namespace mddp::dashboard
