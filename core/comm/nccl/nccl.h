// The NCCL backend of ProcessGroup: collectives between GPUs, one rank per
// GPU. How it differs from the CPU Communicator (docs/gpu.md):
//
//  * set-up: rank 0's NCCL unique id goes through the job's Store
//    (unique_id.h), then every rank joins with ncclCommInitRankConfig;
//  * the collectives run on a communication stream of their own, ordered
//    after the compute stream with an event (See Note [Stream ordering] in
//    nccl_communicator.cc), so bucket all-reduces overlap backward on the GPU
//    as they do on the CPU's progress thread;
//  * waits poll the collective's completion event and NCCL's asynchronous
//    error with the timeout; a failure, a timeout or abort() calls
//    ncclCommAbort, so a dead rank never hangs the others;
//  * timings are CUDA events converted to this host's steady clock.
//
// Buffers: memory of the group's GPU; host buffers are staged through the
// GPU (for the small host-side collectives DDP issues: the model check, the
// loss mean), which first waits for the collectives already issued.
//
// ReduceOp::kAvg of fp16/bf16 is a 16-bit sum scaled by 1/n in fp32 (See
// Note [Averaging in 16 bits] in half_scale.h), not NCCL's ncclAvg.
//
// In a build without CUDA, connect_nccl throws InputError saying so.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/store.h"

namespace mddp::comm::nccl {

// Collectives are ordered after the GPU's compute stream
// (Note [One compute stream] in core/tensor/cuda/context.h) — always that one, so no caller can
// order them after another stream, or the legacy default stream, by mistake.
struct NcclOptions {
  int device = 0;                              // this rank's GPU (cuda:device)
  std::chrono::milliseconds timeout{300'000};  // bound on set-up and on every wait
  std::string prefix = "nccl";                 // store key prefix of the unique id
};

// Collective: joins this rank (of `size`) to a new NCCL communicator. Throws
// InputError when the GPU cannot be used (no GPU, no such device, no CUDA in
// this build), TimeoutError when not every rank joined within the timeout.
std::unique_ptr<ProcessGroup> connect_nccl(Store& store, int rank, int size,
                                           const NcclOptions& options);

// Where this process finds NCCL (core/common/shared_library.h's search):
// its version ("2.28.9") and path, or why none loads. Loads it; needs no GPU.
struct NcclFound {
  std::string version, path;
  std::string error;  // non-empty: not found (every place looked), or a build without CUDA
};
NcclFound find_nccl();

// Phases of the compute stream timed with CUDA events — a host clock would
// only time the kernel launches. The NCCL group implements it (it owns the
// clock its collectives' spans are converted with, so both streams land on
// one timeline); a trainer finds it with dynamic_cast. Training thread only.
struct PhaseMark {
  const char* name;  // a string literal
  int64_t ns;        // steady clock: when the stream reached the mark
};
class ComputeTimeline {
 public:
  virtual ~ComputeTimeline() = default;
  // Records an event on the compute stream; `name` must be a string literal.
  virtual void mark(const char* name) = 0;
  // Blocks until every recorded mark was reached; returns them in order and forgets them.
  virtual std::vector<PhaseMark> take_marks() = 0;
};

}  // namespace mddp::comm::nccl
