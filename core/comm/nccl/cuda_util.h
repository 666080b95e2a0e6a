// CUDA and NCCL calls wrapped once: every failure becomes a CommError (or
// InputError for an unusable device) naming the call, the rank and the GPU.
// Plus the clock that puts CUDA events on the host's steady clock. Private
// to core/comm/nccl (the only code that includes cuda_runtime.h and nccl.h).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <exception>
#include <string>

#include "core/comm/types.h"

namespace mddp::comm::nccl {

// Where a rank's calls run: prefixed to every message ("rank 1 (cuda:1)").
struct Where {
  int rank = 0;
  int device = 0;
  std::string str() const;
};

// CommError "rank R (cuda:D): <call> failed: <CUDA's message>".
std::exception_ptr cuda_error(cudaError_t err, const char* call, const Where& where);
// Throws cuda_error(...) unless err is cudaSuccess.
void check_cuda(cudaError_t err, const char* call, const Where& where);
// The error of an NCCL call or asynchronous failure: PeerError for
// ncclRemoteError (a peer failed), CommError otherwise, with NCCL's last
// error text and a hint.
std::exception_ptr nccl_error(ncclResult_t result, const std::string& call, ncclComm_t comm,
                              const Where& where);

ncclDataType_t to_nccl(DataType t);
ncclRedOp_t to_nccl(ReduceOp op);

// True for memory of a GPU (device or managed memory; `device` gets its
// index), false for host memory, pinned or not.
bool is_device_memory(const void* p, int* device, const Where& where);

// A CUDA event whose completion time on this host's steady clock is known:
// it is recorded on an idle stream and synchronised at once, and the host
// time is the middle of that short interval. Any other event of the same GPU
// converts through it (cudaEventElapsedTime). That gives float milliseconds,
// precise to about 0.1 us within 2 s of the anchor, so the owner takes a
// fresh anchor every kAnchorPeriodNs and converts an event only through an
// anchor recorded before it.
class ClockAnchor {
 public:
  static constexpr int64_t kAnchorPeriodNs = 1'000'000'000;
  ClockAnchor(cudaStream_t idle_stream, const Where& where);
  ~ClockAnchor();
  ClockAnchor(const ClockAnchor&) = delete;
  ClockAnchor& operator=(const ClockAnchor&) = delete;

  int64_t host_ns() const { return host_ns_; }
  // `e` must be complete and recorded after the anchor.
  int64_t to_ns(cudaEvent_t e) const;

 private:
  Where where_;
  cudaEvent_t event_ = nullptr;
  int64_t host_ns_ = 0;
};

}  // namespace mddp::comm::nccl
