// Datasets hand out batches by sample index, so a sampler decides which
// rank sees which samples. Targets are either class indices (stored as
// floats, one per sample, or one per position for text: a window's next
// tokens) or regression vectors.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/tensor/tensor.h"

namespace mddp::data {

// How a raw sample becomes the model's input: x = (raw / scale - mean) / std.
// Checkpoints record it, so that another program can feed the model.
struct InputEncoding {
  std::string raw = "float32";  // "uint8" (IDX pixels) or "float32" (synthetic: used as generated)
  float scale = 1, mean = 0, std = 1;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Shape of one input sample, e.g. {784} for a flat vector or {1, 28, 28} for an image.
  virtual tensor::Shape sample_shape() const = 0;
  // 0 for class-index targets, else the length of a regression target vector.
  virtual int64_t target_dim() const = 0;
  virtual int64_t num_classes() const = 0;  // 0 for regression; the vocabulary size for text
  virtual std::string name() const = 0;
  virtual InputEncoding input_encoding() const { return {}; }
  // Class-index targets per sample: 1, or the window length for text, whose
  // every position predicts the next token (y is then [B, targets_per_sample]).
  virtual int64_t targets_per_sample() const { return 1; }
  // The characters of a tokenizer's vocabulary in id order, as UTF-8; "" for
  // data that is not text. Checkpoints record it, so ids can be read back.
  virtual std::string vocabulary() const { return ""; }
  // Fills x [B, sample_shape...] and y ([B] class indices, [B, targets_per_sample]
  // of them, or [B, target_dim]) with the samples at `indices` (B =
  // indices.size()); x and y are preallocated.
  virtual void get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                         tensor::Tensor& y) const = 0;
};

}  // namespace mddp::data
