// An image-classification dataset stored as IDX files in one directory, laid
// out like MNIST and Fashion-MNIST:
//
//   train-images-idx3-ubyte[.gz]  train-labels-idx1-ubyte[.gz]
//   t10k-images-idx3-ubyte[.gz]   t10k-labels-idx1-ubyte[.gz]
//
// Pixels are kept as bytes (a quarter of the memory of floats) and turned into
// floats per batch: x = (p / 255 - mean) / std. The defaults are Fashion-MNIST's
// training-set statistics (mean 0.2860, std 0.3530 of the [0, 1]-scaled pixels),
// so inputs are roughly zero-mean and unit-variance; for MNIST the usual values
// are 0.1307 and 0.3081.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "core/data/split.h"

namespace mddp::data {

struct IdxNormalization {
  float mean = 0.2860f;  // Fashion-MNIST train mean of pixel / 255
  float std = 0.3530f;   // Fashion-MNIST train std of pixel / 255
};

class IdxDataset final : public Dataset {
 public:
  // Loads `split` from `dir`; a file may be plain or gzipped (plain wins when both exist).
  // num_classes > 0 checks every label against it; 0 infers max label + 1.
  // `known` names the dataset the files must be (known_files.h); "" checks
  // them against the known dataset either file's sum names, if any.
  // Throws InputError naming the file for anything missing, malformed or
  // not matching its known sum.
  IdxDataset(const std::string& dir, Split split, std::string name = "", int64_t num_classes = 0,
             const std::string& known = "", IdxNormalization norm = {});

  int64_t size() const override { return count_; }
  tensor::Shape sample_shape() const override { return {1, rows_, cols_}; }
  int64_t target_dim() const override { return 0; }
  int64_t num_classes() const override { return num_classes_; }
  std::string name() const override { return name_; }
  InputEncoding input_encoding() const override { return {"uint8", 255.0f, norm_.mean, norm_.std}; }
  // x [B, 1, rows, cols] normalised pixels, y [B] class indices as floats.
  void get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                 tensor::Tensor& y) const override;

  // The raw label of sample i (for tests and class histograms).
  int label(int64_t i) const { return labels_.at(static_cast<std::size_t>(i)); }

 private:
  std::string name_;
  IdxNormalization norm_;
  int64_t count_ = 0, rows_ = 0, cols_ = 0, num_classes_ = 0;
  std::vector<uint8_t> pixels_;   // [count, rows, cols]
  std::vector<uint8_t> labels_;   // [count]
  std::array<float, 256> lut_{};  // byte -> normalised float, so every batch maps identically
};

// The path of `stem` in `dir`, or of `stem`.gz; throws InputError if neither exists.
std::string find_idx_file(const std::string& dir, const std::string& stem);

}  // namespace mddp::data
