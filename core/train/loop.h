// The epoch loop shared by `microddp train` and the DDP worker: steps,
// evaluation at each epoch end, progress, run-directory log and checkpoint.
#pragma once

#include <functional>
#include <string>

#include "core/train/trainer.h"

namespace mddp::train {

struct LoopHooks {
  StepHooks step;                                                // DDP's places in a step
  std::function<void(const StepResult&)> on_step;                // metrics
  std::function<void(int64_t step, const EvalResult&)> on_eval;  // after each epoch's evaluation
  std::function<double(double)> global_mean;                     // DDP: mean of a scalar over ranks
  // On every rank, after each step (final: false) and once after the last
  // (final: true), before rank 0 would write a checkpoint there: ZeRO-1
  // gathers its optimiser state when the job's checkpoint schedule says so,
  // and the replica check runs when due (DistributedTrainer).
  std::function<void(int64_t step, bool final)> before_checkpoint;
  bool print = true;  // rank 0 prints, others stay quiet
};

struct TrainSummary {
  int64_t steps = 0;  // taken by this call (fewer than the total after --resume)
  double seconds = 0;
  double samples_per_s = 0;  // global samples per second
  double tokens_per_s = 0;   // global tokens per second, for a language model (else 0)
  double final_loss = 0;     // mean over ranks of the last step's loss
  EvalResult eval;           // after the last epoch (accuracy -1: none)
  std::string
      lost_records;  // train.jsonl's records that could not be written (TrainLog::lost), "" if none
};

// Runs the steps of `trainer` from where it stands (step 0, or the step a
// checkpoint restored) to the last. When the config names a run directory
// and hooks.print is set (rank 0), writes <run_dir>/train.jsonl, a checkpoint
// every cfg.checkpoint_every steps (<run_dir>/checkpoints/, the newest
// cfg.keep_checkpoints kept) and the final one (<run_dir>/checkpoint.*).
TrainSummary run_training(Trainer& trainer, const LoopHooks& hooks = {});

}  // namespace mddp::train
