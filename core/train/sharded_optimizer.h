// ZeRO-1's optimiser (--ddp sharded; Note [Sharded buckets] in
// core/ddp/sharded_sync.h): the update of nn::make_optimizer's SGD,
// momentum, Adam or AdamW, applied by each rank to its shard of every bucket only,
// with state for that shard only, followed by the all-gather that makes
// every parameter whole again. The update is element-wise and the same
// kernel (tensor::sgd_update / adam_update / adamw_update), so every element
// gets the operations the unsharded optimiser gives it. AdamW decays some
// parameters and not others (nn::decays), so it updates each parameter's
// part of the shard on its own; gradient clipping's norm sums every rank's
// shard (an all-reduce of one number).
//
// Checkpoints hold the whole state under the unsharded names
// ("<param>.momentum_buffer", ".exp_avg", ".exp_avg_sq"): gather_state()
// assembles it on every rank, so a sharded run resumes bitwise, sharded or
// not, and an unsharded checkpoint resumes sharded.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/comm/process_group.h"
#include "core/ddp/sharded_sync.h"
#include "core/nn/optimizer.h"

namespace mddp::train {

class ShardedOptimizer : public nn::Optimizer {
 public:
  // Takes over from `full`, the unsharded optimiser of the same config over
  // `params` (registration order), keeping its steps and this rank's shard
  // of its state (so a restored or broadcast state carries over). `sync`
  // and `comm` must outlive it.
  ShardedOptimizer(const nn::OptimizerConfig& cfg, std::vector<nn::Parameter*> params,
                   ddp::ShardedSync& sync, comm::ProcessGroup& comm, nn::Optimizer& full);

  // Updates this rank's shards, all-gathers the parameters.
  void step() override;
  // The whole state, per parameter, as the unsharded optimiser names it:
  // valid after gather_state() until the next step().
  std::vector<std::pair<std::string, tensor::Tensor>> state() override;
  // Collective: assembles the whole state from every rank's shards.
  void gather_state();
  // Elements of optimiser state this rank keeps: 1/n of the unsharded
  // optimiser's, plus padding (`bench train` prints it).
  int64_t state_numel() const;

 protected:
  // The shards' sum of squares, all-reduced: the whole gradient's. Collective.
  float grad_squares() override;
  void scale_grads(float factor) override;  // this rank's shards: what step() reads

 private:
  // Where a parameter's state lives: bucket and offset in it.
  struct Place {
    nn::Parameter* param;
    std::size_t bucket;
    int64_t offset;
  };

  // AdamW on bucket b's shard: each parameter's part of it, decayed or not.
  void adamw_shard(std::size_t b);

  nn::OptimizerConfig cfg_;
  ddp::ShardedSync& sync_;
  comm::ProcessGroup& comm_;
  std::vector<Place> places_;       // registration order
  std::vector<std::string> kinds_;  // state names: momentum_buffer | exp_avg, exp_avg_sq
  std::vector<std::vector<tensor::Tensor>>
      shard_;  // [bucket][kind]: this rank's shard of the state
  std::vector<std::vector<tensor::Tensor>> whole_;  // [bucket][kind]: gather_state()'s result
  int64_t gathered_at_ = -1;                        // steps() when gather_state() last ran
};

}  // namespace mddp::train
