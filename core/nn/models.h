// Model builders: FullMLP, a configurable CNN, and the GPT (gpt.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/nn/gpt.h"
#include "core/nn/sequential.h"

namespace mddp::nn {

struct ModelConfig {
  std::string kind = "mlp";  // mlp | cnn | gpt
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
  // GPT: `layers` blocks of `heads` heads over `embd` features, sequences of
  // up to `block` tokens; the vocabulary comes from the data (the trainer
  // sets `vocab` to the dataset's num_classes()).
  int64_t layers = 4, heads = 4, embd = 128, block = 64;
  float dropout = 0.0f;
  int64_t vocab = 0;
  uint64_t seed = 42;
};

// Builds the model for inputs of `sample_shape` ({features}, {C, H, W}, or
// {T} token ids for the GPT); same config and seed give bitwise the same
// initial parameters. The MLP and the CNN are a Sequential, the GPT a Gpt.
// Throws InputError on a config that cannot work (e.g. a CNN on flat vectors).
std::unique_ptr<Module> build_model(const ModelConfig& cfg,
                                    const std::vector<int64_t>& sample_shape,
                                    tensor::Device device = {});

// The MLP or the CNN as the Sequential it is (what code that walks the
// layers takes: the labs, the demos); InputError for another kind.
std::unique_ptr<Sequential> build_sequential(const ModelConfig& cfg,
                                             const std::vector<int64_t>& sample_shape,
                                             tensor::Device device = {});

// The GPT's part of a ModelConfig.
GptConfig gpt_config(const ModelConfig& cfg);

// Before anything is built or loaded: InputError naming --width/--depth,
// --channels/--hidden or --layers/--embd when the model's parameters (a
// lower bound, with `input_features` inputs), their gradients and the
// optimiser's state cannot fit in this machine's memory.
void require_model_fits(const ModelConfig& cfg, int64_t input_features);

}  // namespace mddp::nn
