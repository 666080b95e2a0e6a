// Shape and device checks, then dispatch to the backend of the tensors'
// device: cpu/ for the CPU, cuda/ for a GPU. Every tensor of an op must be on
// the same device; ops never copy between devices behind the caller's back
// (copy() is the one op that moves data across).
//
// In a build without CUDA the cuda:: calls sit in discarded `if constexpr`
// branches: they are not compiled, so nothing needs to link them, and
// op_device() has already refused any CUDA tensor with an InputError.
#include "core/tensor/ops.h"

#include <omp.h>

#include <algorithm>

#include "core/common/check.h"
#include "core/common/test_mutation.h"
#include "core/tensor/conv_loops.h"
#include "core/tensor/cpu/kernels.h"
#include "core/tensor/cuda/kernels.h"  // declarations only: no CUDA headers
#include "core/tensor/op_dispatch.h"
#include "core/tensor/precision.h"

namespace mddp::tensor {

namespace detail {

Device op_device(const char* op, std::initializer_list<const Tensor*> ts) {
  Device dev;
  bool first = true;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (first) dev = t->device();
    first = false;
    if (t->device() != dev)
      throw Error(str("op '", op, "' got tensors on ", dev.str(), " and ", t->device().str(),
                      "; move them to one device first (copy)"));
  }
  if (dev.is_cuda() && !kHaveCuda)
    throw InputError(
        str("op '", op, "' got a ", dev.str(),
            " tensor, but this build has no CUDA support; rebuild with the CUDA toolkit "
            "installed (or use --device cpu)"));
  return dev;
}

void cpu_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              const float* b, float beta, float* c) {
  switch (gemm_precision()) {
    case Precision::kFp32:
      return cpu::gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
    case Precision::kBf16:
      return cpu::gemm_half(HalfFormat::kBf16, ta, tb, m, n, k, alpha, a, b, beta, c);
    case Precision::kFp16:
      return cpu::gemm_half(HalfFormat::kFp16, ta, tb, m, n, k, alpha, a, b, beta, c);
  }
}

void require_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  MDDP_CHECK(a.numel() == b.numel(), op, ": ", shape_str(a.shape()), " vs ", shape_str(b.shape()));
}

}  // namespace detail

namespace {

using detail::cpu_gemm;
using detail::kHaveCuda;
using detail::op_device;
using detail::require_same_numel;

// [N, C] -> (N, C, 1); [N, C, H, W] -> (N, C, H*W)
void split_nc(const Tensor& t, int64_t& n, int64_t& c, int64_t& inner) {
  MDDP_CHECK(t.ndim() == 2 || t.ndim() == 4, "expected [N, C] or [N, C, H, W], got ",
             shape_str(t.shape()));
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

const char* gemm_backend_name(int64_t m, int64_t n, int64_t k) {
  return cpu::gemm_backend_name(cpu::gemm_backend(m, n, k));
}

int num_threads() {
  return omp_get_max_threads();
}

void gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
          Tensor& c) {
  const Device dev = op_device("gemm", {&a, &b, &c});
  MDDP_CHECK(a.ndim() == 2 && b.ndim() == 2 && c.ndim() == 2, "gemm needs 2-D tensors");
  const int64_t m = trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  MDDP_CHECK(k == kb && c.dim(0) == m && c.dim(1) == n, "gemm shapes: a ", shape_str(a.shape()),
             trans_a ? "^T" : "", " b ", shape_str(b.shape()), trans_b ? "^T" : "", " c ",
             shape_str(c.shape()));
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::gemm(dev.index, gemm_precision(), trans_a, trans_b, m, n, k, alpha, a.data(), b.data(),
                 beta, c.data());
    return;
  }
  cpu_gemm(trans_a, trans_b, m, n, k, alpha, a.data(), b.data(), beta, c.data());
}

void fill(Tensor& x, float value) {
  const Device dev = op_device("fill", {&x});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::fill(dev.index, x.data(), x.numel(), value);
    return;
  }
  cpu::fill(x.data(), x.numel(), value);
}

