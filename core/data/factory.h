// Builds a dataset from its command-line spec:
//
//   synthetic              classification, label = argmax(X·W*)     (default)
//   synthetic-regression   y = X·W* + noise
//   synthetic-tokens       token windows of a random Markov chain (the GPT's; synthetic_tokens.h)
//   fashion-mnist          /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)
//   idx:DIR                any MNIST-layout IDX directory
//   text:PATH              a text file or a folder of them, as character windows (text_dataset.h)
//
// For synthetic data the train and test splits draw different samples from
// the same teacher W*, so test accuracy measures generalisation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "core/data/split.h"

namespace mddp::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct DatasetConfig {
  std::string spec = "synthetic";
  int64_t synthetic_size = 8192;  // training samples of synthetic data
  int64_t synthetic_test_size =
      0;                    // test samples; 0 = a quarter of synthetic_size (2048 by default)
  int64_t input_dim = 128;  // synthetic input width
  int64_t classes = 10;     // synthetic classification classes; synthetic-tokens' vocabulary
  int64_t target_dim = 0;   // synthetic regression target width; 0 = input_dim
  float noise = 0.1f;       // synthetic regression noise std
  int64_t block = 64;       // text: the context length, tokens per window
  uint64_t seed = 0;
};

// The accepted specs, for help texts and error messages.
std::string dataset_choices();

// The directory (or, for text, the file) holding the data of `spec` ("" for synthetic data), and
// its class names where they are known (Fashion-MNIST's; else empty). For checkpoints.
std::string dataset_source(const std::string& spec);
std::vector<std::string> class_names(const std::string& spec);

// Throws InputError for an unknown spec, bad sizes, or missing/malformed files.
std::unique_ptr<Dataset> make_dataset(const DatasetConfig& config, Split split);

}  // namespace mddp::data
