// Checkpoints in the safetensors layout, so other tools (the `safetensors`
// Python package, PyTorch, any JSON reader) can read them:
//
//   [8 bytes: little-endian u64 N][N bytes: JSON header][raw tensor bytes]
//
// The header maps each tensor name to {"dtype": "F32", "shape": [...],
// "data_offsets": [begin, end]} (offsets into the data section) and has a
// "__metadata__" object of string key/values (step, model, microddp version).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace mddp::train {

struct NamedTensor {
  std::string name;
  tensor::Tensor value;
};

// Writes atomically (to path + ".tmp", then rename). Throws Error on I/O failure.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata);

struct LoadedCheckpoint {
  std::vector<NamedTensor> tensors;  // CPU tensors, sorted by name
  std::map<std::string, std::string> metadata;
};
// Throws InputError naming the file if it is not a valid F32 safetensors file.
LoadedCheckpoint load_safetensors(const std::string& path);

}  // namespace mddp::train
