// Keeps the control plane's listener alive under a connection flood.
// gRPC 1.51 (Debian 12's) stops listening for good the first time accept4()
// fails with EMFILE, so the coordinator must never run out of descriptors.
// Every connection the server accepts passes a gate first (a gRPC socket
// mutator: it sees each accepted socket on the accepting thread, before the
// next accept4()):
//  * at most max_per_peer open connections from one address: one more is
//    cut at once (shutdown(): the server then closes it itself), so one
//    local process cannot take every descriptor;
//  * when fewer than `reserve` descriptors are left, the new connection and
//    those still queued on the listener are cut, so the next accept4() finds
//    an empty queue instead of failing (a worker cut this way reconnects);
//  * the listener's queue holds at most `backlog` connections: gRPC accepts
//    a queue in one go, and every connection it accepts holds a descriptor
//    until the server closes it, so a burst of them is bounded (the kernel
//    drops the rest of a burst's SYNs; their senders try again).
// Connections that never speak gRPC are closed after the handshake timeout,
// and those without calls after the idle timeout (set with the gate), so the
// descriptors come back without anyone's help.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace grpc {
class ServerBuilder;
}

namespace mddp::coordinator {

struct ConnectionLimits {
  int max_descriptors = 1024;  // the soft RLIMIT_NOFILE
  int reserve = 64;            // kept free for the process's own files and the dashboard
  int max_per_peer = 240;      // open connections from one address
  int backlog = 128;           // the listener's queue
  std::chrono::milliseconds handshake_timeout{10'000};  // to speak HTTP/2 (and TLS)
  std::chrono::milliseconds idle_timeout{60'000};       // without a call
};

// Raises the soft open-file limit to the hard one (and logs it); the limits
// that follow from it: a quarter of the usable descriptors per address.
ConnectionLimits raise_connection_limits();

class ConnectionGate {
 public:
  explicit ConnectionGate(ConnectionLimits limits) : limits_(limits) {}
  // Called by gRPC (through the mutator) with each socket it makes.
  void add_listener(int fd);
  void admit(int fd);
  // Bounds the listeners' queues to limits.backlog (after the server
  // started: gRPC's own listen() asks for the system's maximum).
  void bound_backlog();
  // Whether the server's connection from `peer` (gRPC's ServerContext::peer(),
  // "ipv4:127.0.0.1:43210") is closed: the gate admitted it and it is gone
  // or its other end hung up. False when the gate cannot tell.
  bool closed(const std::string& peer);

 private:
  struct Admitted {
    ino_t inode;
    std::string address;  // the peer's IP address
    int port;
  };
  using Peer = std::pair<std::string, int>;  // address, port
  int open_from(const std::string& address);
  // Erases an admitted connection found closed, remembering its peer.
  std::map<int, Admitted>::iterator forget(std::map<int, Admitted>::iterator it);
  int drain_listeners() const;
  void turn_away(int fd, const std::string& address, const std::string& why);

  const ConnectionLimits limits_;
  std::mutex mu_;
  std::vector<std::pair<int, ino_t>> listeners_;
  std::map<int, Admitted> admitted_;  // by descriptor; stale once the inode differs
  std::set<Peer> closed_;             // peers of connections found closed (the last kRemembered)
  std::deque<Peer> closed_order_;
  uint64_t turned_away_ = 0;
  std::chrono::steady_clock::time_point last_warning_{};
};

// Installs a gate and the timeouts of `limits` on the server to build; the
// gate lives as long as the server or the caller needs it.
std::shared_ptr<ConnectionGate> guard_connections(grpc::ServerBuilder& builder,
                                                  const ConnectionLimits& limits);

}  // namespace mddp::coordinator
