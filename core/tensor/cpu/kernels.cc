// Plain loops for everything but GEMM. Written so the compiler vectorises
// them (contiguous, no aliasing between inputs and outputs except in place).
#include "core/tensor/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/common/half_convert.h"
#include "core/tensor/cpu/vectorize.h"  // MDDP_VECTOR_KERNEL: Note [Kernel clones]

namespace mddp::tensor::cpu {

MDDP_VECTOR_KERNEL void bias_add(float* y, const float* bias, int64_t n, int64_t c, int64_t inner) {
  if (inner ==
      1) {  // [N, C] (Linear): add the bias row to each row, a loop contiguous in c that vectorises
    for (int64_t i = 0; i < n; ++i) {
      float* row = y + i * c;
      for (int64_t j = 0; j < c; ++j) row[j] += bias[j];
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      float* row = y + (i * c + j) * inner;
      const float b = bias[j];
      for (int64_t k = 0; k < inner; ++k) row[k] += b;
    }
}

void bias_grad(const float* dy, float* dbias, int64_t n, int64_t c, int64_t inner) {
  if (inner == 1) {  // [N, C]: sum rows, contiguous in c
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j) dbias[j] += dy[i * c + j];
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const float* row = dy + (i * c + j) * inner;
      float s = 0.0f;
      for (int64_t k = 0; k < inner; ++k) s += row[k];
      dbias[j] += s;
    }
}

MDDP_VECTOR_KERNEL void relu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

MDDP_VECTOR_KERNEL void relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// col row r = (ci, ky, kx) holds, for each output pixel (oy, ox), the input
// pixel x[ci, oy + ky - pad, ox + kx - pad] (0 outside the image).
MDDP_VECTOR_KERNEL void im2col(const float* x, int64_t c, int64_t h, int64_t w, int k, int pad,
                               float* col) {
  const int64_t ho = h + 2 * pad - k + 1, wo = w + 2 * pad - k + 1;
  for (int64_t ci = 0; ci < c; ++ci)
    for (int ky = 0; ky < k; ++ky)
      for (int kx = 0; kx < k; ++kx) {
        float* out = col + ((ci * k + ky) * k + kx) * ho * wo;
        for (int64_t oy = 0; oy < ho; ++oy) {
          const int64_t iy = oy + ky - pad;
          float* orow = out + oy * wo;
          if (iy < 0 || iy >= h) {
            std::memset(orow, 0, sizeof(float) * wo);
            continue;
          }
          const float* xrow = x + (ci * h + iy) * w;
          for (int64_t ox = 0; ox < wo; ++ox) {
            const int64_t ix = ox + kx - pad;
            orow[ox] = (ix >= 0 && ix < w) ? xrow[ix] : 0.0f;
          }
        }
      }
}

MDDP_VECTOR_KERNEL void col2im(const float* col, int64_t c, int64_t h, int64_t w, int k, int pad,
                               float* dx) {
  const int64_t ho = h + 2 * pad - k + 1, wo = w + 2 * pad - k + 1;
  for (int64_t ci = 0; ci < c; ++ci)
    for (int ky = 0; ky < k; ++ky)
      for (int kx = 0; kx < k; ++kx) {
        const float* in = col + ((ci * k + ky) * k + kx) * ho * wo;
        for (int64_t oy = 0; oy < ho; ++oy) {
          const int64_t iy = oy + ky - pad;
          if (iy < 0 || iy >= h) continue;
          float* xrow = dx + (ci * h + iy) * w;
          const float* irow = in + oy * wo;
          for (int64_t ox = 0; ox < wo; ++ox) {
            const int64_t ix = ox + kx - pad;
            if (ix >= 0 && ix < w) xrow[ix] += irow[ox];
          }
        }
      }
}

void maxpool2d_forward(const float* x, int64_t nc, int64_t h, int64_t w, int k, float* y) {
  const int64_t ho = h / k, wo = w / k;
  for (int64_t p = 0; p < nc; ++p) {
    const float* xp = x + p * h * w;
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        float m = -std::numeric_limits<float>::infinity();
        for (int dy = 0; dy < k; ++dy)
          for (int dx = 0; dx < k; ++dx) m = std::max(m, xp[(oy * k + dy) * w + ox * k + dx]);
        y[(p * ho + oy) * wo + ox] = m;
      }
  }
}

