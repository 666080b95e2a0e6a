// ProcessGroup: the collectives the DDP layer needs, whichever backend runs
// them — the CPU Communicator (communicator.h: TCP or shared memory, the
// algorithms written here) or NCCL on GPUs (nccl/nccl.h). DDP, the trainer
// and the worker hold a ProcessGroup; code that needs the CPU backend's
// extras (algorithm choice, history, point-to-point) holds a Communicator.
//
// Contract shared by both backends: every rank issues the same collectives
// in the same order; buffers stay valid and untouched until the Work
// completes; every wait is bounded by the backend's timeout; the first
// failure ends the group (later calls fail, carrying it); abort() makes every
// pending and later wait fail at once with AbortedError. Where buffers live:
// see each backend (the CPU backend takes host memory; NCCL takes memory of
// its GPU, and host memory for the small host-side collectives DDP issues).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/algo_step.h"
#include "core/comm/types.h"

namespace mddp::comm {

// Handle of one asynchronous collective.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective finished; rethrows its error (CommError) if it failed.
  virtual void wait() = 0;
  virtual bool completed() const = 0;
  // Steady-clock nanoseconds at which the collective started/finished running
  // (0 until then): on the CPU the progress thread's clock; on a GPU the
  // communication stream's events, converted to this host's steady clock.
  virtual int64_t start_ns() const = 0;
  virtual int64_t end_ns() const = 0;
  // When its input was ready where it runs (0: at launch). On a GPU the
  // launch only enqueues: this is when the compute stream reached the point
  // the collective was issued at (the gradients were really computed).
  virtual int64_t ready_ns() const { return 0; }
  // The algorithm's steps on this rank (algo_step.h), once completed: the
  // CPU backend records them; NCCL's are hidden inside NCCL (empty).
  virtual const std::vector<AlgoStep>& steps() const {
    static const std::vector<AlgoStep> kNone;
    return kNone;
  }
};
using WorkPtr = std::shared_ptr<Work>;

// One record of the in-memory history printed with errors (last 32 collectives)
// and reported in heartbeats (the collective a rank entered and finished last).
struct CollectiveRecord {
  uint64_t seq = 0;
  std::string op;  // "all_reduce(ring)", "broadcast", ...
  std::size_t bytes = 0;
  int64_t start_ns = 0, end_ns = 0;  // end_ns == 0: never finished
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "tcp", "shm", "nccl 2.28.9 (cuda:0)": what carries the collectives.
  virtual std::string transport_name() const = 0;

  // In place: data[count] becomes the element-wise reduction over ranks.
  // `bytes` of zeroed memory that peers on this host read in place when it
  // is all-reduced (the shm transport's arena, shared_memory.h), kept alive
  // by the pointer; nullptr where there is none (other transports, an
  // algorithm other than auto, a full arena): use private memory then.
  virtual std::shared_ptr<void> allocate_shared(std::size_t bytes) {
    (void)bytes;
    return nullptr;
  }
  virtual WorkPtr all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op) = 0;
  // in[count * size] on every rank; out[count] = reduction of block `rank`
  // (in[rank*count .. (rank+1)*count)). In place when out == in + rank*count
  // (NCCL's convention); otherwise out must not overlap in. The other
  // blocks of an in-place buffer are left unspecified. ZeRO-1 (--ddp
  // sharded) reduce-scatters gradients with it.
  virtual WorkPtr reduce_scatter(const void* in, void* out, int64_t count, DataType dtype,
                                 ReduceOp op) = 0;
  // in[count] on every rank; out[count * size] holds rank r's block at r*count.
  // In place when in == out + rank*count.
  virtual WorkPtr all_gather(const void* in, void* out, int64_t count, DataType dtype) = 0;
  virtual WorkPtr broadcast(void* data, int64_t count, DataType dtype, int root) = 0;
  virtual WorkPtr barrier() = 0;

  // Fails every pending and future collective with AbortedError(reason) and
  // unblocks every wait at once. Thread-safe (the worker's heartbeat thread
  // calls it), idempotent.
  virtual void abort(const std::string& reason) = 0;

  // The last collectives issued, oldest first. Thread-safe.
  virtual std::vector<CollectiveRecord> history() const = 0;
};

}  // namespace mddp::comm
