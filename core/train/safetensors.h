// The safetensors file layout (https://github.com/huggingface/safetensors),
// which PyTorch, the `safetensors` Python package and any JSON reader open:
//
//   [8 bytes: little-endian u64 N][N bytes: JSON header][raw tensor bytes]
//
// The header maps each tensor name to {"dtype": "F32", "shape": [...],
// "data_offsets": [begin, end]} (byte offsets into the data section) and may
// have a "__metadata__" object of string keys and string values.
// microddp's checkpoints (checkpoint.h) are pairs of such files.
//
// Note [Tensor checksums]
// ~~~~~~~~~~~~~~~~~~~~~~~
// save_safetensors records the SHA-256 of every tensor's bytes in the
// metadata, under "tensor_sha256" (a JSON object: tensor name -> 64 hex
// digits), and load_safetensors recomputes them: one flipped bit in a
// weight or an optimiser state is refused, naming the file and the tensor,
// instead of training on. A value in the header must be a string, so the
// checksums stay invisible to other readers, which ignore unknown metadata.
// SHA-256 because libcrypto is linked already and hashes at about 1.5 GB/s
// with the SHA extensions (docs/checkpoints.md has the measured cost).
// Files without the key (PyTorch's, older microddp's) load unchecked.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor/tensor.h"

namespace mddp::train {

struct NamedTensor {
  std::string name;
  tensor::Tensor value;
};

struct Safetensors {
  std::vector<NamedTensor> tensors;  // CPU tensors, sorted by name
  std::map<std::string, std::string> metadata;
};

// Writes atomically: to a temporary file in the same directory
// (temp_path_for), fsync, rename over `path`, fsync the directory. A reader
// sees the old file or the new one, never a part; after a crash at most a
// temporary file is left (remove_stale_temps). On failure (full disk,
// read-only directory) the temporary file is removed, `path` is untouched,
// and Error says which file and why.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata);

// save_safetensors in two halves, for files that must change together: write
// (and sync) every file's temporary first, the part that can run out of
// space, then commit them, which only renames. write_temp removes its
// temporary file when it fails; discard_temp removes one that was written.
void write_temp(const std::string& path, const std::vector<NamedTensor>& tensors,
                const std::map<std::string, std::string>& metadata);
void commit_temp(const std::string& path);
void discard_temp(const std::string& path);

// Strict: every tensor F32, offsets inside the file and matching the shape,
// metadata values strings. Throws InputError "'PATH' is not a valid
// safetensors file: WHY" (or "cannot open 'PATH': WHY"), or "'PATH' is
// damaged: tensor 'NAME' ..." when a tensor does not match its checksum.
// The checksums are not in the returned metadata.
Safetensors load_safetensors(const std::string& path);
// The header's metadata only (no tensor data is read, none is checked), with
// the same checks of the header.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);

// Copies the file's tensors into `targets` (views of a model's or an
// optimiser's buffers, on any device), whose names and shapes must be
// exactly the file's. Throws InputError prefixed by `what` naming the first
// tensor missing, of another shape, or in the file but not in `targets`.
void copy_tensors_by_name(const std::vector<std::pair<std::string, tensor::Tensor>>& targets,
                          const Safetensors& file, const std::string& what);

// Where save_safetensors writes before the rename: PATH.tmp.HOST.PID.
std::string temp_path_for(const std::string& path);
// Removes the temporary files in `dir` left by dead processes of this host
// (a crash mid-write); returns how many. Files of live processes and of
// other hosts are kept.
int remove_stale_temps(const std::string& dir);

}  // namespace mddp::train
