// The training loop: model, loss, optimiser, data shard, evaluation and
// checkpoints. One Trainer per process; with world_size > 1 it trains this
// rank's shard of every global batch (the DDP layer keeps replicas in sync).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/data/dataset.h"
#include "core/data/sampler.h"
#include "core/nn/loss.h"
#include "core/nn/lr_schedule.h"
#include "core/nn/module.h"
#include "core/nn/optimizer.h"
#include "core/tensor/precision.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"
#include "core/train/lab_fault.h"
#include "core/train/loss_scaler.h"

namespace mddp::train {

// Wall time of each phase of one step, in milliseconds (summed over micro-batches).
// `sync` is the time after backward spent making gradients consistent (DDP's
// exposed communication); `backward` excludes it.
struct StepTimes {
  double data = 0, forward = 0, backward = 0, sync = 0, optimizer = 0, total = 0;
};

// Where the DDP layer plugs into a step (all optional).
struct StepHooks {
  std::function<void(bool last_micro_batch)> before_backward;  // no_sync on all but the last
  std::function<void()> after_backward;                        // wait for averaged gradients
  std::function<void(int64_t step)> after_optimizer;           // local SGD
  // Where the step is, for progress reports (the worker's heartbeats): called
  // as each phase begins with "data", "forward", "backward", "sync",
  // "optimizer" (run_training adds "eval" and "checkpoint"). Must be cheap;
  // may throw to stop training (e.g. the job was aborted).
  std::function<void(int64_t step, const char* phase)> on_phase;
};

struct StepResult {
  int64_t step = 0;     // 1-based, global across epochs
  int64_t epoch = 0;    // 0-based
  float loss = 0;       // this rank's mean loss over its shard
  int64_t samples = 0;  // in its shard: its share of the step's batch (Note [Global batch])
  int64_t batch = 0;    // over all ranks: --batch × --accumulate, fewer at a kept last step
  float lr = 0;         // the step's learning rate (the schedule's)
  float grad_norm = 0;  // the global gradient norm before clipping (0: not computed)
  StepTimes times;
  int64_t start_ns = 0;  // steady clock (now_ns) when the step began
};

struct EvalResult {
  double loss = 0;
  double accuracy = -1;  // fraction correct; -1 for regression
  int64_t samples = 0;
  std::string sample;  // rank 0's text from a GPT on text (run_training), else ""
};

// The seed of one micro-batch's dropout masks (Note [Dropout seeds] in
// core/nn/gpt.h): a function of (seed, rank, step, micro-batch) alone, so
// ranks draw different masks and a resumed run draws the same ones again.
uint64_t dropout_seed(uint64_t seed, int rank, int64_t step, int64_t micro_batch);

class Trainer {
 public:
  Trainer(TrainConfig cfg, int rank = 0, int world_size = 1);

