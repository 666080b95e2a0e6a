// HostSharedMemory: what ranks on one host can do besides passing messages,
// read one another's memory. A transport that has it (shm) returns it from
// Transport::shared_memory(); the direct all-reduce
// (algorithms/direct_all_reduce.cc) runs on it, and DDP allocates its
// buckets from it so that a peer reduces straight out of them.
//
// The words: each rank owns an *arena*, memory its peers have mapped too.
// For the direct collective number `seq` (the same on every rank: every rank
// issues the same collectives in the same order), a rank *posts* its buffer
// (where in its arena it lies, or that it lies elsewhere); peers wait for
// the post before they touch the buffer, and each signals when it is
// *finished* with the others' buffers; a rank lets its caller write its
// buffer again only once every peer finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/comm/types.h"

namespace mddp::comm {

class HostSharedMemory {
 public:
  virtual ~HostSharedMemory() = default;

  // `bytes` of zeroed memory in this rank's arena, page-aligned; the pointer
  // keeps it mapped (past the transport's life if need be). nullptr when the
  // arena or /dev/shm has no room left: the caller then uses private memory,
  // which is as correct and only slower. Thread-safe. Never freed: for
  // buffers that live as long as the job (DDP's buckets).
  virtual std::shared_ptr<void> allocate(std::size_t bytes) = 0;

  // Whether data[0, bytes) lies in this rank's arena.
  virtual bool holds(const void* data, std::size_t bytes) const = 0;

  struct Post {
    uint64_t seq;  // this collective's number
    bool shared;   // data[0, bytes) lies in this rank's arena
  };
  // Publishes this rank's buffer for the next direct collective. Cheap and
  // never waits, so a rank whose buffer is private posts and moves on.
  virtual Post post(const void* data, std::size_t bytes) = 0;
  // Waits until `peer` posted collective `seq`; returns its buffer as mapped
  // here (read and written as the collective's protocol allows), or nullptr
  // when it is not in the peer's arena. PeerError when the peer posted
  // another byte count (the ranks run different collectives).
  virtual std::byte* posted(int peer, uint64_t seq, std::size_t bytes, Deadline deadline) = 0;

  // Tells every peer this rank is finished with their buffers in collective `seq`.
  virtual void finish(uint64_t seq) = 0;
  // Waits until `peer` finished collective `seq` (or a later one). Throws
  // TimeoutError, AbortedError or PeerError (the peer closed its transport
  // or died) naming the peer.
  virtual void wait_finished(int peer, uint64_t seq, Deadline deadline) = 0;
};

}  // namespace mddp::comm
