// Shape and device checks, then dispatch to the backend. Only the CPU
// backend exists in core/tensor/cpu/; a CUDA tensor reaching an op without a
// CUDA kernel is refused with the op's name rather than silently copied.
#include "core/tensor/ops.h"

#include <omp.h>

#include <algorithm>

#include "core/common/check.h"
#include "core/tensor/cpu/kernels.h"

namespace mddp::tensor {
namespace {

void require_cpu(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && !t->device().is_cpu())
      throw Error(str("op '", op, "' has no kernel for ", t->device().str(), " tensors in this build"));
}

void require_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  MDDP_CHECK(a.numel() == b.numel(), op, ": ", shape_str(a.shape()), " vs ", shape_str(b.shape()));
}

// [N, C] -> (N, C, 1); [N, C, H, W] -> (N, C, H*W)
void split_nc(const Tensor& t, int64_t& n, int64_t& c, int64_t& inner) {
  MDDP_CHECK(t.ndim() == 2 || t.ndim() == 4, "expected [N, C] or [N, C, H, W], got ", shape_str(t.shape()));
  n = t.dim(0);
  c = t.dim(1);
  inner = t.ndim() == 4 ? t.dim(2) * t.dim(3) : 1;
}

}  // namespace

void set_num_threads(int n) {
  MDDP_CHECK(n >= 1, "threads must be >= 1, got ", n);
  omp_set_num_threads(n);
  cpu::set_blas_threads(n);
}

const char* gemm_backend_name() { return cpu::gemm_backend_name(); }

int num_threads() { return omp_get_max_threads(); }

void gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
          Tensor& c) {
  require_cpu("gemm", {&a, &b, &c});
  MDDP_CHECK(a.ndim() == 2 && b.ndim() == 2 && c.ndim() == 2, "gemm needs 2-D tensors");
  const int64_t m = trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  MDDP_CHECK(k == kb && c.dim(0) == m && c.dim(1) == n, "gemm shapes: a ", shape_str(a.shape()),
             trans_a ? "^T" : "", " b ", shape_str(b.shape()), trans_b ? "^T" : "", " c ",
             shape_str(c.shape()));
  cpu::gemm(trans_a, trans_b, m, n, k, alpha, a.data(), b.data(), beta, c.data());
}

void fill(Tensor& x, float value) {
  require_cpu("fill", {&x});
  cpu::fill(x.data(), x.numel(), value);
}

void copy(const Tensor& src, Tensor& dst) {
  require_same_numel("copy", src, dst);
  require_cpu("copy", {&src, &dst});
  std::copy(src.data(), src.data() + src.numel(), dst.data());
}

void scale(Tensor& x, float alpha) {
  require_cpu("scale", {&x});
  cpu::scale(x.data(), x.numel(), alpha);
}

void axpy(float alpha, const Tensor& x, Tensor& y) {
  require_same_numel("axpy", x, y);
  require_cpu("axpy", {&x, &y});
  cpu::axpy(alpha, x.data(), y.data(), x.numel());
}

void bias_add(Tensor& y, const Tensor& bias) {
  require_cpu("bias_add", {&y, &bias});
  int64_t n, c, inner;
  split_nc(y, n, c, inner);
  MDDP_CHECK_EQ(bias.numel(), c, "bias size");
  cpu::bias_add(y.data(), bias.data(), n, c, inner);
}

void bias_grad(const Tensor& dy, Tensor& dbias) {
  require_cpu("bias_grad", {&dy, &dbias});
  int64_t n, c, inner;
  split_nc(dy, n, c, inner);
  MDDP_CHECK_EQ(dbias.numel(), c, "bias grad size");
  cpu::bias_grad(dy.data(), dbias.data(), n, c, inner);
}

void relu_forward(const Tensor& x, Tensor& y) {
  require_same_numel("relu_forward", x, y);
  require_cpu("relu_forward", {&x, &y});
  cpu::relu_forward(x.data(), y.data(), x.numel());
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  require_same_numel("relu_backward", y, dy);
  require_same_numel("relu_backward", y, dx);
  require_cpu("relu_backward", {&y, &dy, &dx});
  cpu::relu_backward(y.data(), dy.data(), dx.data(), y.numel());
}

