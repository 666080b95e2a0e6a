#include "core/ddp/allreduce_unit.h"

#include "core/common/timer.h"
#include "core/tensor/ops.h"

namespace mddp::ddp {
namespace {

HalfFormat half_format(Compression c) { return c == Compression::kFp16 ? HalfFormat::kFp16 : HalfFormat::kBf16; }

comm::DataType wire_type(Compression c) {
  return c == Compression::kFp16 ? comm::DataType::kFloat16 : comm::DataType::kBFloat16;
}

}  // namespace

AllReduceUnit::AllReduceUnit(int index, tensor::Tensor region, Compression compress)
    : region_(std::move(region)), compress_(compress) {
  span_.index = index;
  span_.bytes = region_.bytes();
  if (compress_ != Compression::kNone) {
    span_.bytes = static_cast<std::size_t>(region_.numel()) * sizeof(uint16_t);
    wire_ = std::make_unique<tensor::Storage>(span_.bytes, region_.device());
  }
}

void AllReduceUnit::launch(comm::ProcessGroup& comm) {
  span_.launch_ns = now_ns();
  if (span_.ready_ns == 0) span_.ready_ns = span_.launch_ns;
  const int64_t n = region_.numel();
  if (compress_ == Compression::kNone) {
    work_ = comm.all_reduce(region_.data(), n, comm::DataType::kFloat32, comm::ReduceOp::kAvg);
    return;
  }
  tensor::round_to_half(region_, half_format(compress_), wire());
  work_ = comm.all_reduce(wire(), n, wire_type(compress_), comm::ReduceOp::kAvg);
}

void AllReduceUnit::complete(SyncStats& stats) {
  work_->wait();
  if (compress_ != Compression::kNone) tensor::widen_from_half(wire(), half_format(compress_), region_);
  span_.start_ns = work_->start_ns();
  span_.end_ns = work_->end_ns();
  span_.steps = work_->steps();
  if (work_->ready_ns() != 0) span_.ready_ns = work_->ready_ns();  // on a GPU: when computed
  stats.spans.push_back(span_);
  stats.bytes += span_.bytes;
  stats.total_ms += ns_to_ms(span_.end_ns - span_.start_ns);
  work_.reset();
  span_.ready_ns = span_.launch_ns = 0;
}

}  // namespace mddp::ddp
