// Per-device state of the CUDA backend (for .cu files): the compute stream
// (See Note [One compute stream] in context.h), the cuBLAS handle bound to
// it, and a few bytes of device scratch for the ops that return a value.
// Everything is allocated once, when a device is first used, so the steady
// training step allocates nothing.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/tensor/cuda/context.h"

namespace mddp::tensor::cuda {

// What the reducing ops (losses, count_correct) hand back to the host.
struct Scalars {
  double sum;
  // First row whose label is not a class index; kNoBadRow if none.
  unsigned long long first_bad_row;
};
inline constexpr unsigned long long kNoBadRow = ~0ull;  // what memset(0xFF) writes

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  Scalars* scalars = nullptr;       // device memory
  Scalars* host_scalars = nullptr;  // pinned host memory, the readback target
};

// Makes `device` current on the calling thread and returns its context,
// creating it on first use. Ops on one device are issued by one thread at a
// time (they share the scratch); different devices may be used concurrently.
Context& context(int device);

// Marks ctx.scalars' bad-row field "none" (queued on the stream).
void reset_bad_row(const Context& ctx);
// Copies ctx.scalars to the host and waits for the stream: the one point
// where an op returning a value blocks.
Scalars read_scalars(const Context& ctx);

}  // namespace mddp::tensor::cuda
