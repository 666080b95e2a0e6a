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

#include "core/comm/shared_memory.h"
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
  void send(int peer, const void* data, std::size_t bytes, Deadline deadline) {
    send_recv(peer, data, bytes, kNoPeer, nullptr, 0, deadline);
  }
  // Blocks until exactly `bytes` from `peer` are in `data`.
  void recv(int peer, void* data, std::size_t bytes, Deadline deadline) {
    send_recv(kNoPeer, nullptr, 0, peer, data, bytes, deadline);
  }
  // Sends to one peer while receiving from another (or the same) peer, both
  // in flight at once: the step of every ring, which would deadlock as two
  // blocking calls when both neighbours send large messages. A peer of
  // kNoPeer leaves that side out: send() and recv() are this call, one-sided.
  virtual void send_recv(int send_peer, const void* send_data, std::size_t send_bytes,
                         int recv_peer, void* recv_data, std::size_t recv_bytes,
                         Deadline deadline) = 0;
  static constexpr int kNoPeer = -1;

  // Thread-safe, callable from any thread: every blocked and future call
  // throws AbortedError carrying `reason`. Idempotent.
  virtual void abort(const std::string& reason) = 0;

  // Memory the ranks can read in one another (shared_memory.h), or nullptr:
  // only ranks on one host have it (the shm transport).
  virtual HostSharedMemory* shared_memory() { return nullptr; }

  // Caps what this rank sends to `peer` at `bytes_per_second`, as a slow
  // link would: the slow-link Lab's fault (core/train/lab_fault.h). Only a
  // transport whose bytes cross a link can: the others throw InputError.
  virtual void limit_send_rate(int peer, double bytes_per_second) {
    (void)bytes_per_second;
    throw InputError(str("the ", name(), " transport cannot slow the link to rank ", peer,
                         ": use --transport tcp"));
  }

 protected:
  // The checks every implementation makes on each side of a send_recv():
  // `peer` is another rank of this world, and a non-empty message has a buffer.
  void check_message(int peer, const void* data, std::size_t bytes) const {
    MDDP_CHECK(peer >= 0 && peer < size() && peer != rank(), "rank ", rank(),
               " cannot talk to rank ", peer, " (world size ", size(), ")");
    MDDP_CHECK(bytes == 0 || data != nullptr, "null buffer for ", bytes, " bytes");
  }
};

}  // namespace mddp::comm