  const TrainConfig& config() const { return cfg_; }
  // The MLP or CNN (an nn::Sequential) or the GPT (an nn::Gpt).
  nn::Module& model() { return *model_; }
  nn::Optimizer& optimizer() { return *optimizer_; }
  // Replaces the optimiser (ZeRO-1's ShardedOptimizer takes over from the
  // one the constructor made; sharded_optimizer.h).
  void set_optimizer(std::unique_ptr<nn::Optimizer> optimizer) {
    optimizer_ = std::move(optimizer);
  }
  const LossScaler& loss_scaler() const {
    return scaler_;
  }  // --precision fp16's; disabled otherwise
  const data::Dataset& train_set() const { return *train_set_; }
  int64_t steps_per_epoch() const { return sampler_->steps_per_epoch(); }
  int64_t total_steps() const;
  // Whether `step` (1-based) is the last of an epoch, or of the run: where
  // run_training evaluates.
  bool ends_epoch(int64_t step) const {
    return step % steps_per_epoch() == 0 || step == total_steps();
  }
  int64_t steps_done() const { return steps_done_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // Tokens in one sample for a text dataset (its targets per sample), else
  // 0: what turns samples/s into tokens/s.
  int64_t tokens_per_sample() const;
  // The learning rate schedule (--lr, --warmup-steps, --lr-min) over this run's steps.
  nn::LrSchedule lr_schedule() const;

  // One optimiser step: for each of the `accumulate` micro-batches, load this
  // rank's shard, forward, backward (gradients accumulate); then average the
  // accumulated gradients over micro-batches and step the optimiser. With
  // accumulation K this equals one step on a K-times larger batch. Forward
  // and backward run at --precision; with fp16 the loss gradient is scaled
  // and a step whose gradients overflow is skipped (loss_scaler.h).
  StepResult step(const StepHooks& hooks = {});
  // Mean loss and accuracy over the whole test split (run on every rank alike).
  EvalResult evaluate();
  // Checkpoints (checkpoint.h; trainer_checkpoint.cc). What a checkpoint of
  // this moment holds, and writing it as the pair at `path`.
  CheckpointContents checkpoint_contents();
  void save_checkpoint(const std::string& path);
  // Continues from `c`, a checkpoint of this job (checked_resume): weights,
  // optimiser state and step.
  void restore(const Checkpoint& c);
  // The world size of the checkpoint it resumed from (0: it did not resume).
  int resumed_world_size() const { return resumed_world_size_; }
  // Replaces the weights by those in a safetensors file: a checkpoint's
  // model file, or a state_dict saved from PyTorch. Names and shapes must
  // match the model's exactly; the error names the first tensor that does not.
  void load_weights(const std::string& path);
  // Goes on as `rank` of `world_size` with the state it holds (a survivor
  // of a job that shrank, Note [Survivors train on] in distributed.cc): its
  // share of each global batch and its batch buffers follow the new world,
  // and cfg's run directory and checkpoint schedule (rank 0's alone) replace
  // its own. The step, weights and optimiser state stay.
  void set_world(int rank, int world_size, const TrainConfig& cfg);
  // Whether its parameters and optimiser state are a replica of the job's:
  // not for a newcomer until it took them from live peers (cfg.from_peers),
  // nor while a copy into it is under way (Note [Survivors train on] in
  // distributed.cc).
  bool holds_state() const { return holds_state_; }
  void set_holds_state(bool holds) { holds_state_ = holds; }
  // DDP's initial broadcast: ranks other than 0 take rank 0's step.
  void set_steps_done(int64_t steps) { steps_done_ = steps; }
  void set_loss_scaler_state(float scale, int64_t good_steps, int64_t skipped) {
    scaler_.set_state(scale, good_steps, skipped);
  }

 private:
  // This rank's sampler and batch buffers, for rank_ of world_size_.
  void shard_data();
  // One micro-batch of this rank's shard (Note [Uneven shares] in trainer.cc).
  struct MicroBatch {
    std::span<const int64_t> indices;  // its samples, or one stand-in when it has none
    int64_t samples = 0;               // how many it really has (0: a stand-in)
    float weight = 1;                  // its loss gradient's scale, W·K·samples / R
  };
  // Micro-batch m of `mine`, this rank's slice of step `step_in_epoch` of `epoch`.
  MicroBatch micro_batch(int64_t epoch, int64_t step_in_epoch, std::span<const int64_t> mine,
                         int64_t m);
  // Fills x_batch_ and y_batch_ (the first rows of x_ and y_) with mb's samples.
  void load_batch(const MicroBatch& mb, int64_t step);
  // The loss gradient to start the backward from: times the micro-batch's
  // weight, and times the loss scale with fp16.
  const tensor::Tensor& scaled_loss_grad(float weight);

  TrainConfig cfg_;
  int rank_, world_size_;
  StragglerSpec straggler_;  // --straggler: this rank sleeps in a phase when it names this rank
  LabFault lab_fault_;       // a diagnosis Lab's planted fault (MDDP_LAB_FAULT)
  std::unique_ptr<data::Dataset> train_set_, test_set_;
  std::unique_ptr<data::GlobalBatchSampler> sampler_;
  std::unique_ptr<nn::Module> model_;
  std::unique_ptr<nn::Loss> loss_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  tensor::Tensor x_, y_;              // this rank's batch, allocated once
  tensor::Tensor x_batch_, y_batch_;  // the rows of x_, y_ the micro-batch in hand uses
  tensor::Precision precision_ = tensor::Precision::kFp32;
  LossScaler scaler_{false, {}};
  tensor::Tensor scaled_dloss_;  // the loss gradient times the loss scale (fp16)
  int64_t steps_done_ = 0;
  int resumed_world_size_ = 0;
  bool holds_state_ = true;
};

}  // namespace mddp::train
