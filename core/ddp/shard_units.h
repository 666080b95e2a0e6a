// ZeRO-1's unit (sharded_sync.h): one stage of a bucket's ring all-reduce,
// the optimiser step running between the two. A bucket's flat buffer,
// padded to n equal shards, is
//
//   kReduceScatter  gradients: reduce-scattered in place (kAvg), so shard r
//                   of the buffer holds the average over ranks on rank r
//                   (the other shards hold partial sums);
//   kAllGather      parameters: all-gathered in place, every rank
//                   contributing the shard its optimiser updated.
//
// Each is one collective of (n-1)/n of the buffer per rank: together the
// bytes of one ring all-reduce (docs/ddp.md "Sharded optimiser").
#pragma once

#include "core/ddp/sync_unit.h"

namespace mddp::ddp {

class ShardUnit : public SyncUnit {
 public:
  // region [n * shard] with n the group's size; `stage` kReduceScatter or kAllGather.
  ShardUnit(int index, tensor::Tensor region, SpanOp stage);
  void launch(comm::ProcessGroup& comm) override;
  void complete(SyncStats& stats) override;

 private:
  int index_;
  tensor::Tensor region_;
  SpanOp stage_;
  Round round_;
};

}  // namespace mddp::ddp
