// The GPT's ops (ops.h "the GPT's ops"): shape and device checks, then the
// backend, as in ops.cc.
#include "core/common/check.h"
#include "core/common/test_mutation.h"
#include "core/tensor/cpu/kernels.h"
#include "core/tensor/cuda/kernels.h"  // declarations only: no CUDA headers
#include "core/tensor/op_dispatch.h"
#include "core/tensor/ops.h"
#include "core/tensor/precision.h"

namespace mddp::tensor {
namespace {

using detail::cpu_gemm;
using detail::kHaveCuda;
using detail::op_device;
using detail::require_same_numel;

// Token ids must index the table's rows; on the CPU they are checked here.
void check_ids_cpu(const Tensor& ids, int64_t vocab) {
  const float* v = ids.data();
  for (int64_t i = 0; i < ids.numel(); ++i)
    MDDP_CHECK(v[i] >= 0 && v[i] < static_cast<float>(vocab) &&
                   v[i] == static_cast<float>(static_cast<int64_t>(v[i])),
               "token id ", v[i], " at position ", i, " is not below the vocabulary size ", vocab);
}

// How many later positions each row of the causal softmax sees: 0, or 1
// under the planted bug causal_mask_off_by_one (CPU only).
int64_t causal_mask_lookahead() {
  return test_mutation("causal_mask_off_by_one") ? 1 : 0;
}

void check_rows(const char* op, const Tensor& x, int64_t n, int64_t c) {
  MDDP_CHECK(x.numel() == n * c, op, ": ", shape_str(x.shape()), " is not [", n, ", ", c, "]");
}

// Where heads' shape [P, B, H, T, D] puts x [B, T, P*H*D].
HeadDims head_dims(const Tensor& x, const Tensor& heads) {
  MDDP_CHECK(heads.ndim() == 5, "heads must be [P, B, H, T, D], got ", shape_str(heads.shape()));
  const HeadDims d{heads.dim(0), heads.dim(1), heads.dim(2), heads.dim(3), heads.dim(4)};
  MDDP_CHECK(x.ndim() == 3 && x.dim(0) == d.b && x.dim(1) == d.t && x.dim(2) == d.p * d.h * d.d,
             "x ", shape_str(x.shape()), " does not split into heads ", shape_str(heads.shape()));
  return d;
}

// [N, T, T] score matrices.
void check_square(const char* op, const Tensor& s) {
  MDDP_CHECK(s.ndim() == 3 && s.dim(1) == s.dim(2), op, ": scores must be [N, T, T], got ",
             shape_str(s.shape()));
}

}  // namespace

void gemm_batched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
                  float beta, Tensor& c) {
  const Device dev = op_device("gemm_batched", {&a, &b, &c});
  MDDP_CHECK(a.ndim() == 3 && b.ndim() == 3 && c.ndim() == 3, "gemm_batched needs 3-D tensors");
  const int64_t batch = c.dim(0);
  const int64_t m = trans_a ? a.dim(2) : a.dim(1), k = trans_a ? a.dim(1) : a.dim(2);
  const int64_t kb = trans_b ? b.dim(2) : b.dim(1), n = trans_b ? b.dim(1) : b.dim(2);
  MDDP_CHECK(a.dim(0) == batch && b.dim(0) == batch && k == kb && c.dim(1) == m && c.dim(2) == n,
             "gemm_batched shapes: a ", shape_str(a.shape()), trans_a ? "^T" : "", " b ",
             shape_str(b.shape()), trans_b ? "^T" : "", " c ", shape_str(c.shape()));
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::gemm_batched(dev.index, gemm_precision(), trans_a, trans_b, batch, m, n, k, alpha,
                         a.data(), b.data(), beta, c.data());
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    cpu_gemm(trans_a, trans_b, m, n, k, alpha, a.data() + i * m * k, b.data() + i * k * n, beta,
             c.data() + i * m * n);
}

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& y) {
  const Device dev = op_device("embedding_forward", {&ids, &table, &y});
  MDDP_CHECK(table.ndim() == 2, "embedding table must be [V, C], got ", shape_str(table.shape()));
  const int64_t n = ids.numel(), vocab = table.dim(0), c = table.dim(1);
  check_rows("embedding_forward y", y, n, c);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::embedding_forward(dev.index, ids.data(), table.data(), n, c, vocab, y.data());
    return;
  }
  check_ids_cpu(ids, vocab);
  cpu::embedding_forward(ids.data(), table.data(), n, c, y.data());
}

