// Status checks for the CUDA runtime and cuBLAS (for .cu files). Every call
// into either goes through one of these macros, which throw mddp::Error
// naming the call, the device and the source line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define MDDP_CUDA_CHECK(call) ::mddp::tensor::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define MDDP_CUBLAS_CHECK(call) \
  ::mddp::tensor::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: a bad launch configuration is reported here; a fault
// while the kernel runs surfaces at the next call that waits for the stream.
#define MDDP_CUDA_CHECK_LAUNCH(kernel) \
  ::mddp::tensor::cuda::check_cuda(cudaGetLastError(), "launch of " kernel, __FILE__, __LINE__)

namespace mddp::tensor::cuda {

void check_cuda(cudaError_t err, const char* call, const char* file, int line);
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace mddp::tensor::cuda
