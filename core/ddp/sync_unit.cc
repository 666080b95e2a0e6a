#include "core/ddp/sync_unit.h"

#include "core/common/check.h"
#include "core/common/timer.h"
#include "core/ddp/allreduce_unit.h"
#include "core/ddp/powersgd.h"
#include "core/ddp/topk.h"

namespace mddp::ddp {
namespace {

// Note [Wire bytes]: what NCCL's ring sends for a message of `bytes`.
std::size_t ring_sent_bytes(SpanOp op, std::size_t bytes, int world) {
  if (world <= 1) return 0;
  const auto n = static_cast<std::size_t>(world);
  switch (op) {
    case SpanOp::kAllGather:
      return (n - 1) * bytes;
    case SpanOp::kReduceScatter:
      return (n - 1) * bytes / n;
    case SpanOp::kAllReduce:
      break;
  }
  return 2 * (n - 1) * bytes / n;
}

}  // namespace

SyncUnit::Round SyncUnit::begin_round(int index, int round, SpanOp op, std::size_t bytes,
                                      std::size_t grad_bytes, const comm::ProcessGroup& comm) {
  Round r;
  r.world = comm.size();
  r.span.index = index;
  r.span.round = round;
  r.span.op = op;
  r.span.bytes = bytes;
  r.span.grad_bytes = grad_bytes;
  r.span.launch_ns = now_ns();
  r.span.ready_ns = ready_ns_ != 0 ? ready_ns_ : r.span.launch_ns;
  ready_ns_ = 0;
  return r;
}

void SyncUnit::wait_round(Round& r) {
  r.work->wait();
  CommSpan& s = r.span;
  s.start_ns = r.work->start_ns();
  s.end_ns = r.work->end_ns();
  s.steps = r.work->steps();
  if (r.work->ready_ns() != 0) s.ready_ns = r.work->ready_ns();  // on a GPU: when computed
  s.sent_bytes = 0;
  for (const comm::AlgoStep& step : s.steps)
    s.sent_bytes += static_cast<std::size_t>(step.send_bytes);
  if (s.steps.empty()) s.sent_bytes = ring_sent_bytes(s.op, s.bytes, r.world);
}

void SyncUnit::report_round(Round& r, SyncStats& stats) {
  CommSpan& s = r.span;
  stats.bytes += s.bytes;
  stats.grad_bytes += s.grad_bytes;
  stats.sent_bytes += s.sent_bytes;
  stats.total_ms += ns_to_ms(s.end_ns - s.start_ns);
  stats.spans.push_back(std::move(s));
  r = {};
}

std::unique_ptr<SyncUnit> make_sync_unit(int index, tensor::Tensor region,
                                         std::vector<tensor::Tensor> parts,
                                         const Compression& compress) {
  switch (compress.kind) {
    case CompressionKind::kNone:
    case CompressionKind::kFp16:
    case CompressionKind::kBf16:
      return std::make_unique<AllReduceUnit>(index, std::move(region), compress);
    case CompressionKind::kTopK:
    case CompressionKind::kPowerSgd:
      if (!region.device().is_cpu())
        throw InputError(str("--compress ", to_string(compress),
                             " runs on the CPU backend only; on ", region.device().str(),
                             " use --compress fp16 or bf16"));
      if (compress.kind == CompressionKind::kTopK)
        return std::make_unique<TopKUnit>(index, std::move(region), compress.ratio);
      return std::make_unique<PowerSgdUnit>(index, std::move(region), std::move(parts), compress);
  }
  return nullptr;
}

}  // namespace mddp::ddp
