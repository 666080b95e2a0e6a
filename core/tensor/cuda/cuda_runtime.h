// Thin wrappers over the CUDA runtime that the rest of core uses without
// including CUDA headers. Compiled only when MDDP_HAVE_CUDA; every call
// checks its status and throws mddp::Error naming the call and the device.
#pragma once

#include <cstddef>

namespace mddp::tensor::cuda {

int device_count();                    // 0 when no driver/GPU is present (never throws)
void* allocate(std::size_t bytes, int device);
void free(void* ptr, int device) noexcept;
// Blocking copies between host and device memory (kind inferred by the runtime).
void copy(void* dst, const void* src, std::size_t bytes);

}  // namespace mddp::tensor::cuda
