#include "core/ddp/shard_units.h"

#include "core/common/check.h"

namespace mddp::ddp {
namespace {

// Shard r of a region split into the group's n equal shards.
int64_t shard_numel(const tensor::Tensor& region, const comm::ProcessGroup& comm) {
  MDDP_CHECK(region.numel() % comm.size() == 0, "ZeRO-1 bucket of ", region.numel(),
             " elements is not padded to a multiple of ", comm.size(), " ranks");
  return region.numel() / comm.size();
}

}  // namespace

ReduceScatterUnit::ReduceScatterUnit(int index, tensor::Tensor region) : index_(index), region_(std::move(region)) {}

void ReduceScatterUnit::launch(comm::ProcessGroup& comm) {
  const int64_t shard = shard_numel(region_, comm);
  round_ = begin_round(index_, 0, SpanOp::kReduceScatter, region_.bytes(), region_.bytes(), comm);
  launched_ = true;
  float* base = region_.data();
  round_.work = comm.reduce_scatter(base, base + shard * comm.rank(), shard, comm::DataType::kFloat32,
                                    comm::ReduceOp::kAvg);
}

void ReduceScatterUnit::complete(SyncStats& stats) {
  wait_round(round_);
  report_round(round_, stats);
  launched_ = false;
}

GatherUnit::GatherUnit(int index, tensor::Tensor region) : index_(index), region_(std::move(region)) {}

void GatherUnit::launch(comm::ProcessGroup& comm) {
  const int64_t shard = shard_numel(region_, comm);
  round_ = begin_round(index_, 1, SpanOp::kAllGather, static_cast<std::size_t>(shard) * sizeof(float), 0, comm);
  launched_ = true;
  float* base = region_.data();
  round_.work = comm.all_gather(base + shard * comm.rank(), base, shard, comm::DataType::kFloat32);
}

void GatherUnit::complete(SyncStats& stats) {
  wait_round(round_);
  report_round(round_, stats);
  launched_ = false;
}

}  // namespace mddp::ddp
