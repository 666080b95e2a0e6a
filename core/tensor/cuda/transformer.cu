// The GPT's other kernels: embedding, LayerNorm, GELU and dropout (the
// formulas of cpu/transformer.cc). One thread per output element, or per
// row or column where a value sums a row or a column: each sum in a fixed
// order, no atomics, the same result every run. Simple rather than fast: a
// thread per LayerNorm row reads its row alone (uncoalesced).
#include <cmath>

#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"
#include "core/tensor/dropout_mask.h"

namespace mddp::tensor::cuda {
namespace {

constexpr float kTanhGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kTanhGeluCubic = 0.044715f;

__device__ bool is_token_id(float id, int64_t vocab) {
  return id >= 0.0f && id < static_cast<float>(vocab) && id == truncf(id);
}

// A bad id gives a NaN row: the loss turns non-finite and training stops there.
struct EmbeddingGather {
  const float *ids, *table;
  int64_t c, vocab;
  float* y;
  __device__ void operator()(int64_t i) const {
    const float id = ids[i / c];
    y[i] = is_token_id(id, vocab) ? table[static_cast<int64_t>(id) * c + i % c]
                                  : __int_as_float(0x7fc00000);
  }
};

// Column j of the table: every row's contribution, in row order.
struct EmbeddingScatterColumn {
  const float *ids, *dy;
  int64_t n, c, vocab;
  float* dtable;
  __device__ void operator()(int64_t j) const {
    for (int64_t r = 0; r < n; ++r)
      if (is_token_id(ids[r], vocab)) dtable[static_cast<int64_t>(ids[r]) * c + j] += dy[r * c + j];
  }
};

struct LayerNormRow {
  const float *x, *w, *b;
  int64_t c;
  float eps;
  float *y, *mean, *rstd;
  __device__ void operator()(int64_t i) const {
    const float* xr = x + i * c;
    float s = 0.0f;
    for (int64_t j = 0; j < c; ++j) s += xr[j];
    const float m = s / static_cast<float>(c);
    float v = 0.0f;
    for (int64_t j = 0; j < c; ++j) v += (xr[j] - m) * (xr[j] - m);
    const float r = rsqrtf(v / static_cast<float>(c) + eps);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = (xr[j] - m) * r * w[j] + b[j];
    mean[i] = m;
    rstd[i] = r;
  }
};

struct LayerNormParamGradColumn {
  const float *x, *mean, *rstd, *dy;
  int64_t n, c;
  float *dw, *db;
  __device__ void operator()(int64_t j) const {
    float sw = 0.0f, sb = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      sb += dy[i * c + j];
      sw += dy[i * c + j] * (x[i * c + j] - mean[i]) * rstd[i];
    }
    dw[j] += sw;
    db[j] += sb;
  }
};

struct LayerNormInputGradRow {
  const float *x, *w, *mean, *rstd, *dy;
  int64_t c;
  float* dx;
  __device__ void operator()(int64_t i) const {
    const float *xr = x + i * c, *dyr = dy + i * c;
    // __fmul_rn: dy * w rounded before it is used, as on the CPU. Fused into
    // dy * w - g_mean, it would keep the product's rounding error, and a row
    // of one element (dx exactly 0) would get that error times rstd.
    float g_sum = 0.0f, gx_sum = 0.0f;
    for (int64_t j = 0; j < c; ++j) {
      const float g = __fmul_rn(dyr[j], w[j]);
      g_sum += g;
      gx_sum += g * (xr[j] - mean[i]) * rstd[i];
    }
    const float g_mean = g_sum / static_cast<float>(c), gx_mean = gx_sum / static_cast<float>(c);
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - mean[i]) * rstd[i];
      dx[i * c + j] = rstd[i] * (__fmul_rn(dyr[j], w[j]) - g_mean - xhat * gx_mean);
    }
  }
};

struct GeluForward {
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(kTanhGeluScale * (v + kTanhGeluCubic * v * v * v)));
  }
};

struct GeluBackward {
  const float *x, *dy;
  float* dx;
  __device__ void operator()(int64_t i) const {
    const float v = x[i];
    const float t = tanhf(kTanhGeluScale * (v + kTanhGeluCubic * v * v * v));
    const float du = kTanhGeluScale * (1.0f + 3.0f * kTanhGeluCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
};

struct DropoutMask {
  const float* x;
  float p;
  uint64_t seed;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = x[i] * dropout_factor(seed, i, p); }
};

}  // namespace

void embedding_forward(int device, const float* ids, const float* table, int64_t n, int64_t c,
                       int64_t vocab, float* y) {
  for_each_index(context(device), n * c, EmbeddingGather{ids, table, c, vocab, y});
}

void embedding_backward(int device, const float* ids, const float* dy, int64_t n, int64_t c,
                        int64_t vocab, float* dtable) {
  for_each_index(context(device), c, EmbeddingScatterColumn{ids, dy, n, c, vocab, dtable});
}

void layernorm_forward(int device, const float* x, const float* w, const float* b, int64_t n,
                       int64_t c, float eps, float* y, float* mean, float* rstd) {
  for_each_index(context(device), n, LayerNormRow{x, w, b, c, eps, y, mean, rstd});
}

void layernorm_backward(int device, const float* x, const float* w, const float* mean,
                        const float* rstd, const float* dy, int64_t n, int64_t c, float* dx,
                        float* dw, float* db) {
  const Context& ctx = context(device);
  for_each_index(ctx, c, LayerNormParamGradColumn{x, mean, rstd, dy, n, c, dw, db});
  for_each_index(ctx, n, LayerNormInputGradRow{x, w, mean, rstd, dy, c, dx});
}

void gelu_forward(int device, const float* x, float* y, int64_t n) {
  for_each_index(context(device), n, GeluForward{x, y});
}

void gelu_backward(int device, const float* x, const float* dy, float* dx, int64_t n) {
  for_each_index(context(device), n, GeluBackward{x, dy, dx});
}

void dropout(int device, const float* x, int64_t n, float p, uint64_t seed, float* y) {
  for_each_index(context(device), n, DropoutMask{x, p, seed, y});
}

}  // namespace mddp::tensor::cuda
