#include "core/common/check.h"
#include "core/tensor/cuda/check.cuh"
#include "core/tensor/cuda/cublas.cuh"

namespace mddp::tensor::cuda {
namespace {

[[noreturn]] void fail(const char* call, const char* what, const char* file, int line) {
  int device = -1;
  cudaGetDevice(&device);  // best effort: only for the message
  throw Error(
      str(call, " failed on cuda:", device, ": ", what, " (", file, ":", line,
          "; CUDA_LAUNCH_BLOCKING=1 makes kernel faults surface at the kernel that caused them)"));
}

}  // namespace

void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) fail(call, cudaGetErrorString(err), file, line);
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) fail(call, cublas().status_string(status), file, line);
}

}  // namespace mddp::tensor::cuda