void copy(const Tensor& src, Tensor& dst) {
  require_same_numel("copy", src, dst);
  if (src.device() != dst.device()) {  // across devices: blocks until done
    dst.copy_from(src);
    return;
  }
  const Device dev = op_device("copy", {&src, &dst});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::copy_on_device(dev.index, src.data(), dst.data(), src.numel());
    return;
  }
  std::copy(src.data(), src.data() + src.numel(), dst.data());
}

void scale(Tensor& x, float alpha) {
  const Device dev = op_device("scale", {&x});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::scale(dev.index, x.data(), x.numel(), alpha);
    return;
  }
  cpu::scale(x.data(), x.numel(), alpha);
}

void axpy(float alpha, const Tensor& x, Tensor& y) {
  require_same_numel("axpy", x, y);
  const Device dev = op_device("axpy", {&x, &y});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::axpy(dev.index, alpha, x.data(), y.data(), x.numel());
    return;
  }
  cpu::axpy(alpha, x.data(), y.data(), x.numel());
}

void round_to_half(const Tensor& x, HalfFormat format, uint16_t* bits) {
  const Device dev = op_device("round_to_half", {&x});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::round_to_half(dev.index, x.data(), x.numel(), format == HalfFormat::kBf16, bits);
    return;
  }
  cpu::round_to_half(x.data(), x.numel(), format, bits);
}

void widen_from_half(const uint16_t* bits, HalfFormat format, Tensor& x) {
  const Device dev = op_device("widen_from_half", {&x});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::widen_from_half(dev.index, bits, x.numel(), format == HalfFormat::kBf16, x.data());
    return;
  }
  cpu::widen_from_half(bits, x.numel(), format, x.data());
}

void bias_add(Tensor& y, const Tensor& bias) {
  const Device dev = op_device("bias_add", {&y, &bias});
  int64_t n, c, inner;
  split_nc(y, n, c, inner);
  MDDP_CHECK_EQ(bias.numel(), c, "bias size");
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::bias_add(dev.index, y.data(), bias.data(), n, c, inner);
    return;
  }
  cpu::bias_add(y.data(), bias.data(), n, c, inner);
}

void bias_grad(const Tensor& dy, Tensor& dbias) {
  const Device dev = op_device("bias_grad", {&dy, &dbias});
  int64_t n, c, inner;
  split_nc(dy, n, c, inner);
  MDDP_CHECK_EQ(dbias.numel(), c, "bias grad size");
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::bias_grad(dev.index, dy.data(), dbias.data(), n, c, inner);
    return;
  }
  cpu::bias_grad(dy.data(), dbias.data(), n, c, inner);
}

void relu_forward(const Tensor& x, Tensor& y) {
  require_same_numel("relu_forward", x, y);
  const Device dev = op_device("relu_forward", {&x, &y});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::relu_forward(dev.index, x.data(), y.data(), x.numel());
    return;
  }
  cpu::relu_forward(x.data(), y.data(), x.numel());
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  require_same_numel("relu_backward", y, dy);
  require_same_numel("relu_backward", y, dx);
  const Device dev = op_device("relu_backward", {&y, &dy, &dx});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::relu_backward(dev.index, y.data(), dy.data(), dx.data(), y.numel());
    return;
  }
  cpu::relu_backward(y.data(), dy.data(), dx.data(), y.numel());
  if (test_mutation(
          "relu_mask_inverted")) {  // planted bug: dx = dy - dx keeps dy where the mask is off
    cpu::scale(dx.data(), dx.numel(), -1.0f);
    cpu::axpy(1.0f, dy.data(), dx.data(), dx.numel());
  }
}

namespace {
conv::Dims conv_dims(const Tensor& x, const Tensor& w, int pad) {
  MDDP_CHECK(x.ndim() == 4 && w.ndim() == 4, "conv2d: x ", shape_str(x.shape()), " w ",
             shape_str(w.shape()));
  MDDP_CHECK(w.dim(1) == x.dim(1) && w.dim(2) == w.dim(3), "conv2d: x ", shape_str(x.shape()),
             " w ", shape_str(w.shape()));
  conv::Dims d{x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0), w.dim(2), pad, 0, 0};
  d.ho = d.h + 2 * pad - d.k + 1;
  d.wo = d.w + 2 * pad - d.k + 1;
  MDDP_CHECK(d.ho > 0 && d.wo > 0, "conv2d: kernel larger than padded input");
  return d;
}

