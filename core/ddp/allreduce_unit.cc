#include "core/ddp/allreduce_unit.h"

#include "core/tensor/ops.h"

namespace mddp::ddp {

AllReduceUnit::AllReduceUnit(int index, tensor::Tensor region, Compression compress)
    : index_(index), region_(std::move(region)), compress_(compress) {
  MDDP_CHECK(compress_.kind == CompressionKind::kNone || compress_.is_half(),
             "AllReduceUnit got --compress ", to_string(compress_));
  if (compress_.is_half())
    wire_ = std::make_unique<tensor::Storage>(
        static_cast<std::size_t>(region_.numel()) * sizeof(uint16_t), region_.device());
}

void AllReduceUnit::launch(comm::ProcessGroup& comm) {
  const int64_t n = region_.numel();
  const std::size_t bytes = wire_ ? wire_->bytes() : region_.bytes();
  round_ = begin_round(index_, 0, SpanOp::kAllReduce, bytes, region_.bytes(), comm);
  launched_ = true;
  if (!wire_) {
    round_.work =
        comm.all_reduce(region_.data(), n, comm::DataType::kFloat32, comm::ReduceOp::kAvg);
    return;
  }
  tensor::round_to_half(region_, half_format(compress_), wire());
  round_.work = comm.all_reduce(wire(), n, wire_type(compress_), comm::ReduceOp::kAvg);
}

void AllReduceUnit::complete(SyncStats& stats) {
  wait_round(round_);
  report_round(round_, stats);
  if (wire_) tensor::widen_from_half(wire(), half_format(compress_), region_);
  launched_ = false;
}

}  // namespace mddp::ddp
