#include "core/ddp/shard_units.h"

#include "core/common/check.h"

namespace mddp::ddp {

ShardUnit::ShardUnit(int index, tensor::Tensor region, SpanOp stage)
    : index_(index), region_(std::move(region)), stage_(stage) {
  MDDP_CHECK(stage_ != SpanOp::kAllReduce, "a ShardUnit is one stage of an all-reduce");
}

void ShardUnit::launch(comm::ProcessGroup& comm) {
  MDDP_CHECK(region_.numel() % comm.size() == 0, "ZeRO-1 bucket of ", region_.numel(),
             " elements is not padded to a multiple of ", comm.size(), " ranks");
  const int64_t shard = region_.numel() / comm.size();
  float* base = region_.data();
  float* mine = base + shard * comm.rank();
  launched_ = true;
  if (stage_ == SpanOp::kReduceScatter) {
    round_ = begin_round(index_, 0, stage_, region_.bytes(), region_.bytes(), comm);
    round_.work =
        comm.reduce_scatter(base, mine, shard, comm::DataType::kFloat32, comm::ReduceOp::kAvg);
  } else {  // parameters, not gradients: no grad_bytes
    round_ =
        begin_round(index_, 1, stage_, static_cast<std::size_t>(shard) * sizeof(float), 0, comm);
    round_.work = comm.all_gather(mine, base, shard, comm::DataType::kFloat32);
  }
}

void ShardUnit::complete(SyncStats& stats) {
  wait_round(round_);
  report_round(round_, stats);
  launched_ = false;
}

}  // namespace mddp::ddp
