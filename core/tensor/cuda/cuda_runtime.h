// Thin wrappers over the CUDA runtime that the rest of core uses without
// including CUDA headers. Compiled only when MDDP_HAVE_CUDA; every call
// checks its status and throws mddp::Error naming the call and the device.
// Every one starts CUDA in this process (Note [CUDA and fork] in
// core/tensor/cuda_status.h) and records that it did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tensor/cuda_status.h"

namespace mddp::tensor::cuda {

// cudaGetDeviceCount, classified (never throws): `devices` on kOk, else
// CUDA's error text in `error`; the driver's and this build's CUDA versions.
CudaStart query_devices(int* devices, std::string* error, int* driver_version,
                        int* runtime_version);
// The driver's newest supported CUDA and this build's (1000 * major + 10 * minor; 0 unknown).
void versions(int* driver_version, int* runtime_version);
// cudaGetDeviceProperties' name, memory and compute capability of `device`.
void describe_device(int device, std::string* name, int64_t* memory_bytes, int* major, int* minor);
// Allocation and copies keep the calling thread's current device as it was.
void* allocate(std::size_t bytes, int device);
void free(void* ptr, int device) noexcept;
// Copies `bytes` between host and `device` (or within it), queued on the
// device's compute stream after every op issued so far, and waits for it.
void copy(void* dst, const void* src, std::size_t bytes, int device);

// Host-to-device copies without a host wait (a training batch each step):
// pinned host memory the copy reads from, and an event marking when the
// last copy out of it has run, so the memory is reused only after that.
struct Upload;
Upload* upload_create(std::size_t bytes, int device);
void upload_destroy(Upload* upload, int device) noexcept;
// The pinned memory to write the next values into; blocks (a counted host
// wait) only if the previous copy out of it has not run yet.
void* upload_buffer(Upload* upload);
// Queues the copy of the first `bytes` of the pinned memory to `dst` on the
// device's compute stream, after every op issued so far; returns at once.
void upload_queue(Upload* upload, void* dst, std::size_t bytes, int device);

}  // namespace mddp::tensor::cuda