// The CPU kernel set for conv_loops.h.
struct CpuConvKernels {
  void im2col(const float* x, const conv::Dims& d, float* col) const {
    cpu::im2col(x, d.c, d.h, d.w, static_cast<int>(d.k), d.pad, col);
  }
  void col2im_add(const float* col, const conv::Dims& d, float* dx) const {
    cpu::col2im(col, d.c, d.h, d.w, static_cast<int>(d.k), d.pad, dx);
  }
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            const float* b, float beta, float* c) const {
    cpu_gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void bias_add(float* y, const float* bias, int64_t n, int64_t c, int64_t inner) const {
    cpu::bias_add(y, bias, n, c, inner);
  }
  void bias_grad(const float* dy, float* dbias, int64_t n, int64_t c, int64_t inner) const {
    cpu::bias_grad(dy, dbias, n, c, inner);
  }
  void fill(float* x, int64_t n, float value) const { cpu::fill(x, n, value); }
};
}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, int pad, Tensor& col,
                    Tensor& y) {
  const Device dev = op_device("conv2d_forward", {&x, &w, &b, &col, &y});
  const conv::Dims d = conv_dims(x, w, pad);
  MDDP_CHECK(col.numel() >= d.ckk() * d.pix(), "conv2d: col workspace too small");
  MDDP_CHECK(y.shape() == (Shape{d.n, d.o, d.ho, d.wo}), "conv2d: y ", shape_str(y.shape()));
  MDDP_CHECK_EQ(b.numel(), d.o, "conv2d bias");
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::conv2d_forward(dev.index, d, x.data(), w.data(), b.data(), col.data(), y.data());
    return;
  }
  conv::forward(CpuConvKernels{}, d, x.data(), w.data(), b.data(), col.data(), y.data());
}

void conv2d_backward_params(const Tensor& x, const Tensor& dy, int pad, Tensor& col, Tensor& dw,
                            Tensor& db) {
  const Device dev = op_device("conv2d_backward_params", {&x, &dy, &col, &dw, &db});
  const conv::Dims d = conv_dims(x, dw, pad);
  MDDP_CHECK(col.numel() >= d.ckk() * d.pix(), "conv2d: col workspace too small");
  MDDP_CHECK(dy.shape() == (Shape{d.n, d.o, d.ho, d.wo}), "conv2d: dy ", shape_str(dy.shape()));
  MDDP_CHECK_EQ(db.numel(), d.o, "conv2d bias grad");
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::conv2d_backward_params(dev.index, d, x.data(), dy.data(), col.data(), dw.data(),
                                   db.data());
    return;
  }
  conv::backward_params(CpuConvKernels{}, d, x.data(), dy.data(), col.data(), dw.data(), db.data());
}

void conv2d_backward_input(const Tensor& w, const Tensor& dy, int pad, Tensor& col, Tensor& dx) {
  const Device dev = op_device("conv2d_backward_input", {&w, &dy, &col, &dx});
  const conv::Dims d = conv_dims(dx, w, pad);
  MDDP_CHECK(col.numel() >= d.ckk() * d.pix(), "conv2d: col workspace too small");
  MDDP_CHECK(dy.shape() == (Shape{d.n, d.o, d.ho, d.wo}), "conv2d: dy ", shape_str(dy.shape()));
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::conv2d_backward_input(dev.index, d, w.data(), dy.data(), col.data(), dx.data());
    return;
  }
  conv::backward_input(CpuConvKernels{}, d, w.data(), dy.data(), col.data(), dx.data());
}

void maxpool2d_forward(const Tensor& x, int k, Tensor& y) {
  const Device dev = op_device("maxpool2d_forward", {&x, &y});
  MDDP_CHECK(x.ndim() == 4 && k >= 1, "maxpool2d: x ", shape_str(x.shape()), " k ", k);
  MDDP_CHECK(y.shape() == (Shape{x.dim(0), x.dim(1), x.dim(2) / k, x.dim(3) / k}), "maxpool2d: y ",
             shape_str(y.shape()));
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::maxpool2d_forward(dev.index, x.data(), x.dim(0) * x.dim(1), x.dim(2), x.dim(3), k,
                              y.data());
    return;
  }
  cpu::maxpool2d_forward(x.data(), x.dim(0) * x.dim(1), x.dim(2), x.dim(3), k, y.data());
}

