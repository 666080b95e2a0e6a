// Synthetic datasets with a known teacher, so a run can be checked against the
// truth: X ~ N(0, 1) and a fixed random linear map W* ~ N(0, 1/in_dim) (the
// 1/in_dim keeps X·W* at unit variance whatever the width).
//
//   SyntheticRegression:     y = X·W* + noise·N(0, 1)       (a regression with a known answer)
//   SyntheticClassification: label = argmax_c (X·W*)[c]     (linearly separable, so learnable)
//
// Every sample is generated once, at construction, from mddp::Rng: the same
// seeds give the same data bit for bit on every machine. The teacher has its own
// seed so that a train and a test set can share W* while drawing different X.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/data/dataset.h"

namespace mddp::data {

class SyntheticRegression final : public Dataset {
 public:
  // n samples of in_dim inputs and out_dim targets. X and noise come from `seed`,
  // W* from `teacher_seed` (default: `seed`).
  SyntheticRegression(int64_t n, int64_t in_dim, int64_t out_dim, float noise, uint64_t seed,
                      std::optional<uint64_t> teacher_seed = std::nullopt);

  int64_t size() const override { return n_; }
  tensor::Shape sample_shape() const override { return {in_dim_}; }
  int64_t target_dim() const override { return out_dim_; }
  int64_t num_classes() const override { return 0; }
  std::string name() const override { return "synthetic-regression"; }
  // x [B, in_dim], y [B, out_dim].
  void get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                 tensor::Tensor& y) const override;

  const std::vector<float>& teacher() const { return w_; }  // W* [in_dim, out_dim], row-major

 private:
  int64_t n_, in_dim_, out_dim_;
  std::vector<float> w_;  // [in_dim, out_dim]
  std::vector<float> x_;  // [n, in_dim]
  std::vector<float> y_;  // [n, out_dim]
};

class SyntheticClassification final : public Dataset {
 public:
  // n samples of in_dim inputs labelled with one of `classes` classes. X from
  // `seed`, W* [in_dim, classes] from `teacher_seed` (default: `seed`).
  SyntheticClassification(int64_t n, int64_t in_dim, int64_t classes, uint64_t seed,
                          std::optional<uint64_t> teacher_seed = std::nullopt);

  int64_t size() const override { return n_; }
  tensor::Shape sample_shape() const override { return {in_dim_}; }
  int64_t target_dim() const override { return 0; }
  int64_t num_classes() const override { return classes_; }
  std::string name() const override { return "synthetic"; }
  // x [B, in_dim], y [B] class indices as floats.
  void get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                 tensor::Tensor& y) const override;

  const std::vector<float>& teacher() const { return w_; }  // W* [in_dim, classes], row-major
  int label(int64_t i) const { return labels_.at(static_cast<std::size_t>(i)); }

 private:
  int64_t n_, in_dim_, classes_;
  std::vector<float> w_;     // [in_dim, classes]
  std::vector<float> x_;     // [n, in_dim]
  std::vector<int> labels_;  // [n]
};

}  // namespace mddp::data
