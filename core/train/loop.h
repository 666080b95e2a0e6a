// The epoch loop shared by `microddp train` and the DDP worker: steps,
// evaluation at each epoch end, progress, run-directory log and checkpoint.
#pragma once

#include <functional>
#include <string>

#include "core/train/trainer.h"

namespace mddp::train {

struct LoopHooks {
  StepHooks step;                                            // DDP's places in a step
  std::function<void(const StepResult&)> on_step;            // metrics
  std::function<void(int64_t step, const EvalResult&)> on_eval;  // after each epoch's evaluation
  std::function<double(double)> global_mean;                 // DDP: mean of a scalar over ranks
  bool print = true;                                         // rank 0 prints, others stay quiet
};

struct TrainSummary {
  int64_t steps = 0;
  double seconds = 0;
  double samples_per_s = 0;  // global samples per second
  double final_loss = 0;     // mean over ranks of the last step's loss
  EvalResult eval;           // after the last epoch (accuracy -1: none)
  std::string lost_records;  // train.jsonl's records that could not be written (TrainLog::lost), "" if none
};

// Runs all steps of `trainer`; writes <run_dir>/train.jsonl and
// <run_dir>/checkpoint.safetensors when the config names a run directory.
TrainSummary run_training(Trainer& trainer, const LoopHooks& hooks = {});

}  // namespace mddp::train
