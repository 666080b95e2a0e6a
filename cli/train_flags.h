// The training flags, shared by every command that trains (train, run,
// coordinator, bench train), so they mean the same everywhere.
#pragma once

#include <CLI/CLI.hpp>

#include "core/train/config.h"

namespace mddp::cli {

void add_training_flags(CLI::App& cmd, train::TrainConfig& cfg);
// --checkpoint-every, --keep-checkpoints, --resume: for the commands that
// write a run directory (train, run, coordinator).
void add_checkpoint_flags(CLI::App& cmd, train::TrainConfig& cfg);
// --ddp, --bucket-mb, ... for the commands that run several ranks.
void add_ddp_flags(CLI::App& cmd, train::TrainConfig& cfg);
// The config table printed once at start (llm.c style).
void print_config(const train::TrainConfig& cfg, int64_t num_parameters, const std::string& model);

}  // namespace mddp::cli
