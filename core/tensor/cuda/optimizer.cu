// Fused optimizer steps: one pass over each parameter, reading the gradient
// and the state once, as cpu/kernels.cc does (the same formulas, PyTorch's).
#include <cmath>

#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"

namespace mddp::tensor::cuda {
namespace {

struct SgdStep {
  float* p;
  const float* g;
  float* buf;  // null without momentum
  float lr, momentum, weight_decay;
  bool first_step;
  __device__ void operator()(int64_t i) const {
    const float gi = g[i] + weight_decay * p[i];
    if (buf == nullptr) {
      p[i] -= lr * gi;
      return;
    }
    const float b = first_step ? gi : momentum * buf[i] + gi;
    buf[i] = b;
    p[i] -= lr * b;
  }
};

struct AdamStep {
  float *p, *m, *v;
  const float* g;
  float beta1, beta2, eps, weight_decay;
  float step_size, inv_sqrt_bc2;  // lr / (1 - beta1^t), 1 / sqrt(1 - beta2^t)
  __device__ void operator()(int64_t i) const {
    const float gi = g[i] + weight_decay * p[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
};

// AdamW: the decay shrinks the weight directly, outside the moments.
struct AdamWStep {
  float *p, *m, *v;
  const float* g;
  float beta1, beta2, eps, shrink;  // shrink = 1 - lr * weight_decay
  float step_size, inv_sqrt_bc2;
  __device__ void operator()(int64_t i) const {
    const float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
    const float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * shrink - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
};

}  // namespace

void sgd_update(int device, float* p, const float* g, float* buf, int64_t n, float lr,
                float momentum, float weight_decay, bool first_step) {
  for_each_index(
      context(device), n,
      SgdStep{p, g, momentum != 0.0f ? buf : nullptr, lr, momentum, weight_decay, first_step});
}

void adam_update(int device, float* p, const float* g, float* m, float* v, int64_t n, float lr,
                 float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  // The bias corrections are per step, not per element: computed once here, in float as on the CPU.
  const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(beta2, static_cast<float>(step));
  for_each_index(
      context(device), n,
      AdamStep{p, m, v, g, beta1, beta2, eps, weight_decay, lr / bc1, 1.0f / std::sqrt(bc2)});
}

void adamw_update(int device, float* p, const float* g, float* m, float* v, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(beta2, static_cast<float>(step));
  for_each_index(context(device), n,
                 AdamWStep{p, m, v, g, beta1, beta2, eps, 1.0f - lr * weight_decay, lr / bc1,
                           1.0f / std::sqrt(bc2)});
}

}  // namespace mddp::tensor::cuda
