// Thin wrappers over the CUDA runtime that the rest of core uses without
// including CUDA headers. Compiled only when MDDP_HAVE_CUDA; every call
// checks its status and throws mddp::Error naming the call and the device.
#pragma once

#include <cstddef>

namespace mddp::tensor::cuda {

int device_count();                    // 0 when no driver/GPU is present (never throws)
void* allocate(std::size_t bytes, int device);
void free(void* ptr, int device) noexcept;
// Copies `bytes` between host and `device` (or within it), queued on the
// device's compute stream after every op issued so far, and waits for it.
void copy(void* dst, const void* src, std::size_t bytes, int device);

}  // namespace mddp::tensor::cuda
