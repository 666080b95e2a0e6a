// ZeRO-1: the optimiser step sharded across ranks (--ddp sharded).
// docs/ddp.md "Sharded optimiser"; the anchor is PyTorch's
// ZeroRedundancyOptimizer (with DDP's buckets, as its overlap_with_ddp mode).
//
// Note [Sharded buckets]
// ~~~~~~~~~~~~~~~~~~~~~~
// The buckets are bucketed mode's (same assignment, same launch order, same
// overlap with backward), with two differences. Each bucket's flat buffer is
// zero-padded to n equal shards, and the parameters' values, not only their
// gradients, become views into a flat buffer of the same layout. Then:
//
//   backward   each full bucket is reduce-scattered (ShardUnit):
//              rank r ends with the average of shard r of the gradients;
//   optimiser  rank r updates shard r of the parameters with it, and keeps
//              optimiser state (momentum, Adam's moments) for shard r only
//              (train/sharded_optimizer.h); each bucket's parameters are
//              all-gathered (ShardUnit) as soon as its shard is updated.
//
// A shard is a range of elements, not of parameters: it may cut a
// parameter in two. That is fine because every update the project has
// (SGD, momentum, Adam, weight decay) is element-wise; padding holds zero
// gradients and zero parameters, which every update keeps at zero.
// Outside shard r, rank r's gradient buffer holds partial sums after the
// reduce-scatter (with --compress fp16/bf16, its own unreduced gradients:
// the sums travel in a 16-bit wire buffer, shard_units.h): in this mode only
// the parameters are whole after a step.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/ddp/strategies.h"

namespace mddp::ddp {

// One bucket as the sharded optimiser sees it.
struct ShardedBucket {
  tensor::Tensor values,
      grads;  // [n * shard] flat buffers the parameters and their gradients are views of
  int64_t shard_begin = 0;  // this rank's shard: elements [shard_begin, shard_begin + shard_numel)
  int64_t shard_numel = 0;
  std::vector<std::pair<nn::Parameter*, int64_t>>
      params;  // each parameter and its offset in the bucket
};

class ShardedSync : public Reducer {
 public:
  // Re-points every parameter's value and grad into its bucket's buffers.
  // Throws InputError for --compress topk or powersgd
  // (compression.h's check_sharded_compression).
  ShardedSync(std::vector<nn::Parameter*> params, const SyncOptions& options,
              comm::ProcessGroup& comm);

  const std::vector<ShardedBucket>& sharded_buckets() const { return sharded_; }
  // After the optimiser updated bucket b's shard: starts its all-gather.
  void gather(std::size_t b);
  // Waits for every bucket's all-gather (each launched once since the last
  // call); their spans join stats(). Every parameter is then whole again.
  void finish_gather();

 private:
  std::vector<ShardedBucket> sharded_;
  std::vector<std::unique_ptr<SyncUnit>> gathers_;  // one all-gathering ShardUnit per bucket
};

}  // namespace mddp::ddp
