#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/comm/nccl/half_scale.h"

namespace mddp::comm::nccl {
namespace {

constexpr int kThreads = 256;

__global__ void scale_fp16(__half* x, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __float2half_rn(__half2float(x[i]) * factor);
}

__global__ void scale_bf16(__nv_bfloat16* x, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * factor);
}

}  // namespace

void scale_16bit(void* x, int64_t count, bool bf16, float factor, cudaStream_t stream) {
  if (count == 0) return;
  const int64_t blocks64 = (count + kThreads - 1) / kThreads;
  const unsigned blocks =
      static_cast<unsigned>(blocks64 < 4096 ? blocks64 : 4096);  // grid-stride beyond
  if (bf16)
    scale_bf16<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(x), count, factor);
  else
    scale_fp16<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(x), count, factor);
}

}  // namespace mddp::comm::nccl
