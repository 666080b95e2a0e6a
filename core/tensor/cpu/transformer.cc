// The GPT's CPU kernels (core/nn/gpt.h): embedding, LayerNorm, GELU, the
// attention's head layouts and causal softmax, dropout. Rows are
// independent and split over the OpenMP threads (each row computed by one
// thread, so the result does not depend on the thread count); sums over
// rows (the parameter gradients) run in row order on one thread.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/common/sanitizers.h"
#include "core/tensor/cpu/kernels.h"
#include "core/tensor/cpu/vectorize.h"
#include "core/tensor/dropout_mask.h"

// The row loops' OpenMP pragma. ThreadSanitizer cannot see libgomp's
// barriers (libgomp is not built with it) and would report every parallel
// loop as a race; under it the loops run on one thread, which gives the same
// results (each row is computed by one thread either way).
#if defined(MDDP_TSAN)
#define MDDP_PARALLEL_ROWS
#else
#define MDDP_PARALLEL_ROWS _Pragma("omp parallel for schedule(static)")
#endif

namespace mddp::tensor::cpu {
namespace {

// What GPT-2's GELU multiplies: sqrt(2 / pi) and the cubic term's weight.
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// Element-wise work in chunks: the OpenMP threads split the chunks, and
// each chunk runs an AVX2 clone (an OpenMP loop itself cannot be one).
constexpr int64_t kChunk = 4096;

template <typename F>
void in_chunks(int64_t n, F&& f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  MDDP_PARALLEL_ROWS
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(kChunk, n - c * kChunk));
}

MDDP_VECTOR_KERNEL void gelu_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + vtanh(kGeluScale * (v + kGeluCubic * v * v * v)));
  }
}

// d/dx of 0.5 x (1 + tanh(u)), u = k (x + a x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2).
MDDP_VECTOR_KERNEL void gelu_grad_span(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = vtanh(kGeluScale * (v + kGeluCubic * v * v * v));
    const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

MDDP_VECTOR_KERNEL void dropout_span(const float* x, int64_t begin, int64_t n, float p,
                                     uint64_t seed, float* y) {
  for (int64_t i = begin; i < begin + n; ++i) y[i] = x[i] * dropout_factor(seed, i, p);
}

}  // namespace

void embedding_forward(const float* ids, const float* table, int64_t n, int64_t c, float* y) {
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(y + i * c, table + static_cast<int64_t>(ids[i]) * c, sizeof(float) * c);
}

void embedding_backward(const float* ids, const float* dy, int64_t n, int64_t c, float* dtable) {
  for (int64_t i = 0; i < n; ++i)
    axpy(1.0f, dy + i * c, dtable + static_cast<int64_t>(ids[i]) * c, c);
}

void layernorm_forward(const float* x, const float* w, const float* b, int64_t n, int64_t c,
                       float eps, float* y, float* mean, float* rstd) {
  MDDP_PARALLEL_ROWS
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * c;
    float s = 0.0f;
    for (int64_t j = 0; j < c; ++j) s += xr[j];
    const float m = s / static_cast<float>(c);
    float v = 0.0f;  // two passes: no cancellation in E[x^2] - E[x]^2
    for (int64_t j = 0; j < c; ++j) v += (xr[j] - m) * (xr[j] - m);
    const float r = 1.0f / std::sqrt(v / static_cast<float>(c) + eps);
    float* yr = y + i * c;
    for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - m) * r * w[j] + b[j];
    mean[i] = m;
    rstd[i] = r;
  }
}

