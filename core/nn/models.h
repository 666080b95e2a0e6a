// Model builders: FullMLP and a configurable CNN.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/nn/sequential.h"

namespace mddp::nn {

struct ModelConfig {
  std::string kind = "mlp";  // mlp | cnn
  // FullMLP: depth x (Linear + ReLU) of `width`, then a Linear head to
  // `classes`. The first Linear maps the input size to width (for a
  // square model, input size == width). classes == 0: no head, and no ReLU
  // after the last layer (the benchmark's 16 square layers with MSE).
  int64_t width = 256;
  int64_t depth = 2;
  int64_t classes = 10;
  // CNN: per entry, Conv3x3(c) + ReLU + MaxPool2; then Flatten, Linear(hidden) + ReLU,
  // Linear(classes).
  std::vector<int64_t> channels = {32, 64, 128};
  int64_t hidden = 512;
  uint64_t seed = 42;
};

// Builds the model for inputs of `sample_shape` ({features} or {C, H, W});
// same config and seed give bitwise the same initial parameters. Throws
// InputError on a config that cannot work (e.g. a CNN on flat vectors).
std::unique_ptr<Sequential> build_model(const ModelConfig& cfg,
                                        const std::vector<int64_t>& sample_shape,
                                        tensor::Device device = {});

// Before anything is built or loaded: InputError naming --width/--depth or
// --channels/--hidden when the model's parameters (a lower bound, with
// `input_features` inputs), their gradients and the optimiser's state
// cannot fit in this machine's memory.
void require_model_fits(const ModelConfig& cfg, int64_t input_features);

}  // namespace mddp::nn
