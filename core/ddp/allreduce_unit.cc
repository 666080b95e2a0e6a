#include "core/ddp/allreduce_unit.h"

#include "core/comm/half.h"
#include "core/common/check.h"
#include "core/common/timer.h"

namespace mddp::ddp {

AllReduceUnit::AllReduceUnit(int index, tensor::Tensor region, Compression compress)
    : region_(std::move(region)), compress_(compress) {
  // The 16-bit rounding below runs on the host; a GPU would need cast
  // kernels on the compute stream, which are not written (docs/gpu.md).
  if (compress_ != Compression::kNone && !region_.device().is_cpu())
    throw InputError(str("--compress ", to_string(compress_), " is implemented for --device cpu only; on ",
                         region_.device().str(), " use --compress none"));
  span_.index = index;
  if (compress_ != Compression::kNone) wire_.resize(region_.numel());
  span_.bytes = compress_ == Compression::kNone ? region_.bytes() : wire_.size() * sizeof(uint16_t);
}

void AllReduceUnit::launch(comm::ProcessGroup& comm) {
  span_.launch_ns = now_ns();
  if (span_.ready_ns == 0) span_.ready_ns = span_.launch_ns;
  float* g = region_.data();
  const int64_t n = region_.numel();
  switch (compress_) {
    case Compression::kNone:
      work_ = comm.all_reduce(g, n, comm::DataType::kFloat32, comm::ReduceOp::kAvg);
      return;
    case Compression::kFp16:
      for (int64_t i = 0; i < n; ++i) wire_[i] = comm::float_to_fp16(g[i]);
      work_ = comm.all_reduce(wire_.data(), n, comm::DataType::kFloat16, comm::ReduceOp::kAvg);
      return;
    case Compression::kBf16:
      for (int64_t i = 0; i < n; ++i) wire_[i] = comm::float_to_bf16(g[i]);
      work_ = comm.all_reduce(wire_.data(), n, comm::DataType::kBFloat16, comm::ReduceOp::kAvg);
      return;
  }
}

void AllReduceUnit::complete(SyncStats& stats) {
  work_->wait();
  float* g = region_.data();
  const int64_t n = region_.numel();
  if (compress_ == Compression::kFp16)
    for (int64_t i = 0; i < n; ++i) g[i] = comm::fp16_to_float(wire_[i]);
  if (compress_ == Compression::kBf16)
    for (int64_t i = 0; i < n; ++i) g[i] = comm::bf16_to_float(wire_[i]);
  span_.start_ns = work_->start_ns();
  span_.end_ns = work_->end_ns();
  if (work_->ready_ns() != 0) span_.ready_ns = work_->ready_ns();  // on a GPU: when computed
  stats.spans.push_back(span_);
  stats.bytes += span_.bytes;
  stats.total_ms += ns_to_ms(span_.end_ns - span_.start_ns);
  work_.reset();
  span_.ready_ns = span_.launch_ns = 0;
}

}  // namespace mddp::ddp
