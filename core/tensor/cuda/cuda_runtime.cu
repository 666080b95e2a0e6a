#include <cuda_runtime.h>

#include <string>

#include "core/common/check.h"
#include "core/tensor/cuda/check.cuh"
#include "core/tensor/cuda/context.cuh"
#include "core/tensor/cuda/cuda_runtime.h"

namespace mddp::tensor::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void* allocate(std::size_t bytes, int device) {
  MDDP_CUDA_CHECK(cudaSetDevice(device));
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw Error(str("out of GPU memory allocating ", bytes, " bytes on cuda:", device,
                    " (use a smaller --batch or model)"));
  }
  MDDP_CUDA_CHECK(err);
  return ptr;
}

// cudaFree waits for the whole device, so no queued kernel can still be
// using the memory when it is released.
void free(void* ptr, int device) noexcept {
  if (cudaSetDevice(device) == cudaSuccess) cudaFree(ptr);
}

void copy(void* dst, const void* src, std::size_t bytes, int device) {
  const Context& ctx = context(device);
  MDDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx.stream));
  MDDP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

}  // namespace mddp::tensor::cuda
