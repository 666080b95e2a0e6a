// The compute stream of a GPU, for code that must order its own work against
// the tensor ops (the NCCL communicator, GPU step timers) without including
// CUDA headers. Defined only in builds with MDDP_HAVE_CUDA.
//
// Note [One compute stream]: every tensor op on device D, and every copy to
// or from a tensor on D, is queued on D's one compute stream, so ops run in
// the order they were issued with no host waits in between. The stream is
// created with cudaStreamNonBlocking: work on the legacy default stream (a
// plain cudaMemcpy, a kernel launched without a stream) is NOT ordered with
// it. Other streams order against it with events: record an event on the
// compute stream once a gradient is written, make the comm stream wait on it;
// record one on the comm stream after the all-reduce and make the compute
// stream wait on it before the optimizer reads the result. Results reach the
// host only through calls that wait for the stream (Tensor::to_vector, the
// losses, count_correct).
#pragma once

namespace mddp::tensor::cuda {

// D's compute stream as a cudaStream_t cast to void*. Created on first use
// together with D's cuBLAS handle and scratch memory; lives until the process
// exits. Makes D the calling thread's current device. Thread-safe.
void* compute_stream(int device);

// Blocks until everything queued on D's compute stream has finished; throws
// mddp::Error if a kernel failed.
void synchronize(int device);

// How often this process's threads blocked until a GPU finished work (a
// stream or event synchronisation, a value read back, a synchronous copy, a
// collective not yet complete when waited for). A training step's count is
// its budget of host waits (docs/gpu.md); note_host_wait() counts one.
int64_t host_waits();
void note_host_wait();

}  // namespace mddp::tensor::cuda