namespace {
struct ConvDims {
  int64_t n, c, h, w, o, k, ho, wo;
};
ConvDims conv_dims(const Tensor& x, const Tensor& w, int pad) {
  MDDP_CHECK(x.ndim() == 4 && w.ndim() == 4, "conv2d: x ", shape_str(x.shape()), " w ", shape_str(w.shape()));
  MDDP_CHECK(w.dim(1) == x.dim(1) && w.dim(2) == w.dim(3), "conv2d: x ", shape_str(x.shape()), " w ",
             shape_str(w.shape()));
  ConvDims d{x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0), w.dim(2), 0, 0};
  d.ho = d.h + 2 * pad - d.k + 1;
  d.wo = d.w + 2 * pad - d.k + 1;
  MDDP_CHECK(d.ho > 0 && d.wo > 0, "conv2d: kernel larger than padded input");
  return d;
}
}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, int pad, Tensor& col,
                    Tensor& y) {
  require_cpu("conv2d_forward", {&x, &w, &b, &col, &y});
  const ConvDims d = conv_dims(x, w, pad);
  const int64_t ckk = d.c * d.k * d.k, pix = d.ho * d.wo;
  MDDP_CHECK(col.numel() >= ckk * pix, "conv2d: col workspace too small");
  MDDP_CHECK(y.shape() == (Shape{d.n, d.o, d.ho, d.wo}), "conv2d: y ", shape_str(y.shape()));
  MDDP_CHECK_EQ(b.numel(), d.o, "conv2d bias");
  for (int64_t i = 0; i < d.n; ++i) {
    cpu::im2col(x.data() + i * d.c * d.h * d.w, d.c, d.h, d.w, static_cast<int>(d.k), pad, col.data());
    // y_i [O, pix] = w [O, CKK] @ col [CKK, pix]
    cpu::gemm(false, false, d.o, pix, ckk, 1.0f, w.data(), col.data(), 0.0f, y.data() + i * d.o * pix);
  }
  cpu::bias_add(y.data(), b.data(), d.n, d.o, pix);
}

void conv2d_backward_params(const Tensor& x, const Tensor& dy, int pad, Tensor& col, Tensor& dw,
                            Tensor& db) {
  require_cpu("conv2d_backward_params", {&x, &dy, &col, &dw, &db});
  const ConvDims d = conv_dims(x, dw, pad);
  const int64_t ckk = d.c * d.k * d.k, pix = d.ho * d.wo;
  MDDP_CHECK(dy.shape() == (Shape{d.n, d.o, d.ho, d.wo}), "conv2d: dy ", shape_str(dy.shape()));
  MDDP_CHECK_EQ(db.numel(), d.o, "conv2d bias grad");
  cpu::bias_grad(dy.data(), db.data(), d.n, d.o, pix);
  for (int64_t i = 0; i < d.n; ++i) {
    cpu::im2col(x.data() + i * d.c * d.h * d.w, d.c, d.h, d.w, static_cast<int>(d.k), pad, col.data());
    // dw [O, CKK] += dy_i [O, pix] @ col^T [pix, CKK]
    cpu::gemm(false, true, d.o, ckk, pix, 1.0f, dy.data() + i * d.o * pix, col.data(), 1.0f, dw.data());
  }
}

void conv2d_backward_input(const Tensor& w, const Tensor& dy, int pad, Tensor& col, Tensor& dx) {
  require_cpu("conv2d_backward_input", {&w, &dy, &col, &dx});
  const ConvDims d = conv_dims(dx, w, pad);
  const int64_t ckk = d.c * d.k * d.k, pix = d.ho * d.wo;
  MDDP_CHECK(dy.shape() == (Shape{d.n, d.o, d.ho, d.wo}), "conv2d: dy ", shape_str(dy.shape()));
  cpu::fill(dx.data(), dx.numel(), 0.0f);
  for (int64_t i = 0; i < d.n; ++i) {
    // dcol [CKK, pix] = w^T [CKK, O] @ dy_i [O, pix], then scatter-add back into the image.
    cpu::gemm(true, false, ckk, pix, d.o, 1.0f, w.data(), dy.data() + i * d.o * pix, 0.0f, col.data());
    cpu::col2im(col.data(), d.c, d.h, d.w, static_cast<int>(d.k), pad, dx.data() + i * d.c * d.h * d.w);
  }
}

