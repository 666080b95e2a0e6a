#include <cuda_runtime.h>

#include <string>

#include "core/common/check.h"
#include "core/tensor/cuda/cuda_runtime.h"

namespace mddp::tensor::cuda {
namespace {

void check(cudaError_t err, const char* what, int device) {
  if (err != cudaSuccess)
    throw Error(std::string(what) + " failed on cuda:" + std::to_string(device) + ": " +
                cudaGetErrorString(err));
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void* allocate(std::size_t bytes, int device) {
  check(cudaSetDevice(device), "cudaSetDevice", device);
  void* ptr = nullptr;
  check(cudaMalloc(&ptr, bytes), "cudaMalloc", device);
  return ptr;
}

void free(void* ptr, int device) noexcept {
  if (cudaSetDevice(device) == cudaSuccess) cudaFree(ptr);
}

void copy(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy", -1);
}

}  // namespace mddp::tensor::cuda
