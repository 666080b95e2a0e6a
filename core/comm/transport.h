// A transport moves bytes between this rank and its peers: point-to-point,
// blocking, every call bounded by a deadline. Algorithms (core/comm/
// algorithms/) see only this interface, never sockets or shared memory.
//
// Implementations: transport/tcp (any hosts) and transport/shm (ranks on one
// host). Messages between a pair of ranks arrive in the order they were sent;
// a recv must name the exact byte count of the matching send.
#pragma once

#include <cstddef>
#include <string>

#include "core/comm/types.h"

namespace mddp::comm {

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "tcp" or "shm", for logs and benchmarks

  // Blocks until `bytes` from `data` are handed to the peer (buffer reusable).
  // Throws TimeoutError / PeerError / AbortedError naming the peer.
  virtual void send(int peer, const void* data, std::size_t bytes, Deadline deadline) = 0;
  // Blocks until exactly `bytes` from `peer` are in `data`.
  virtual void recv(int peer, void* data, std::size_t bytes, Deadline deadline) = 0;
  // Sends to one peer while receiving from another (or the same) peer, both
  // in flight at once: the step of every ring, which would deadlock as two
  // blocking calls when both neighbours send large messages.
  virtual void send_recv(int send_peer, const void* send_data, std::size_t send_bytes, int recv_peer,
                         void* recv_data, std::size_t recv_bytes, Deadline deadline) = 0;

  // Thread-safe, callable from any thread: every blocked and future call
  // throws AbortedError carrying `reason`. Idempotent.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace mddp::comm
