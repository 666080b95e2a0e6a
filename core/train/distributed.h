// A rank of a data-parallel job: a Trainer on this rank's shard, a
// ProcessGroup to the other ranks (the CPU Communicator, or NCCL when the
// model is on a GPU), and DistributedDataParallel keeping the replicas
// identical. Used by the worker, `bench train` and `verify`.
#pragma once

#include <memory>
#include <string>

#include "core/comm/communicator.h"
#include "core/comm/nccl/nccl.h"
#include "core/ddp/ddp.h"
#include "core/perf/step_metrics.h"
#include "core/train/loop.h"
#include "core/train/sharded_optimizer.h"
#include "core/train/trainer.h"

namespace mddp::train {

class DistributedTrainer {
 public:
  // Collective over `comm` (every rank constructs it): builds the model,
  // checks it matches rank 0's and broadcasts rank 0's parameters, then its
  // optimiser state and step. So a job resumes from a checkpoint that rank 0
  // alone read (cfg.resume, or the weights of cfg.init_from).
  // On a GPU the phases are timed with CUDA events on the compute stream
  // (the NCCL group's ComputeTimeline), which waits for the GPU at the end
  // of every step. `comm` is shared so that a caller whose other thread may
  // abort() it (the worker's heartbeat) keeps it alive when this
  // constructor fails.
  // With cfg.from_peers (a newcomer to a job that re-formed), the state
  // comes from the live ranks instead, as for a survivor below.
  DistributedTrainer(const TrainConfig& cfg, std::shared_ptr<comm::ProcessGroup> comm);
  // A job that shrank or grew (Note [Survivors train on] in distributed.cc):
  // each survivor brings the Trainer it kept, already set_world() to its
  // place in `comm`. The ranks first all take the state of the one that got
  // furthest (a step may have completed on some of them only; a newcomer
  // holds none), then go on as above. When this throws (the group failed
  // meanwhile), `survivor` holds the Trainer again. Not for ZeRO-1 or local
  // SGD (their state is not whole on every rank at every step boundary).
  DistributedTrainer(std::unique_ptr<Trainer>& survivor, std::shared_ptr<comm::ProcessGroup> comm);
  ~DistributedTrainer();
  // Gives up the Trainer, with its state, to a DistributedTrainer of the
  // next group (this one's DDP is torn down first: the hooks come off).
  std::unique_ptr<Trainer> release_trainer();

  Trainer& trainer() { return *trainer_; }
  comm::ProcessGroup& comm() { return *comm_; }
  ddp::DistributedDataParallel& ddp() { return *ddp_; }
  // One synchronised optimiser step.
  StepResult step();
  // What the re-form copied (Note [Survivors train on]): the state's bytes,
  // from how many live ranks, how long the copy took and then the check of
  // the replicas; zero when nothing moved (every rank held it).
  struct StateCopy {
    int64_t bytes = 0;
    int sources = 0;
    double seconds = 0, check_seconds = 0;
  };
  const StateCopy& state_copy() const { return state_copy_; }
  // The metrics record of a step just taken (phases, communication, bucket spans).
  perf::StepMetrics metrics(const StepResult& r) const;
  // Hooks for run_training(): DDP's places in a step, the loss averaged over
  // ranks, rank 0 prints.
  const LoopHooks& loop_hooks() const { return hooks_; }

 private:
  // `hand_back`: where the trainer goes when this throws (null: dropped).
  DistributedTrainer(std::unique_ptr<Trainer> trainer, std::shared_ptr<comm::ProcessGroup> comm,
                     bool reformed, std::unique_ptr<Trainer>* hand_back);
  void set_up(bool reformed);
  // The optimiser state (with `optimizer_state`) and the counters, from `root`.
  void broadcast_training_state(int root, bool optimizer_state);
  void take_furthest_state();
  void copy_state_from(const std::vector<int>& sources);
  void at_step_end(int64_t step, bool final);  // LoopHooks::before_checkpoint
  bool replica_check_due(int64_t step, bool checkpoint_due) const;

  std::shared_ptr<comm::ProcessGroup> comm_;
  comm::nccl::ComputeTimeline* timeline_;  // non-null on a GPU: comm_ implements it
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  LoopHooks hooks_;
  struct CheckpointSchedule {  // rank 0's: --checkpoint-every, and whether it has a --run-dir
    int64_t every = 0;
    bool written = false;
  };
  CheckpointSchedule job_checkpoints_;
  ShardedOptimizer* sharded_optimizer_ = nullptr;  // --ddp sharded: the trainer's optimiser
  StepTimes gpu_times_;                            // the last step's phases on the GPU ...
  int64_t gpu_times_step_ = -1;                    // ... and its step
  int64_t replicas_checked_at_ = -1;               // the step of the last replica check
  StateCopy state_copy_;
};

// The communicator options a TrainConfig asks for.
comm::CommOptions comm_options(const TrainConfig& cfg);

// This rank's collectives for `cfg` (the one place that picks them).
// Collective. nccl: NCCL on the rank's GPU, ordered after its compute
// stream (the gradients live there); cpu: a Communicator over the transport
// cfg.dist.transport names; gloo: the gloo group (core/comm/gloo). Throws
// InputError before any rendezvous when the device or backend cannot be
// used (no GPU, a build without CUDA or gloo, a backend for the wrong device).
// `setup_abort` (optional) ends the CPU backend's TCP set-up at once when
// aborted (comm::CommOptions::setup_abort).
std::unique_ptr<comm::ProcessGroup> connect_process_group(
    comm::Store& store, int rank, int size, const comm::JobIdentity& job, const TrainConfig& cfg,
    const std::string& bind_host = "127.0.0.1", const std::string& prefix = "comm",
    const comm::AbortSignal* setup_abort = nullptr);

}  // namespace mddp::train
