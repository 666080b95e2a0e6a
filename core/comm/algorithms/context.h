// What every algorithm sees: this rank's place in the world, its transport,
// the deadline of the collective it is running and reusable scratch memory.
// Algorithms never see sockets, threads or the Communicator's queue.
//
// Words used by every algorithm file:
//   n       world size;  r  this rank;  S  the message size in bytes.
//   block   the part of a buffer that belongs to one rank: a balanced split of
//           `count` elements into n blocks (sizes differ by at most one; some
//           are empty when count < n). See Blocks.
//   segment a slice of a block moved by one transport call, at most
//           kSegmentBytes; algorithms that pipeline work segment by segment.
//   vrank   rank relative to a tree's root: (r - root) mod n, so the root is 0.
//   alpha   the fixed cost of one message (latency); beta the bandwidth, so
//           moving one message of S bytes costs alpha + S/beta.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/comm/algo_step.h"
#include "core/comm/transport.h"
#include "core/comm/types.h"

namespace mddp::comm {

// Grow-only buffers owned by the Communicator and reused by every collective,
// so the steady state allocates nothing. Only the progress thread uses them.
class Scratch {
 public:
  enum Slot { kRecv, kAccum, kNumSlots };
  // A buffer of at least `bytes`, valid until the next call for the same slot.
  void* get(Slot slot, std::size_t bytes);
  float* floats(Slot slot, std::size_t count) { return static_cast<float*>(get(slot, count * 4)); }

 private:
  std::unique_ptr<std::byte[]> buffers_[kNumSlots];
  std::size_t capacity_[kNumSlots] = {};
};

// Largest slice of a block moved by one transport call in the ring
// (ring_reduce_scatter.cc): big enough that alpha is small against S/beta,
// and one scratch buffer of this size is all the ring allocates. A rough,
// noisy sweep (bench allreduce, 2 ranks, 4-64 MiB, this 2-core host) found
// 64 KiB clearly slower on tcp and 1 MiB about 20% ahead of 256 KiB on shm,
// equal on tcp; re-measure before tuning further.
inline constexpr std::size_t kSegmentBytes = 1024 * 1024;

// Balanced split of `count` elements into `parts` blocks:
// block b starts at b*(count/parts) + min(b, count%parts).
struct Blocks {
  int64_t count;
  int parts;
  int64_t begin(int b) const {
    const int64_t q = count / parts, rem = count % parts;
    return b * q + (b < rem ? b : rem);
  }
  int64_t size(int b) const { return count / parts + (b < count % parts ? 1 : 0); }
};

struct AlgoContext {
  Transport& transport;
  int rank;
  int size;
  Deadline deadline;  // of the whole collective
  Scratch& scratch;
  StepTrace* trace = nullptr;  // receives every step (AlgoStep) when set

  // Step tracing: `t0 = step_clock()` before a step's transfers, then
  // `traced(step, t0, data)` after it (partial results included); both
  // are free without a trace.
  int64_t step_clock() const;
  void traced(AlgoStep step, int64_t t0, const void* data) const;

  // The neighbour helpers: the one place that says which way a ring turns.
  // Data flows to the right (r+1) and arrives from the left (r-1).
  int left() const { return (rank + size - 1) % size; }
  int right() const { return (rank + 1) % size; }
  // (r + k) mod n for any k, including negative ones.
  int peer(int k) const { return ((rank + k) % size + size) % size; }
  // Trees: vrank of this rank for `root`, and the real rank of a vrank.
  int vrank(int root) const { return (rank - root + size) % size; }
  int real(int vrank, int root) const { return (vrank + root) % size; }

  // Sends to one peer while receiving from another, both in flight at once;
  // an empty side is skipped (both ends compute the same sizes), so callers
  // need not special-case empty blocks.
  void exchange(int send_peer, const void* send_data, std::size_t send_bytes, int recv_peer,
                void* recv_data, std::size_t recv_bytes) const;
  void send(int peer, const void* data, std::size_t bytes) const;
  void recv(int peer, void* data, std::size_t bytes) const;
};

// Pointer to element `index` of a typed buffer.
inline std::byte* at(void* base, int64_t index, DataType t) {
  return static_cast<std::byte*>(base) + static_cast<std::size_t>(index) * element_size(t);
}
inline const std::byte* at(const void* base, int64_t index, DataType t) {
  return static_cast<const std::byte*>(base) + static_cast<std::size_t>(index) * element_size(t);
}
inline std::size_t bytes_of(int64_t count, DataType t) {
  return static_cast<std::size_t>(count) * element_size(t);
}

}  // namespace mddp::comm
