// Sums: the bias gradient (one block per channel) and the MSE loss (one
// block in all). Each block adds in a fixed order, so results are the same
// on every run (no floating-point atomics).
#include <climits>

#include "core/common/check.h"
#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"

namespace mddp::tensor::cuda {
namespace {

constexpr int kLossThreads = 1024;

// dy viewed as [N, C, inner]; block `ch` sums channel ch over N and inner.
__global__ void bias_grad_kernel(const float* dy, float* dbias, int64_t n, int64_t c,
                                 int64_t inner) {
  const int64_t ch = blockIdx.x;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n * inner; i += blockDim.x)
    s += dy[((i / inner) * c + ch) * inner + i % inner];
  s = block_reduce(s, Sum{});
  if (threadIdx.x == 0) dbias[ch] += s;
}

// One block: the loss is read back at once, so a second pass would only add a launch.
__global__ void mse_kernel(const float* pred, const float* target, int64_t n, Scalars* out) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = pred[i] - target[i];
    s += d * d;
  }
  s = block_reduce(s, Sum{});
  if (threadIdx.x == 0) out->sum = s;
}

// One block: out[0] += the sum of squares, in double (gradient clipping's norm).
__global__ void sum_squares_kernel(const float* x, int64_t n, float* out) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(x[i]) * x[i];
  s = block_reduce(s, Sum{});
  if (threadIdx.x == 0) out[0] += static_cast<float>(s);
}

}  // namespace

void bias_grad(int device, const float* dy, float* dbias, int64_t n, int64_t c, int64_t inner) {
  if (c == 0) return;
  if (c > INT_MAX) throw Error(str("bias_grad: ", c, " channels exceed the CUDA grid"));
  const Context& ctx = context(device);
  bias_grad_kernel<<<static_cast<unsigned>(c), kThreads, 0, ctx.stream>>>(dy, dbias, n, c, inner);
  MDDP_CUDA_CHECK_LAUNCH("bias_grad_kernel");
}

float mse_forward(int device, const float* pred, const float* target, int64_t n) {
  if (n == 0) return 0.0f;
  const Context& ctx = context(device);
  mse_kernel<<<1, kLossThreads, 0, ctx.stream>>>(pred, target, n, ctx.scalars);
  MDDP_CUDA_CHECK_LAUNCH("mse_kernel");
  return static_cast<float>(read_scalars(ctx).sum / static_cast<double>(n));
}

void sum_squares(int device, const float* x, int64_t n, float* out) {
  const Context& ctx = context(device);
  sum_squares_kernel<<<1, kLossThreads, 0, ctx.stream>>>(x, n, out);
  MDDP_CUDA_CHECK_LAUNCH("sum_squares_kernel");
}

}  // namespace mddp::tensor::cuda
