// The open connections (HTTP and WebSocket) of the server, by client
// address, so that no one client can take the page away from the others:
//  * at most kMax open in all, and kMaxPerAddress from one address (half:
//    the other half stays free for other clients);
//  * a new connection that would pass either limit is not refused while an
//    idle one can go: the one idle longest (waiting for a request, or still
//    sending its header; of that address, or else of the address holding
//    the most) is closed to make room; failing that, the oldest WebSocket
//    stream of the same (the page reconnects its stream). A connection in
//    the middle of answering a request is never closed: it ends by itself.
//  * Sessions close idle connections after ServerOptions::idle_timeout
//    without a complete request header (5 s), far sooner than a busy one's
//    30 s to take its answer (http_session.h).
// io thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace mddp::dashboard {

class Connections {
 public:
  static constexpr std::size_t kMax = 256;
  static constexpr std::size_t kMaxPerAddress = kMax / 2;

  enum class State {
    kIdle,    // waiting for (the rest of) a request header: may be closed to make room
    kBusy,    // answering a request
    kStream,  // a WebSocket stream: closed to make room only when no connection is idle
  };

  // Makes room for one more connection from `address`, closing (and
  // forgetting) one as above when a limit is reached. False when none could
  // go: the new connection must then be closed.
  bool make_room(const std::string& address);
  // Registers a connection from `address` in `state`; `close` ends it (called
  // to make room and by close_all). Returns the id for set_state and remove.
  uint64_t add(const std::string& address, State state, std::function<void()> close);
  void set_state(uint64_t id, State state);
  void remove(uint64_t id);  // no-op for an id closed to make room
  std::size_t size() const { return entries_.size(); }
  std::size_t from(const std::string& address) const;
  void close_all();

 private:
  struct Entry {
    std::string address;
    State state;
    uint64_t since;  // when it entered `state` (a counter: only the order matters)
    std::function<void()> close;
  };
  // The connection to close to make room among those of `address`
  // (nullptr: any): the one idle longest, else the oldest stream.
  std::optional<uint64_t> victim(const std::string* address) const;
  void evict(uint64_t id);

  uint64_t last_id_ = 0, clock_ = 0;
  std::map<uint64_t, Entry> entries_;
  std::map<std::string, std::size_t> per_address_;
};

}  // namespace mddp::dashboard