void maxpool2d_backward(const Tensor& x, const Tensor& dy, int k, Tensor& dx) {
  const Device dev = op_device("maxpool2d_backward", {&x, &dy, &dx});
  require_same_numel("maxpool2d dx", x, dx);
  MDDP_CHECK(x.ndim() == 4 && k >= 1, "maxpool2d: x ", shape_str(x.shape()), " k ", k);
  MDDP_CHECK(dy.shape() == (Shape{x.dim(0), x.dim(1), x.dim(2) / k, x.dim(3) / k}),
             "maxpool2d: dy ", shape_str(dy.shape()));
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::maxpool2d_backward(dev.index, x.data(), dy.data(), x.dim(0) * x.dim(1), x.dim(2),
                               x.dim(3), k, dx.data());
    return;
  }
  cpu::maxpool2d_backward(x.data(), dy.data(), x.dim(0) * x.dim(1), x.dim(2), x.dim(3), k,
                          dx.data());
}

namespace {
void check_label_shape(const Tensor& logits, const Tensor& labels) {
  MDDP_CHECK(logits.ndim() == 2 && labels.numel() == logits.dim(0), "logits ",
             shape_str(logits.shape()), " labels ", shape_str(labels.shape()));
}

// Labels must be class indices; on the CPU they are checked here, on a GPU by
// the kernels, which report the first bad row for this same message.
void check_label_row(const Tensor& logits, float label, int64_t row) {
  MDDP_CHECK(label >= 0 && label < logits.dim(1) &&
                 label == static_cast<float>(static_cast<int64_t>(label)),
             "label ", label, " at row ", row, " is not a class index below ", logits.dim(1));
}

void check_labels_cpu(const Tensor& logits, const Tensor& labels) {
  const float* l = labels.data();
  for (int64_t i = 0; i < labels.numel(); ++i) check_label_row(logits, l[i], i);
}

// Used only where CUDA is compiled in.
[[maybe_unused]] void report_bad_row(const Tensor& logits, const Tensor& labels, int64_t bad_row) {
  if (bad_row >= 0) check_label_row(logits, labels.view(bad_row, {1}).to_vector()[0], bad_row);
}
}  // namespace

float softmax_xent_forward(const Tensor& logits, const Tensor& labels, Tensor& probs) {
  const Device dev = op_device("softmax_xent_forward", {&logits, &labels, &probs});
  check_label_shape(logits, labels);
  require_same_numel("softmax probs", logits, probs);
  if (dev.is_cuda()) {
    float loss = 0.0f;
    if constexpr (kHaveCuda) {
      int64_t bad_row = -1;
      loss = cuda::softmax_xent_forward(dev.index, logits.data(), labels.data(), logits.dim(0),
                                        logits.dim(1), probs.data(), bad_row);
      report_bad_row(logits, labels, bad_row);
    }
    return loss;
  }
  check_labels_cpu(logits, labels);
  return cpu::softmax_xent_forward(logits.data(), labels.data(), logits.dim(0), logits.dim(1),
                                   probs.data());
}

void softmax_xent_backward(const Tensor& probs, const Tensor& labels, Tensor& dlogits,
                           bool labels_checked) {
  const Device dev = op_device("softmax_xent_backward", {&probs, &labels, &dlogits});
  check_label_shape(probs, labels);
  require_same_numel("softmax dlogits", probs, dlogits);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) {
      int64_t bad_row = -1;
      cuda::softmax_xent_backward(dev.index, probs.data(), labels.data(), probs.dim(0),
                                  probs.dim(1), dlogits.data(), !labels_checked, bad_row);
      report_bad_row(probs, labels, bad_row);
    }
    return;
  }
  check_labels_cpu(probs, labels);
  cpu::softmax_xent_backward(probs.data(), labels.data(), probs.dim(0), probs.dim(1),
                             dlogits.data());
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  const Device dev = op_device("count_correct", {&logits, &labels});
  check_label_shape(logits, labels);
  if (dev.is_cuda()) {
    int64_t correct = 0;
    if constexpr (kHaveCuda) {
      int64_t bad_row = -1;
      correct = cuda::count_correct(dev.index, logits.data(), labels.data(), logits.dim(0),
                                    logits.dim(1), bad_row);
      report_bad_row(logits, labels, bad_row);
    }
    return correct;
  }
  check_labels_cpu(logits, labels);
  return cpu::count_correct(logits.data(), labels.data(), logits.dim(0), logits.dim(1));
}

