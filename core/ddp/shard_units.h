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
//
// With --compress fp16/bf16 the gradients travel as AllReduceUnit's do: the
// buffer is rounded into a 16-bit wire buffer (allocated once), that is
// reduce-scattered (each hop sums in fp32 and rounds once), and only this
// rank's shard is widened back; the other shards keep the local gradients.
// The parameters' all-gather stays fp32: rounding them would change the
// model itself, not only the gradient's wire format.
#pragma once

#include <cstdint>
#include <memory>

#include "core/ddp/sync_unit.h"

namespace mddp::ddp {

class ShardUnit : public SyncUnit {
 public:
  // region [n * shard] with n the group's size; `stage` kReduceScatter or
  // kAllGather; `compress` none, or fp16/bf16 for a reduce-scatter.
  ShardUnit(int index, tensor::Tensor region, SpanOp stage, Compression compress = {});
  void launch(comm::ProcessGroup& comm) override;
  void complete(SyncStats& stats) override;

 private:
  int index_;
  tensor::Tensor region_;
  SpanOp stage_;
  Compression compress_;
  std::unique_ptr<tensor::Storage> wire_;  // 16-bit copy of the region; null without compression
  int64_t shard_begin_ = 0, shard_numel_ = 0;  // this rank's shard, set by launch
  Round round_;
};

}  // namespace mddp::ddp