void maxpool2d_backward(const float* x, const float* dy, int64_t nc, int64_t h, int64_t w, int k,
                        float* dx) {
  const int64_t ho = h / k, wo = w / k;
  std::memset(dx, 0, sizeof(float) * nc * h * w);
  for (int64_t p = 0; p < nc; ++p) {
    const float* xp = x + p * h * w;
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        int64_t best = (oy * k) * w + ox * k;
        for (int a = 0; a < k; ++a)
          for (int b = 0; b < k; ++b) {
            const int64_t idx = (oy * k + a) * w + ox * k + b;
            if (xp[idx] > xp[best]) best = idx;  // first maximum wins, as in forward
          }
        dx[p * h * w + best] += dy[(p * ho + oy) * wo + ox];
      }
  }
}

float softmax_xent_forward(const float* logits, const float* labels, int64_t n, int64_t classes,
                           float* probs) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    float* prow = probs + i * classes;
    const float mx = *std::max_element(row, row + classes);
    float sum = 0.0f;
    for (int64_t j = 0; j < classes; ++j) sum += (prow[j] = std::exp(row[j] - mx));
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < classes; ++j) prow[j] *= inv;
    const auto label = static_cast<int64_t>(labels[i]);
    total += -(row[label] - mx - std::log(sum));  // log-sum-exp form: no log(0)
  }
  return n ? static_cast<float>(total / n) : 0.0f;
}

MDDP_VECTOR_KERNEL void softmax_xent_backward(const float* probs, const float* labels, int64_t n,
                                              int64_t classes, float* dlogits) {
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < classes; ++j) dlogits[i * classes + j] = probs[i * classes + j] * inv_n;
    dlogits[i * classes + static_cast<int64_t>(labels[i])] -= inv_n;
  }
}

int64_t count_correct(const float* logits, const float* labels, int64_t n, int64_t classes) {
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    correct += (std::max_element(row, row + classes) - row) == static_cast<int64_t>(labels[i]);
  }
  return correct;
}

float mse_forward(const float* pred, const float* target, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = pred[i] - target[i];
    s += d * d;
  }
  return n ? static_cast<float>(s / n) : 0.0f;
}

MDDP_VECTOR_KERNEL void mse_backward(const float* pred, const float* target, int64_t n,
                                     float* dpred) {
  const float k = 2.0f / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) dpred[i] = k * (pred[i] - target[i]);
}

MDDP_VECTOR_KERNEL void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr,
                                   float momentum, float weight_decay, bool first_step) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + weight_decay * p[i];
    if (momentum == 0.0f) {
      p[i] -= lr * gi;
      continue;
    }
    buf[i] = first_step ? gi : momentum * buf[i] + gi;
    p[i] -= lr * buf[i];
  }
}

MDDP_VECTOR_KERNEL void adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                                    float lr, float beta1, float beta2, float eps,
                                    float weight_decay, int64_t step) {
  const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(beta2, static_cast<float>(step));
  const float step_size = lr / bc1;
  const float inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + weight_decay * p[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
    v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}

// PyTorch's AdamW: the decay shrinks the weight directly (decoupled), it
// never enters the moments; the rest is adam_update with no L2 term.
MDDP_VECTOR_KERNEL void adamw_update(float* p, const float* g, float* m, float* v, int64_t n,
                                     float lr, float beta1, float beta2, float eps,
                                     float weight_decay, int64_t step) {
  const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(beta2, static_cast<float>(step));
  const float step_size = lr / bc1;
  const float inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
  const float shrink = 1.0f - lr * weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    p[i] = p[i] * shrink - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}

// In double, in index order: the same sum whatever the thread count.
double sum_squares(const float* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void fill(float* x, int64_t n, float value) {
  std::fill(x, x + n, value);
}

MDDP_VECTOR_KERNEL void scale(float* x, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

MDDP_VECTOR_KERNEL void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// fp16 through the buffer conversions (F16C where the CPU has it); bf16 is
// a shift and a rounding add, a loop the compiler vectorises.
MDDP_VECTOR_KERNEL void round_to_half(const float* x, int64_t n, HalfFormat format,
                                      uint16_t* bits) {
  if (format == HalfFormat::kFp16)
    float_to_fp16_n(x, static_cast<std::size_t>(n), bits);
  else
    for (int64_t i = 0; i < n; ++i) bits[i] = float_to_bf16(x[i]);
}

MDDP_VECTOR_KERNEL void widen_from_half(const uint16_t* bits, int64_t n, HalfFormat format,
                                        float* x) {
  if (format == HalfFormat::kFp16)
    fp16_to_float_n(bits, static_cast<std::size_t>(n), x);
  else
    for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_float(bits[i]);
}

}  // namespace mddp::tensor::cpu
