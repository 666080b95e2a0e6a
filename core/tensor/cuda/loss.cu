// The label ops: softmax cross-entropy forward/backward and count_correct.
// Labels are class indices stored as floats on the GPU; the kernels check
// them (the host cannot without a copy) and report the first bad row, which
// ops.cc turns into the same error the CPU path raises.
#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"

namespace mddp::tensor::cuda {
namespace {

// One block walks all rows: fixed summation order, and a loss over a batch is small work.
constexpr int kRowThreads = 256;

// The CPU's rule: an integral value in [0, classes). NaN fails the first test.
__device__ bool is_class_index(float label, int64_t classes) {
  return label >= 0.0f && label < static_cast<float>(classes) && label == truncf(label);
}

// Softmax of row i into probs; returns the row's cross-entropy, in the
// log-sum-exp form of cpu/kernels.cc (no log of 0, no overflow).
struct XentRow {
  const float* logits;
  float* probs;
  int64_t classes;
  __device__ double operator()(int64_t i, int64_t label) const {
    const float* row = logits + i * classes;
    float* prow = probs + i * classes;
    float mx = row[0];
    for (int64_t j = 1; j < classes; ++j) mx = fmaxf(mx, row[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < classes; ++j) sum += (prow[j] = expf(row[j] - mx));
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < classes; ++j) prow[j] *= inv;
    return -(row[label] - mx - logf(sum));
  }
};

// 1 when the row's first arg-max is its label.
struct CorrectRow {
  const float* logits;
  int64_t classes;
  __device__ double operator()(int64_t i, int64_t label) const {
    const float* row = logits + i * classes;
    int64_t arg = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (row[j] > row[arg]) arg = j;
    return arg == label ? 1.0 : 0.0;
  }
};

// Sums row_op over the rows with a valid label; records the first row without one.
template <typename RowOp>
__global__ void label_rows_kernel(RowOp row_op, const float* labels, int64_t n, int64_t classes,
                                  Scalars* out) {
  double total = 0.0;
  unsigned long long bad = kNoBadRow;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float label = labels[i];
    if (is_class_index(label, classes))
      total += row_op(i, static_cast<int64_t>(label));
    else
      bad = min(bad, static_cast<unsigned long long>(i));
  }
  total = block_reduce(total, Sum{});
  bad = block_reduce(bad, Min{});
  if (threadIdx.x == 0) {
    out->sum = total;
    out->first_bad_row = bad;
  }
}

// dlogits = (probs - onehot(label)) / N, element by element.
struct XentBackward {
  const float *probs, *labels;
  int64_t classes;
  float inv_n;
  float* dlogits;
  unsigned long long* first_bad_row;
  __device__ void operator()(int64_t i) const {
    const int64_t row = i / classes, j = i % classes;
    const float label = labels[row];
    float g = probs[i] * inv_n;
    if (!is_class_index(label, classes)) {
      if (j == 0 && first_bad_row) atomicMin(first_bad_row, static_cast<unsigned long long>(row));
    } else if (j == static_cast<int64_t>(label)) {
      g -= inv_n;
    }
    dlogits[i] = g;
  }
};

int64_t bad_row_of(const Scalars& s) {
  return s.first_bad_row == kNoBadRow ? -1 : static_cast<int64_t>(s.first_bad_row);
}

template <typename RowOp>
Scalars sum_label_rows(const Context& ctx, const RowOp& row_op, const float* labels, int64_t n,
                       int64_t classes) {
  label_rows_kernel<<<1, kRowThreads, 0, ctx.stream>>>(row_op, labels, n, classes, ctx.scalars);
  MDDP_CUDA_CHECK_LAUNCH("label_rows_kernel");
  return read_scalars(ctx);
}

}  // namespace

float softmax_xent_forward(int device, const float* logits, const float* labels, int64_t n,
                           int64_t classes, float* probs, int64_t& bad_row) {
  bad_row = -1;
  if (n == 0) return 0.0f;
  const Scalars s =
      sum_label_rows(context(device), XentRow{logits, probs, classes}, labels, n, classes);
  bad_row = bad_row_of(s);
  return static_cast<float>(s.sum / static_cast<double>(n));
}

int64_t count_correct(int device, const float* logits, const float* labels, int64_t n,
                      int64_t classes, int64_t& bad_row) {
  bad_row = -1;
  if (n == 0) return 0;
  const Scalars s =
      sum_label_rows(context(device), CorrectRow{logits, classes}, labels, n, classes);
  bad_row = bad_row_of(s);
  return static_cast<int64_t>(s.sum);
}

void softmax_xent_backward(int device, const float* probs, const float* labels, int64_t n,
                           int64_t classes, float* dlogits, bool check_labels, int64_t& bad_row) {
  bad_row = -1;
  if (n == 0) return;
  if (classes == 0) {  // no index is below 0: every row is bad
    bad_row = 0;
    return;
  }
  const Context& ctx = context(device);
  if (check_labels) reset_bad_row(ctx);
  for_each_index(ctx, n * classes,
                 XentBackward{probs, labels, classes, 1.0f / static_cast<float>(n), dlogits,
                              check_labels ? &ctx.scalars->first_bad_row : nullptr});
  if (check_labels) bad_row = bad_row_of(read_scalars(ctx));
}

}  // namespace mddp::tensor::cuda
