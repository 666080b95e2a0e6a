// Convolution on the GPU: the im2col / col2im kernels, plugged into the
// backend-independent loops of conv_loops.h together with cuBLAS.
#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"

namespace mddp::tensor::cuda {
namespace {

// col [C*K*K, Ho*Wo]: row r = (ci, ky, kx), column p = (oy, ox) holds the
// input pixel x[ci, oy + ky - pad, ox + kx - pad], 0 in the padding.
struct Im2col {
  const float* x;
  conv::Dims d;
  float* col;
  __device__ void operator()(int64_t i) const {
    const int64_t pix = d.ho * d.wo, r = i / pix, p = i % pix;
    const int64_t kx = r % d.k, ky = (r / d.k) % d.k, ci = r / (d.k * d.k);
    const int64_t iy = p / d.wo + ky - d.pad, ix = p % d.wo + kx - d.pad;
    col[i] = (iy >= 0 && iy < d.h && ix >= 0 && ix < d.w) ? x[(ci * d.h + iy) * d.w + ix] : 0.0f;
  }
};

// The adjoint of Im2col, as a gather: input pixel (ci, iy, ix) adds up every
// col entry that im2col copied it to, so each thread owns one output element
// and no atomics are needed. Terms are added in (ky, kx) order, like the CPU.
struct Col2imAdd {
  const float* col;
  conv::Dims d;
  float* dx;
  __device__ void operator()(int64_t i) const {
    const int64_t ix = i % d.w, iy = (i / d.w) % d.h, ci = i / (d.w * d.h);
    float s = 0.0f;
    for (int64_t ky = 0; ky < d.k; ++ky) {
      const int64_t oy = iy - ky + d.pad;
      if (oy < 0 || oy >= d.ho) continue;
      for (int64_t kx = 0; kx < d.k; ++kx) {
        const int64_t ox = ix - kx + d.pad;
        if (ox < 0 || ox >= d.wo) continue;
        s += col[((ci * d.k + ky) * d.k + kx) * d.ho * d.wo + oy * d.wo + ox];
      }
    }
    dx[i] += s;
  }
};

// The kernel set conv_loops.h expects, bound to one device.
struct CudaConvKernels {
  int device;
  void im2col(const float* x, const conv::Dims& d, float* col) const {
    for_each_index(context(device), d.ckk() * d.pix(), Im2col{x, d, col});
  }
  void col2im_add(const float* col, const conv::Dims& d, float* dx) const {
    for_each_index(context(device), d.c * d.h * d.w, Col2imAdd{col, d, dx});
  }
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            const float* b, float beta, float* c) const {
    cuda::gemm(device, gemm_precision(), ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void bias_add(float* y, const float* bias, int64_t n, int64_t c, int64_t inner) const {
    cuda::bias_add(device, y, bias, n, c, inner);
  }
  void bias_grad(const float* dy, float* dbias, int64_t n, int64_t c, int64_t inner) const {
    cuda::bias_grad(device, dy, dbias, n, c, inner);
  }
  void fill(float* x, int64_t n, float value) const { cuda::fill(device, x, n, value); }
};

}  // namespace

void conv2d_forward(int device, const conv::Dims& d, const float* x, const float* w, const float* b,
                    float* col, float* y) {
  conv::forward(CudaConvKernels{device}, d, x, w, b, col, y);
}

void conv2d_backward_params(int device, const conv::Dims& d, const float* x, const float* dy,
                            float* col, float* dw, float* db) {
  conv::backward_params(CudaConvKernels{device}, d, x, dy, col, dw, db);
}

void conv2d_backward_input(int device, const conv::Dims& d, const float* w, const float* dy,
                           float* col, float* dx) {
  conv::backward_input(CudaConvKernels{device}, d, w, dy, col, dx);
}

}  // namespace mddp::tensor::cuda