// With xhat = (x - mean) rstd and g = dy w:  dbias += sum_rows dy,
// dweight += sum_rows dy xhat, dx = rstd (g - mean(g) - xhat mean(g xhat)).
void layernorm_backward(const float* x, const float* w, const float* mean, const float* rstd,
                        const float* dy, int64_t n, int64_t c, float* dx, float* dw, float* db) {
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * c, *dyr = dy + i * c;
    for (int64_t j = 0; j < c; ++j) {
      db[j] += dyr[j];
      dw[j] += dyr[j] * (xr[j] - mean[i]) * rstd[i];
    }
  }
  MDDP_PARALLEL_ROWS
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * c, *dyr = dy + i * c;
    float g_sum = 0.0f, gx_sum = 0.0f;
    for (int64_t j = 0; j < c; ++j) {
      const float g = dyr[j] * w[j];
      g_sum += g;
      gx_sum += g * (xr[j] - mean[i]) * rstd[i];
    }
    const float g_mean = g_sum / static_cast<float>(c), gx_mean = gx_sum / static_cast<float>(c);
    float* dxr = dx + i * c;
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - mean[i]) * rstd[i];
      dxr[j] = rstd[i] * (dyr[j] * w[j] - g_mean - xhat * gx_mean);
    }
  }
}

void gelu_forward(const float* x, float* y, int64_t n) {
  in_chunks(n, [&](int64_t begin, int64_t len) { gelu_span(x + begin, y + begin, len); });
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  in_chunks(n, [&](int64_t begin, int64_t len) {
    gelu_grad_span(x + begin, dy + begin, dx + begin, len);
  });
}

// x [B, T, P, H, D] (the columns of a row: P parts of H heads of D) <-> heads [P, B, H, T, D].
void split_heads(const float* x, const HeadDims& d, float* heads) {
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = 0; t < d.t; ++t)
      for (int64_t p = 0; p < d.p; ++p)
        for (int64_t h = 0; h < d.h; ++h)
          std::memcpy(heads + (((p * d.b + b) * d.h + h) * d.t + t) * d.d,
                      x + (((b * d.t + t) * d.p + p) * d.h + h) * d.d, sizeof(float) * d.d);
}

void merge_heads(const float* heads, const HeadDims& d, float* x) {
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = 0; t < d.t; ++t)
      for (int64_t p = 0; p < d.p; ++p)
        for (int64_t h = 0; h < d.h; ++h)
          std::memcpy(x + (((b * d.t + t) * d.p + p) * d.h + h) * d.d,
                      heads + (((p * d.b + b) * d.h + h) * d.t + t) * d.d, sizeof(float) * d.d);
}

// Row i of each [T, T] matrix: the softmax of its first i + 1 scores; the
// masked rest is exactly 0. In place is fine: s[j] is read before p[j] is written.
void causal_softmax_forward(const float* scores, int64_t n, int64_t t, float* probs,
                            int64_t ahead) {
  MDDP_PARALLEL_ROWS
  for (int64_t r = 0; r < n * t; ++r) {
    const int64_t i = std::min(r % t + ahead, t - 1);  // the last column the row sees
    const float* s = scores + r * t;
    float* p = probs + r * t;
    float mx = s[0];
    for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, s[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(s[j] - mx));
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
    for (int64_t j = i + 1; j < t; ++j) p[j] = 0.0f;
  }
}

// ds = p (dp - sum_j p dp) on the unmasked part; 0 on the masked one.
void causal_softmax_backward(const float* probs, const float* dprobs, int64_t n, int64_t t,
                             float* dscores, int64_t ahead) {
  MDDP_PARALLEL_ROWS
  for (int64_t r = 0; r < n * t; ++r) {
    const int64_t i = std::min(r % t + ahead, t - 1);
    const float *p = probs + r * t, *dp = dprobs + r * t;
    float* ds = dscores + r * t;
    float dot = 0.0f;
    for (int64_t j = 0; j <= i; ++j) dot += p[j] * dp[j];
    for (int64_t j = 0; j <= i; ++j) ds[j] = p[j] * (dp[j] - dot);
    for (int64_t j = i + 1; j < t; ++j) ds[j] = 0.0f;
  }
}

void dropout(const float* x, int64_t n, float p, uint64_t seed, float* y) {
  in_chunks(n, [&](int64_t begin, int64_t len) { dropout_span(x, begin, len, p, seed, y); });
}

}  // namespace mddp::tensor::cpu
