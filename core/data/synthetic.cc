#include "core/data/synthetic.h"

#include <algorithm>
#include <cmath>

#include "core/common/check.h"
#include "core/common/memory.h"
#include "core/common/rng.h"
#include "core/data/batch_fill.h"
#include "core/data/seeds.h"

namespace mddp::data {
namespace {

// Purposes for derive_seed: one stream for the teacher, one for the samples.
constexpr uint64_t kTeacherStream = 0x7465616368657221ULL;  // "teacher!"
constexpr uint64_t kSampleStream = 0x73616d706c657321ULL;   // "samples!"

void check_sizes(const char* what, int64_t n, int64_t in_dim, int64_t out_dim,
                 const char* out_name) {
  if (n <= 0) throw InputError(str(what, ": the number of samples must be > 0 (got ", n, ")"));
  if (in_dim <= 0)
    throw InputError(str(what, ": the input dimension must be > 0 (got ", in_dim, ")"));
  if (out_dim <= 0) throw InputError(str(what, ": ", out_name, " must be > 0 (got ", out_dim, ")"));
  // Everything is held in host memory; refuse sizes that cannot fit (or would overflow) up front.
  constexpr int64_t kMaxElements = int64_t{1} << 32;
  if (in_dim > kMaxElements / out_dim || n > kMaxElements / (in_dim + out_dim))
    throw InputError(str(what, ": ", n, " samples of ", in_dim, " -> ", out_dim,
                         " is too large to generate in memory"));
  require_memory(4.0 * static_cast<double>(n * (in_dim + out_dim) + in_dim * out_dim),
                 str(what, ": ", n, " samples of ", in_dim, " -> ", out_dim));
}

std::vector<float> normal_values(Rng& rng, int64_t count, float scale) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& e : v) e = scale * rng.normal();
  return v;
}

// out[n, cols] = x[n, in_dim] · w[in_dim, cols], accumulated in double so the
// teacher's outputs do not depend on summation-order rounding subtleties.
std::vector<double> matmul(const std::vector<float>& x, const std::vector<float>& w, int64_t n,
                           int64_t in_dim, int64_t cols) {
  std::vector<double> out(static_cast<std::size_t>(n * cols), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double* row = out.data() + i * cols;
    for (int64_t k = 0; k < in_dim; ++k) {
      const double xv = x[i * in_dim + k];
      const float* wk = w.data() + k * cols;
      for (int64_t c = 0; c < cols; ++c) row[c] += xv * wk[c];
    }
  }
  return out;
}

void copy_rows(std::span<const int64_t> indices, const std::vector<float>& src, int64_t width,
               int64_t n, std::span<float> out) {
  for (std::size_t b = 0; b < indices.size(); ++b) {
    const int64_t i = indices[b];
    MDDP_CHECK(i >= 0 && i < n, "sample index ", i, " out of range [0, ", n, ")");
    std::copy_n(src.data() + i * width, width, out.data() + static_cast<int64_t>(b) * width);
  }
}

}  // namespace

SyntheticRegression::SyntheticRegression(int64_t n, int64_t in_dim, int64_t out_dim, float noise,
                                         uint64_t seed, std::optional<uint64_t> teacher_seed)
    : n_(n), in_dim_(in_dim), out_dim_(out_dim) {
  check_sizes("synthetic-regression", n, in_dim, out_dim, "the target dimension");
  if (!(noise >= 0.0f))
    throw InputError(str("synthetic-regression: noise must be >= 0 (got ", noise, ")"));
  Rng teacher_rng(derive_seed(teacher_seed.value_or(seed), kTeacherStream));
  w_ = normal_values(teacher_rng, in_dim * out_dim, 1.0f / std::sqrt(static_cast<float>(in_dim)));

  Rng rng(derive_seed(seed, kSampleStream));
  x_ = normal_values(rng, n * in_dim, 1.0f);
  const std::vector<double> clean = matmul(x_, w_, n, in_dim, out_dim);
  y_.resize(clean.size());
  for (std::size_t k = 0; k < clean.size(); ++k)
    y_[k] = static_cast<float>(clean[k]) + noise * rng.normal();
}

void SyntheticRegression::get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                                    tensor::Tensor& y) const {
  const auto batch = static_cast<int64_t>(indices.size());
  detail::fill_host(x, batch * in_dim_, "x",
                    [&](std::span<float> out) { copy_rows(indices, x_, in_dim_, n_, out); });
  detail::fill_host(y, batch * out_dim_, "y",
                    [&](std::span<float> out) { copy_rows(indices, y_, out_dim_, n_, out); });
}

SyntheticClassification::SyntheticClassification(int64_t n, int64_t in_dim, int64_t classes,
                                                 uint64_t seed,
                                                 std::optional<uint64_t> teacher_seed)
    : n_(n), in_dim_(in_dim), classes_(classes) {
  check_sizes("synthetic", n, in_dim, classes, "the number of classes");
  if (classes < 2) throw InputError(str("synthetic: needs at least 2 classes (got ", classes, ")"));
  Rng teacher_rng(derive_seed(teacher_seed.value_or(seed), kTeacherStream));
  w_ = normal_values(teacher_rng, in_dim * classes, 1.0f / std::sqrt(static_cast<float>(in_dim)));

  Rng rng(derive_seed(seed, kSampleStream));
  x_ = normal_values(rng, n * in_dim, 1.0f);
  const std::vector<double> logits = matmul(x_, w_, n, in_dim, classes);
  labels_.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double* row = logits.data() + i * classes;
    labels_[i] =
        static_cast<int>(std::max_element(row, row + classes) - row);  // first max wins ties
  }
}

void SyntheticClassification::get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                                        tensor::Tensor& y) const {
  const auto batch = static_cast<int64_t>(indices.size());
  detail::fill_host(x, batch * in_dim_, "x",
                    [&](std::span<float> out) { copy_rows(indices, x_, in_dim_, n_, out); });
  detail::fill_host(y, batch, "y", [&](std::span<float> out) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t i = indices[b];
      MDDP_CHECK(i >= 0 && i < n_, "sample index ", i, " out of range [0, ", n_, ")");
      out[b] = static_cast<float>(labels_[i]);
    }
  });
}

}  // namespace mddp::data
