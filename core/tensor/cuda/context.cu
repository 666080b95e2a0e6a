#include <array>
#include <atomic>
#include <mutex>

#include "core/common/check.h"
#include "core/tensor/cuda/check.cuh"
#include "core/tensor/cuda/context.cuh"
#include "core/tensor/cuda/cublas.cuh"
#include "core/tensor/cuda_status.h"

namespace mddp::tensor::cuda {
namespace {

constexpr int kMaxDevices = 64;
// cuBLAS's recommended workspace on Hopper (4 MiB suffices before it). Given
// explicitly so cuBLAS never allocates one lazily in the middle of a step.
constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;

Context* create(int device) {
  auto* ctx = new Context;
  ctx->device = device;
  MDDP_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
  const Cublas& blas = cublas();
  MDDP_CUBLAS_CHECK(blas.create(&ctx->blas));
  // Order matters: cublasSetStream resets the workspace to cuBLAS's own pool.
  MDDP_CUBLAS_CHECK(blas.set_stream(ctx->blas, ctx->stream));
  void* workspace = nullptr;
  MDDP_CUDA_CHECK(cudaMalloc(&workspace, kBlasWorkspaceBytes));
  MDDP_CUBLAS_CHECK(blas.set_workspace(ctx->blas, workspace, kBlasWorkspaceBytes));
  // Plain FP32 products (no TF32 tensor-core rounding), so the GPU matches
  // the CPU within float rounding and the tests can compare the two.
  MDDP_CUBLAS_CHECK(blas.set_math_mode(ctx->blas, CUBLAS_DEFAULT_MATH));
  MDDP_CUDA_CHECK(cudaMalloc(&ctx->scalars, sizeof(Scalars)));
  MDDP_CUDA_CHECK(cudaMallocHost(&ctx->host_scalars, sizeof(Scalars)));
  return ctx;
}

}  // namespace

// Contexts are never destroyed: at exit the CUDA runtime may already be torn
// down, and destroying a stream or handle then fails. The driver frees all.
Context& context(int device) {
  static std::array<std::atomic<Context*>, kMaxDevices> contexts{};
  static std::mutex create_mutex;
  if (device < 0 || device >= kMaxDevices)
    throw Error(str("cuda:", device, " is not a device index"));
  note_cuda_started();
  MDDP_CUDA_CHECK(cudaSetDevice(device));
  Context* ctx = contexts[device].load(std::memory_order_acquire);
  if (ctx) return *ctx;
  std::lock_guard<std::mutex> lock(create_mutex);
  ctx = contexts[device].load(std::memory_order_relaxed);
  if (!ctx) {
    ctx = create(device);
    contexts[device].store(ctx, std::memory_order_release);
  }
  return *ctx;
}

void reset_bad_row(const Context& ctx) {
  MDDP_CUDA_CHECK(
      cudaMemsetAsync(&ctx.scalars->first_bad_row, 0xFF, sizeof(unsigned long long), ctx.stream));
}

Scalars read_scalars(const Context& ctx) {
  MDDP_CUDA_CHECK(cudaMemcpyAsync(ctx.host_scalars, ctx.scalars, sizeof(Scalars),
                                  cudaMemcpyDeviceToHost, ctx.stream));
  note_host_wait();
  MDDP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return *ctx.host_scalars;
}

void* compute_stream(int device) {
  return context(device).stream;
}

void synchronize(int device) {
  note_host_wait();
  MDDP_CUDA_CHECK(cudaStreamSynchronize(context(device).stream));
}

namespace {
std::atomic<int64_t> g_host_waits{0};
}  // namespace

int64_t host_waits() {
  return g_host_waits.load(std::memory_order_relaxed);
}
void note_host_wait() {
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace mddp::tensor::cuda