float mse_forward(const Tensor& pred, const Tensor& target) {
  require_same_numel("mse", pred, target);
  const Device dev = op_device("mse_forward", {&pred, &target});
  if (dev.is_cuda()) {
    float loss = 0.0f;
    if constexpr (kHaveCuda)
      loss = cuda::mse_forward(dev.index, pred.data(), target.data(), pred.numel());
    return loss;
  }
  return cpu::mse_forward(pred.data(), target.data(), pred.numel());
}

void mse_backward(const Tensor& pred, const Tensor& target, Tensor& dpred) {
  require_same_numel("mse", pred, target);
  require_same_numel("mse", pred, dpred);
  const Device dev = op_device("mse_backward", {&pred, &target, &dpred});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::mse_backward(dev.index, pred.data(), target.data(), pred.numel(), dpred.data());
    return;
  }
  cpu::mse_backward(pred.data(), target.data(), pred.numel(), dpred.data());
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
                float weight_decay, bool first_step) {
  require_same_numel("sgd", param, grad);
  const Device dev = op_device("sgd_update", {&param, &grad, &momentum_buf});
  if (momentum != 0.0f) require_same_numel("sgd momentum", param, momentum_buf);
  float* buf = momentum != 0.0f ? momentum_buf.data() : nullptr;
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::sgd_update(dev.index, param.data(), grad.data(), buf, param.numel(), lr, momentum,
                       weight_decay, first_step);
    return;
  }
  cpu::sgd_update(param.data(), grad.data(), buf, param.numel(), lr, momentum, weight_decay,
                  first_step);
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step) {
  require_same_numel("adam", param, grad);
  require_same_numel("adam m", param, m);
  require_same_numel("adam v", param, v);
  const Device dev = op_device("adam_update", {&param, &grad, &m, &v});
  MDDP_CHECK(step >= 1, "adam step counts from 1");
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::adam_update(dev.index, param.data(), grad.data(), m.data(), v.data(), param.numel(), lr,
                        beta1, beta2, eps, weight_decay, step);
    return;
  }
  // Planted bug: at a step this large beta^t is 0, so the bias correction is 1.
  const int64_t bias_step = test_mutation("adam_no_bias_correction") ? int64_t{1} << 40 : step;
  cpu::adam_update(param.data(), grad.data(), m.data(), v.data(), param.numel(), lr, beta1, beta2,
                   eps, weight_decay, bias_step);
}

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t step) {
  require_same_numel("adamw", param, grad);
  require_same_numel("adamw m", param, m);
  require_same_numel("adamw v", param, v);
  const Device dev = op_device("adamw_update", {&param, &grad, &m, &v});
  MDDP_CHECK(step >= 1, "adamw step counts from 1");
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::adamw_update(dev.index, param.data(), grad.data(), m.data(), v.data(), param.numel(),
                         lr, beta1, beta2, eps, weight_decay, step);
    return;
  }
  cpu::adamw_update(param.data(), grad.data(), m.data(), v.data(), param.numel(), lr, beta1, beta2,
                    eps, weight_decay, step);
}

void sum_squares(const Tensor& x, Tensor& out) {
  const Device dev = op_device("sum_squares", {&x, &out});
  MDDP_CHECK_EQ(out.numel(), 1, "sum_squares: out");
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::sum_squares(dev.index, x.data(), x.numel(), out.data());
    return;
  }
  out.data()[0] += static_cast<float>(cpu::sum_squares(x.data(), x.numel()));
}

}  // namespace mddp::tensor
