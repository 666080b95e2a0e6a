// ZeRO-1's two units (sharded_sync.h): the ring all-reduce cut in its two
// halves, with the optimiser step in between. A bucket's flat buffer,
// padded to n equal shards, is
//
//   ReduceScatterUnit  gradients: reduce-scattered in place (kAvg), so
//                      shard r of the buffer holds the average over ranks
//                      on rank r (the other shards hold partial sums);
//   GatherUnit         parameters: all-gathered in place, every rank
//                      contributing the shard its optimiser updated.
//
// Each is one collective of (n-1)/n of the buffer per rank: together the
// bytes of one ring all-reduce (docs/ddp.md "Sharded optimiser").
#pragma once

#include "core/ddp/sync_unit.h"

namespace mddp::ddp {

class ReduceScatterUnit : public SyncUnit {
 public:
  // region [n * shard] with n the group's size.
  ReduceScatterUnit(int index, tensor::Tensor region);
  void launch(comm::ProcessGroup& comm) override;
  void complete(SyncStats& stats) override;

 private:
  int index_;
  tensor::Tensor region_;
  Round round_;
};

class GatherUnit : public SyncUnit {
 public:
  // region [n * shard]; `grad_bytes` 0: it carries parameters, not gradients.
  GatherUnit(int index, tensor::Tensor region);
  void launch(comm::ProcessGroup& comm) override;
  void complete(SyncStats& stats) override;

 private:
  int index_;
  tensor::Tensor region_;
  Round round_;
};

}  // namespace mddp::ddp
