// Everything a training job needs to know, filled from the shared training
// flags (cli/train_flags.cc) and, in distributed runs, broadcast by the
// coordinator. Defaults are the README's main job: Fashion-MNIST, the MLP, Adam.
// A library of its own (mddp_train_config: this, its validation and
// mixed_precision.h): the coordinator reads and checks the config without
// linking the trainer.
#pragma once

#include <cstdint>
#include <string>

#include "core/data/factory.h"
#include "core/nn/models.h"
#include "core/nn/optimizer.h"

namespace mddp::train {

// How ranks talk and keep their replicas in sync (ignored by a single process).
struct DistConfig {
  std::string ddp = "bucketed";  // naive | hooked | bucketed | sharded
  double bucket_mb = 25.0;       // bucket cap (MiB)
  double first_bucket_mb = 1.0;  // cap of the first bucket (MiB)
  std::string compress =
      "none";  // what DDP sends: ddp::parse_compression (none, fp16, bf16, topk:R, powersgd:R)
  int64_t local_sgd = 0;           // > 0: average parameters every K steps instead
  std::string algorithm = "auto";  // auto | ring | naive | tree | doubling | hierarchical
  std::string transport = "auto";  // auto | tcp | shm
  // Who runs the collectives: auto (cpu on --device cpu, nccl on cuda),
  // cpu (microddp's own: tcp/shm and the algorithms of core/comm), gloo
  // (core/comm/gloo) or nccl. --algo and --transport are cpu's.
  std::string backend = "auto";
  int64_t timeout_ms = 60'000;  // bound on every collective wait
  // > 0: the replica check (core/train/replica_check.h) every K steps too,
  // besides at each evaluation and before each checkpoint; -1: never.
  int64_t check_replicas_every = 0;
  // A lab setting: "RANK:PHASE:MS" makes rank RANK sleep MS milliseconds in
  // PHASE (data, forward or backward) of every step, a straggler to watch
  // the dashboard and `microddp analyze` name. "" = off.
  std::string straggler;
};

// --loss-scale*: fp16's dynamic loss scaling (core/train/loss_scaler.h).
struct LossScaleConfig {
  float init = 65536.0f;  // --loss-scale: the first scale (2^16, GradScaler's)
  int64_t window = 2000;  // --loss-scale-window: good steps before the scale doubles
  float growth = 2.0f;
  float backoff = 0.5f;
};

// --straggler parsed; rank -1 when off.
struct StragglerSpec {
  int rank = -1;
  std::string phase;
  double ms = 0;
};
// Throws InputError naming --straggler when `text` is not RANK:PHASE:MS.
StragglerSpec parse_straggler(const std::string& text);

struct TrainConfig {
  nn::ModelConfig model;
  std::string loss = "xent";  // xent | mse
  data::DatasetConfig data{.spec = "fashion-mnist"};
  int64_t batch = 64;  // global batch (split over ranks)
  int64_t steps = 0;   // > 0: stop after this many steps
  int64_t epochs = 3;  // used when steps == 0
  nn::OptimizerConfig optim{.name = "adam", .lr = 1e-3f};
  // The learning rate schedule (core/nn/lr_schedule.h): a linear warm-up
  // over warmup_steps, then a cosine decay to lr_min (< 0: no decay).
  int64_t warmup_steps = 0;
  float lr_min = -1.0f;
  int64_t accumulate = 1;  // micro-batches of `batch` per optimiser step
  // An epoch's last N mod batch samples: "drop" them, or "keep" them as one
  // shorter step (Note [Global batch] in core/data/sampler.h).
  std::string last_batch = "drop";
  uint64_t seed = 42;  // model init and data order
  std::string device = "cpu";
  std::string run_dir;  // logs, checkpoints ("" = none)
  // Checkpoints (core/train/checkpoint.h, docs/checkpoints.md).
  std::string init_from;  // start from these weights: a checkpoint or a PyTorch state_dict
  std::string resume;     // continue from this checkpoint (a file of a pair, or a run directory)
  int64_t checkpoint_every = 0;  // > 0: a checkpoint every N steps in run_dir/checkpoints/
  int64_t keep_checkpoints = 3;  // the newest periodic checkpoints kept (0: all)
  // Set by the coordinator for the attempts after a restart (docs/recovery.md):
  // rank 0 resumes from the newest complete checkpoint in run_dir when it is
  // further than `resume` (from `resume`, or from the start, when there is none).
  bool resume_latest = false;
  // Set by the coordinator for the attempts a job re-formed in its running
  // processes (--on-failure shrink, heal): a rank that holds no state (a
  // newcomer) takes it from the live ranks over the data plane (Note
  // [Survivors train on] in core/train/distributed.cc), not from a checkpoint.
  bool from_peers = false;
  // > 0: this run ends after that step (its final checkpoint there), the
  // schedule still spanning all the steps: a job done in legs (run --replay).
  int64_t stop_after_step = 0;
  // > 0: an elastic job (--min-nproc) that may run on fewer ranks, at least
  // this many; a resume may then change the world size (not bitwise: the
  // gradients are summed in another order).
  int64_t min_nproc = 0;
  // What a lost rank does to the job (docs/recovery.md): "restart" (every
  // rank starts again from the last checkpoint, as --max-restarts allows),
  // "shrink" (the survivors train on in their processes, Note [Survivors
  // train on] in core/train/distributed.cc), "heal" (shrink, then a worker
  // that joins grows the job back, taking the state from live peers) or "fail".
  std::string on_failure = "restart";
  // shrink or heal: a lost rank's survivors go on in their processes.
  bool survivors_train_on() const { return on_failure == "shrink" || on_failure == "heal"; }
  int threads = 1;        // compute threads per process
  int64_t log_every = 0;  // 0 = about 20 lines per run
  bool eval = true;       // test accuracy after each epoch
  bool allow_nonfinite_loss =
      false;  // train on when the loss is NaN or inf (else stop, naming the step)
  // Mixed precision (core/train/mixed_precision.h): fp32 | bf16 | fp16 GEMMs; fp16's loss scaling.
  std::string precision = "fp32";
  LossScaleConfig loss_scale;
  DistConfig dist;

  // Rejects contradictory or impossible settings with an InputError naming the flag.
  void validate() const;
};

// The backend cfg asks for, `auto` resolved by the device: cpu | gloo | nccl.
// Throws InputError when the backend cannot hold the device's tensors. With
// the config, not the trainer, so that the dashboard names the backend the
// workers pick.
std::string process_group_backend(const TrainConfig& cfg);

}  // namespace mddp::train
