// One averaged all-reduce of a contiguous fp32 gradient region — a single
// parameter's grad or a whole bucket — with optional 16-bit compression
// (the comm hook): the region is rounded to fp16/bf16 into a wire buffer
// allocated once on the region's device, all-reduced as 16-bit, and widened
// back on completion. On the CPU the communicator accumulates in fp32; NCCL
// on a GPU reduces in the 16-bit type itself. On a GPU the rounding and the
// widening are kernels on the compute stream, so the NCCL stream's ordering
// after it (nccl_communicator.cc) covers them too.
#pragma once

#include <cstdint>
#include <memory>

#include "core/ddp/sync_unit.h"

namespace mddp::ddp {

class AllReduceUnit : public SyncUnit {
 public:
  // `compress` is none, fp16 or bf16.
  AllReduceUnit(int index, tensor::Tensor region, Compression compress);

  void launch(comm::ProcessGroup& comm) override;
  // Waits, widens a compressed result back into the region.
  void complete(SyncStats& stats) override;

 private:
  uint16_t* wire() const { return static_cast<uint16_t*>(wire_->data()); }

  int index_;
  tensor::Tensor region_;
  Compression compress_;
  std::unique_ptr<tensor::Storage> wire_;  // 16-bit copy of the region; null without compression
  Round round_;
};

}  // namespace mddp::ddp
