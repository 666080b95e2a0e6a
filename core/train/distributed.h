// A rank of a data-parallel job: a Trainer on this rank's shard, a
// Communicator to the other ranks, and DistributedDataParallel keeping the
// replicas identical. Used by the worker, `bench train` and `verify`.
#pragma once

#include <memory>

#include "core/comm/communicator.h"
#include "core/ddp/ddp.h"
#include "core/perf/step_metrics.h"
#include "core/train/loop.h"
#include "core/train/trainer.h"

namespace mddp::train {

class DistributedTrainer {
 public:
  // Collective over `comm` (every rank constructs it): builds the model,
  // checks it matches rank 0's and broadcasts rank 0's parameters.
  DistributedTrainer(const TrainConfig& cfg, std::unique_ptr<comm::Communicator> comm);

  Trainer& trainer() { return trainer_; }
  comm::Communicator& comm() { return *comm_; }
  ddp::DistributedDataParallel& ddp() { return *ddp_; }
  // One synchronised optimiser step.
  StepResult step();
  // The metrics record of a step just taken (phases, communication, bucket spans).
  perf::StepMetrics metrics(const StepResult& r) const;
  // Hooks for run_training(): DDP's places in a step, the loss averaged over
  // ranks, rank 0 prints.
  const LoopHooks& loop_hooks() const { return hooks_; }

 private:
  std::unique_ptr<comm::Communicator> comm_;
  Trainer trainer_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  LoopHooks hooks_;
};

// The communicator options a TrainConfig asks for.
comm::CommOptions comm_options(const TrainConfig& cfg);

}  // namespace mddp::train
