// The metadata of a checkpoint (docs/checkpoints.md): JSON documents a
// program reads to rebuild and feed the model, and the job's configuration
// fingerprint that a resume must match.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/data/dataset.h"
#include "core/nn/module.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"

namespace mddp::train {

// {"type": "Sequential", "layers": [{"type": "Linear", "in_features": 784, ...}, ...],
//  "input_shape": [1, 28, 28], "loss": "CrossEntropyLoss", "parameters": N, "summary": "..."}
// Layer types and arguments are torch.nn's (nn::LayerSpec). The GPT is
// described by its config instead, nanoGPT's GPTConfig:
// {"type": "GPT", "config": {"vocab_size": 65, "block_size": 64, "n_layer": 4,
//  "n_head": 4, "n_embd": 128, "dropout": 0, "bias": true},
//  "tied": {"lm_head.weight": "transformer.wte.weight"}, "input_shape": [64], ...}
std::string model_json(nn::Module& model, const tensor::Shape& sample_shape,
                       const std::string& loss);
// {"raw": "uint8", "scale": 255, "mean": 0.286, "std": 0.353, "formula": "x = (raw / scale - mean)
// / std"}
std::string input_json(const data::Dataset& d);
// {"spec": "fashion-mnist", "source": DIR, "classes": 10, "class_names": [...], "sample_shape":
// [...], "train_samples": N}; text data adds "vocabulary": its characters in id order.
std::string dataset_json(const std::string& spec, const data::Dataset& d);
// Throws InputError (prefixed by `what`) when the model file `file` records
// a vocabulary other than `d`'s, naming both sizes and the first character
// that differs: the model's token ids would mean other characters. A file
// without a `dataset` document (a PyTorch state_dict) records none: passed.
void check_vocabulary(const Safetensors& file, const data::Dataset& d, const std::string& what);

// Replaces `model`'s weights by the file's (copy_tensors_by_name over its
// parameters): names and shapes must match exactly.
void copy_model_weights(nn::Module& model, const Safetensors& file, const std::string& what);

// What must be the same to resume bitwise, by flag: "--lr" -> "0.001", ...
// The world size is "--nproc"; the DDP flags count only with more than one rank.
std::map<std::string, std::string> config_fingerprint(const TrainConfig& cfg, int world_size);

// Where training stands, for the state file.
struct TrainingProgress {
  int64_t step = 0;             // optimiser steps taken
  int64_t steps_per_epoch = 0;  // of the sampler
  int64_t dataset_size = 0;
  int64_t optimizer_steps = 0;
};
// The state file's metadata: "config" (the fingerprint), "optimizer",
// "sampler" (epoch and position of the next step) and "random" (the seeds
// every random stream derives from), each a JSON object.
std::map<std::string, std::string> state_metadata(const TrainConfig& cfg, int world_size,
                                                  const TrainingProgress& p);

// Throws InputError when the checkpoint cannot be resumed by `cfg` on
// `world_size` ranks: another job (every differing flag listed with both
// values) or nothing left to train (its step >= the steps asked for).
void check_resumable(const Checkpoint& c, const TrainConfig& cfg, int world_size);
// cfg.resume resolved (find_checkpoint), read and checked as above, where
// a job starts (the coordinator, before any worker joins): the checkpoint.
Checkpoint checked_resume(const TrainConfig& cfg, int world_size);
// Where a trainer starts: cfg.resume (checked_resume), or with
// cfg.resume_latest the newest complete checkpoint in cfg.run_dir when it
// is further (a restarted attempt, docs/recovery.md); nullopt: from the start.
std::optional<Checkpoint> resume_point(const TrainConfig& cfg, int world_size);
// The world size a checkpoint was written by (its fingerprint's --nproc; 0 if absent).
int checkpoint_world_size(const Checkpoint& c);

}  // namespace mddp::train