void maxpool2d_forward(const Tensor& x, int k, Tensor& y) {
  require_cpu("maxpool2d_forward", {&x, &y});
  MDDP_CHECK(x.ndim() == 4 && k >= 1, "maxpool2d: x ", shape_str(x.shape()), " k ", k);
  MDDP_CHECK(y.shape() == (Shape{x.dim(0), x.dim(1), x.dim(2) / k, x.dim(3) / k}), "maxpool2d: y ",
             shape_str(y.shape()));
  cpu::maxpool2d_forward(x.data(), x.dim(0) * x.dim(1), x.dim(2), x.dim(3), k, y.data());
}

void maxpool2d_backward(const Tensor& x, const Tensor& dy, int k, Tensor& dx) {
  require_cpu("maxpool2d_backward", {&x, &dy, &dx});
  require_same_numel("maxpool2d dx", x, dx);
  MDDP_CHECK(dy.shape() == (Shape{x.dim(0), x.dim(1), x.dim(2) / k, x.dim(3) / k}), "maxpool2d: dy ",
             shape_str(dy.shape()));
  cpu::maxpool2d_backward(x.data(), dy.data(), x.dim(0) * x.dim(1), x.dim(2), x.dim(3), k, dx.data());
}

namespace {
void check_labels(const Tensor& logits, const Tensor& labels) {
  MDDP_CHECK(logits.ndim() == 2 && labels.numel() == logits.dim(0), "logits ",
             shape_str(logits.shape()), " labels ", shape_str(labels.shape()));
  const float* l = labels.data();
  for (int64_t i = 0; i < labels.numel(); ++i)
    MDDP_CHECK(l[i] >= 0 && l[i] < logits.dim(1) && l[i] == static_cast<float>(static_cast<int64_t>(l[i])),
               "label ", l[i], " at row ", i, " is not a class index below ", logits.dim(1));
}
}  // namespace

float softmax_xent_forward(const Tensor& logits, const Tensor& labels, Tensor& probs) {
  require_cpu("softmax_xent_forward", {&logits, &labels, &probs});
  check_labels(logits, labels);
  require_same_numel("softmax probs", logits, probs);
  return cpu::softmax_xent_forward(logits.data(), labels.data(), logits.dim(0), logits.dim(1), probs.data());
}

void softmax_xent_backward(const Tensor& probs, const Tensor& labels, Tensor& dlogits) {
  require_cpu("softmax_xent_backward", {&probs, &labels, &dlogits});
  check_labels(probs, labels);
  require_same_numel("softmax dlogits", probs, dlogits);
  cpu::softmax_xent_backward(probs.data(), labels.data(), probs.dim(0), probs.dim(1), dlogits.data());
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  require_cpu("count_correct", {&logits, &labels});
  check_labels(logits, labels);
  return cpu::count_correct(logits.data(), labels.data(), logits.dim(0), logits.dim(1));
}

float mse_forward(const Tensor& pred, const Tensor& target) {
  require_same_numel("mse", pred, target);
  require_cpu("mse_forward", {&pred, &target});
  return cpu::mse_forward(pred.data(), target.data(), pred.numel());
}

void mse_backward(const Tensor& pred, const Tensor& target, Tensor& dpred) {
  require_same_numel("mse", pred, target);
  require_same_numel("mse", pred, dpred);
  require_cpu("mse_backward", {&pred, &target, &dpred});
  cpu::mse_backward(pred.data(), target.data(), pred.numel(), dpred.data());
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
                float weight_decay, bool first_step) {
  require_same_numel("sgd", param, grad);
  require_cpu("sgd_update", {&param, &grad, &momentum_buf});
  if (momentum != 0.0f) require_same_numel("sgd momentum", param, momentum_buf);
  cpu::sgd_update(param.data(), grad.data(), momentum != 0.0f ? momentum_buf.data() : nullptr,
                  param.numel(), lr, momentum, weight_decay, first_step);
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step) {
  require_same_numel("adam", param, grad);
  require_same_numel("adam m", param, m);
  require_same_numel("adam v", param, v);
  require_cpu("adam_update", {&param, &grad, &m, &v});
  MDDP_CHECK(step >= 1, "adam step counts from 1");
  cpu::adam_update(param.data(), grad.data(), m.data(), v.data(), param.numel(), lr, beta1, beta2,
                   eps, weight_decay, step);
}

}  // namespace mddp::tensor