void embedding_backward(const Tensor& ids, const Tensor& dy, Tensor& dtable) {
  const Device dev = op_device("embedding_backward", {&ids, &dy, &dtable});
  MDDP_CHECK(dtable.ndim() == 2, "embedding table must be [V, C], got ", shape_str(dtable.shape()));
  const int64_t n = ids.numel(), vocab = dtable.dim(0), c = dtable.dim(1);
  check_rows("embedding_backward dy", dy, n, c);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::embedding_backward(dev.index, ids.data(), dy.data(), n, c, vocab, dtable.data());
    return;
  }
  check_ids_cpu(ids, vocab);
  cpu::embedding_backward(ids.data(), dy.data(), n, c, dtable.data());
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                       Tensor& y, Tensor& mean, Tensor& rstd) {
  const Device dev = op_device("layernorm_forward", {&x, &weight, &bias, &y, &mean, &rstd});
  MDDP_CHECK(x.ndim() == 2, "layernorm: x must be [N, C], got ", shape_str(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1);
  check_rows("layernorm weight", weight, 1, c);
  check_rows("layernorm bias", bias, 1, c);
  check_rows("layernorm y", y, n, c);
  check_rows("layernorm mean", mean, n, 1);
  check_rows("layernorm rstd", rstd, n, 1);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::layernorm_forward(dev.index, x.data(), weight.data(), bias.data(), n, c, eps, y.data(),
                              mean.data(), rstd.data());
    return;
  }
  cpu::layernorm_forward(x.data(), weight.data(), bias.data(), n, c, eps, y.data(), mean.data(),
                         rstd.data());
}

void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dy, Tensor& dx, Tensor& dweight,
                        Tensor& dbias) {
  const Device dev =
      op_device("layernorm_backward", {&x, &weight, &mean, &rstd, &dy, &dx, &dweight, &dbias});
  MDDP_CHECK(x.ndim() == 2, "layernorm: x must be [N, C], got ", shape_str(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1);
  using List = std::initializer_list<const Tensor*>;
  for (const Tensor* t : List{&weight, &dweight, &dbias}) check_rows("layernorm param", *t, 1, c);
  for (const Tensor* t : List{&dy, &dx}) check_rows("layernorm dy/dx", *t, n, c);
  for (const Tensor* t : List{&mean, &rstd}) check_rows("layernorm mean/rstd", *t, n, 1);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::layernorm_backward(dev.index, x.data(), weight.data(), mean.data(), rstd.data(),
                               dy.data(), n, c, dx.data(), dweight.data(), dbias.data());
    return;
  }
  cpu::layernorm_backward(x.data(), weight.data(), mean.data(), rstd.data(), dy.data(), n, c,
                          dx.data(), dweight.data(), dbias.data());
}

void gelu_forward(const Tensor& x, Tensor& y) {
  require_same_numel("gelu_forward", x, y);
  const Device dev = op_device("gelu_forward", {&x, &y});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::gelu_forward(dev.index, x.data(), y.data(), x.numel());
    return;
  }
  cpu::gelu_forward(x.data(), y.data(), x.numel());
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  require_same_numel("gelu_backward", x, dy);
  require_same_numel("gelu_backward", x, dx);
  const Device dev = op_device("gelu_backward", {&x, &dy, &dx});
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::gelu_backward(dev.index, x.data(), dy.data(), dx.data(), x.numel());
    return;
  }
  cpu::gelu_backward(x.data(), dy.data(), dx.data(), x.numel());
}

void split_heads(const Tensor& x, Tensor& heads) {
  const Device dev = op_device("split_heads", {&x, &heads});
  const HeadDims d = head_dims(x, heads);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::split_heads(dev.index, x.data(), d, heads.data());
    return;
  }
  cpu::split_heads(x.data(), d, heads.data());
}

void merge_heads(const Tensor& heads, Tensor& x) {
  const Device dev = op_device("merge_heads", {&heads, &x});
  const HeadDims d = head_dims(x, heads);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::merge_heads(dev.index, heads.data(), d, x.data());
    return;
  }
  cpu::merge_heads(heads.data(), d, x.data());
}

void causal_softmax_forward(const Tensor& scores, Tensor& probs) {
  const Device dev = op_device("causal_softmax_forward", {&scores, &probs});
  check_square("causal_softmax_forward", scores);
  require_same_numel("causal_softmax_forward", scores, probs);
  const int64_t n = scores.dim(0), t = scores.dim(1);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::causal_softmax_forward(dev.index, scores.data(), n, t, probs.data());
    return;
  }
  cpu::causal_softmax_forward(scores.data(), n, t, probs.data(), causal_mask_lookahead());
}

void causal_softmax_backward(const Tensor& probs, const Tensor& dprobs, Tensor& dscores) {
  const Device dev = op_device("causal_softmax_backward", {&probs, &dprobs, &dscores});
  check_square("causal_softmax_backward", probs);
  require_same_numel("causal_softmax_backward", probs, dprobs);
  require_same_numel("causal_softmax_backward", probs, dscores);
  const int64_t n = probs.dim(0), t = probs.dim(1);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda)
      cuda::causal_softmax_backward(dev.index, probs.data(), dprobs.data(), n, t, dscores.data());
    return;
  }
  cpu::causal_softmax_backward(probs.data(), dprobs.data(), n, t, dscores.data(),
                               causal_mask_lookahead());
}

void dropout(const Tensor& x, float p, uint64_t seed, Tensor& y) {
  require_same_numel("dropout", x, y);
  const Device dev = op_device("dropout", {&x, &y});
  MDDP_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1), got ", p);
  if (dev.is_cuda()) {
    if constexpr (kHaveCuda) cuda::dropout(dev.index, x.data(), x.numel(), p, seed, y.data());
    return;
  }
  cpu::dropout(x.data(), x.numel(), p, seed, y.data());
}

}  // namespace mddp::tensor
