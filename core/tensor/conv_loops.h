// Convolution as im2col + GEMM, written once for every backend. The loops
// below only order the steps; a backend supplies the kernels as a type K
// with these members (device pointers for the GPU, host ones for the CPU):
//   im2col(x_img, d, col)          col [C*K*K, Ho*Wo] from one image [C, H, W]
//   col2im_add(col, d, dx_img)     adds col's entries back into one image
//   gemm(ta, tb, m, n, k, alpha, a, b, beta, c)   row-major, as in ops.h
//   bias_add(y, bias, n, c, inner), bias_grad(dy, dbias, n, c, inner), fill(x, n, value)
// One image at a time, because the caller's col workspace holds one image.
#pragma once

#include <cstdint>

namespace mddp::tensor::conv {

// Stride 1, zero padding `pad` on every side: Ho = H + 2 pad - K + 1.
struct Dims {
  int64_t n, c, h, w, o, k;
  int pad;
  int64_t ho, wo;
  int64_t ckk() const { return c * k * k; }
  int64_t pix() const { return ho * wo; }
};

template <typename K>
void forward(const K& kern, const Dims& d, const float* x, const float* w, const float* b,
             float* col, float* y) {
  const int64_t ckk = d.ckk(), pix = d.pix();
  for (int64_t i = 0; i < d.n; ++i) {
    kern.im2col(x + i * d.c * d.h * d.w, d, col);
    // y_i [O, pix] = w [O, CKK] @ col [CKK, pix]
    kern.gemm(false, false, d.o, pix, ckk, 1.0f, w, col, 0.0f, y + i * d.o * pix);
  }
  kern.bias_add(y, b, d.n, d.o, pix);
}

// Accumulates dw [O, C, K, K] and db [O].
template <typename K>
void backward_params(const K& kern, const Dims& d, const float* x, const float* dy, float* col,
                     float* dw, float* db) {
  const int64_t ckk = d.ckk(), pix = d.pix();
  kern.bias_grad(dy, db, d.n, d.o, pix);
  for (int64_t i = 0; i < d.n; ++i) {
    kern.im2col(x + i * d.c * d.h * d.w, d, col);
    // dw [O, CKK] += dy_i [O, pix] @ col^T [pix, CKK]
    kern.gemm(false, true, d.o, ckk, pix, 1.0f, dy + i * d.o * pix, col, 1.0f, dw);
  }
}

// Overwrites dx [N, C, H, W].
template <typename K>
void backward_input(const K& kern, const Dims& d, const float* w, const float* dy, float* col,
                    float* dx) {
  const int64_t ckk = d.ckk(), pix = d.pix();
  kern.fill(dx, d.n * d.c * d.h * d.w, 0.0f);
  for (int64_t i = 0; i < d.n; ++i) {
    // dcol [CKK, pix] = w^T [CKK, O] @ dy_i [O, pix], then scatter-add back into the image.
    kern.gemm(true, false, ckk, pix, d.o, 1.0f, w, dy + i * d.o * pix, 0.0f, col);
    kern.col2im_add(col, d, dx + i * d.c * d.h * d.w);
  }
}

}  // namespace mddp::tensor::conv
