// One averaged all-reduce of a contiguous fp32 gradient region — a single
// parameter's grad or a whole bucket — with optional 16-bit compression
// (the comm hook): the region is rounded to fp16/bf16 into a wire buffer
// allocated once, all-reduced as 16-bit (accumulated in fp32 by the
// communicator), and widened back on completion.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ddp/grad_sync.h"

namespace mddp::ddp {

class AllReduceUnit {
 public:
  AllReduceUnit(int index, tensor::Tensor region, Compression compress);

  // Starts the asynchronous average over ranks (training thread).
  void launch(comm::ProcessGroup& comm);
  // Waits for it, widens a compressed result back into the region, and
  // appends this unit's span to `stats`.
  void complete(SyncStats& stats);
  bool launched() const { return work_ != nullptr; }
  void mark_ready(int64_t now) { span_.ready_ns = now; }

 private:
  tensor::Tensor region_;
  Compression compress_;
  std::vector<uint16_t> wire_;
  comm::WorkPtr work_;
  CommSpan span_;
};

}  // namespace mddp::ddp
