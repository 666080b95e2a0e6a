#include "core/ddp/shard_units.h"

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::ddp {

ShardUnit::ShardUnit(int index, tensor::Tensor region, SpanOp stage, Compression compress)
    : index_(index), region_(std::move(region)), stage_(stage), compress_(compress) {
  MDDP_CHECK(stage_ != SpanOp::kAllReduce, "a ShardUnit is one stage of an all-reduce");
  MDDP_CHECK(compress_.kind == CompressionKind::kNone ||
                 (compress_.is_half() && stage_ == SpanOp::kReduceScatter),
             "a ShardUnit compresses only gradients, to fp16 or bf16; got --compress ",
             to_string(compress_));
  if (compress_.is_half())
    wire_ = std::make_unique<tensor::Storage>(
        static_cast<std::size_t>(region_.numel()) * sizeof(uint16_t), region_.device());
}

void ShardUnit::launch(comm::ProcessGroup& comm) {
  MDDP_CHECK(region_.numel() % comm.size() == 0, "ZeRO-1 bucket of ", region_.numel(),
             " elements is not padded to a multiple of ", comm.size(), " ranks");
  const int64_t shard = shard_numel_ = region_.numel() / comm.size();
  shard_begin_ = shard * comm.rank();
  float* base = region_.data();
  float* mine = base + shard_begin_;
  launched_ = true;
  if (stage_ == SpanOp::kAllGather) {  // parameters, not gradients: no grad_bytes
    round_ =
        begin_round(index_, 1, stage_, static_cast<std::size_t>(shard) * sizeof(float), 0, comm);
    round_.work = comm.all_gather(mine, base, shard, comm::DataType::kFloat32);
    return;
  }
  const std::size_t bytes = wire_ ? wire_->bytes() : region_.bytes();
  round_ = begin_round(index_, 0, stage_, bytes, region_.bytes(), comm);
  if (!wire_) {
    round_.work =
        comm.reduce_scatter(base, mine, shard, comm::DataType::kFloat32, comm::ReduceOp::kAvg);
    return;
  }
  uint16_t* wire = static_cast<uint16_t*>(wire_->data());
  tensor::round_to_half(region_, half_format(compress_), wire);
  round_.work = comm.reduce_scatter(wire, wire + shard_begin_, shard, wire_type(compress_),
                                    comm::ReduceOp::kAvg);
}

void ShardUnit::complete(SyncStats& stats) {
  wait_round(round_);
  report_round(round_, stats);
  if (wire_) {  // only this rank's shard holds the average: widen it alone
    tensor::Tensor mine = region_.view(shard_begin_, {shard_numel_});
    tensor::widen_from_half(static_cast<const uint16_t*>(wire_->data()) + shard_begin_,
                            half_format(compress_), mine);
  }
  launched_ = false;
}

}  // namespace mddp::ddp
