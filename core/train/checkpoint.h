// microddp's checkpoint: a pair of safetensors files with one stem
// (docs/checkpoints.md is the full definition):
//
//   STEM.safetensors        the model alone: F32 weights under PyTorch's
//                           state_dict names, so torch.nn.Sequential(...)
//                           .load_state_dict() takes the file as it is; the
//                           metadata says how to rebuild and feed the model.
//   STEM.state.safetensors  what resuming needs beyond the weights: the
//                           optimiser's tensors and step, the trainer's step,
//                           the data order, the seeds and the job's
//                           configuration fingerprint.
//
// Both carry the same checkpoint_id (a hash of both files' tensors and the
// step): a pair is complete when both exist and the ids match.
//
// Note [Pair order]: both files are written to temporary files and synced
// first; only then are they renamed over the real names, the state file
// first. A write that fails (full disk, read-only directory) changes no file
// under a real name. A crash between the two renames leaves that stem torn
// (a new state file beside the old model file: the ids differ), which
// readers refuse and find_checkpoint passes over, taking the newest complete
// pair instead (a periodic checkpoint, which has a stem of its own).
//
// Where a run puts them: RUN/checkpoints/step-00000050.{safetensors,
// state.safetensors} every --checkpoint-every steps (the newest
// --keep-checkpoints kept), and RUN/checkpoint.{...} at the end.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/train/safetensors.h"

namespace mddp::train {

inline constexpr const char* kCheckpointFormat = "microddp-checkpoint/2";

// "DIR/x.safetensors" -> "DIR/x.state.safetensors".
std::string state_path_of(const std::string& model_path);
std::string final_checkpoint_path(const std::string& run_dir);  // RUN/checkpoint.safetensors
std::string periodic_checkpoint_path(const std::string& run_dir,
                                     int64_t step);  // RUN/checkpoints/step-%08d.safetensors

// What one checkpoint holds; write_checkpoint adds format, step,
// checkpoint_id and microddp_version to both files' metadata.
struct CheckpointContents {
  int64_t step = 0;  // optimiser steps taken
  std::vector<NamedTensor> weights;
  std::map<std::string, std::string> model_metadata;
  std::vector<NamedTensor> state;
  std::map<std::string, std::string> state_metadata;
};

// Writes the pair for `model_path` (state file first; creates the directory).
// Throws Error naming the file on failure; an earlier pair is never touched.
void write_checkpoint(const std::string& model_path, const CheckpointContents& contents);

struct Checkpoint {
  std::string path, state_path;  // the model file and its state file
  std::string id;
  int64_t step = 0;
  Safetensors model, state;
};

// Reads and checks a complete pair: both files valid, every tensor matching
// its checksum, both of this format, the same checkpoint_id and step. Throws
// InputError naming the file and what is wrong (missing state file, foreign
// file, torn pair, damaged tensor, ...).
Checkpoint read_checkpoint(const std::string& model_path);

// What --resume (or sample's --checkpoint) names, as the model file of one
// pair: FILE (either file of a pair), or DIR: the complete, undamaged pair
// with the highest step among DIR/checkpoint.safetensors,
// DIR/checkpoints/*.safetensors and DIR/*.safetensors. Incomplete pairs (e.g.
// from a crash between the two renames) and damaged ones (a tensor that fails
// its checksum, Note [Tensor checksums] in safetensors.h) are passed over,
// each with a warning line naming it and why. Throws InputError when there
// is none, its message starting with `flag`, the option that named the path.
std::string find_checkpoint(const std::string& dir_or_file, const std::string& flag = "--resume");

// Deletes all but the newest `keep` periodic pairs in RUN/checkpoints (keep 0: none deleted).
void prune_checkpoints(const std::string& run_dir, int64_t keep);

}  // namespace mddp::train
