// A SyncUnit makes one contiguous fp32 gradient region — a single
// parameter's grad (naive, hooked) or a bucket's flat buffer (bucketed) —
// the average over ranks, by whatever --compress says (compression.h):
//
//   AllReduceUnit (allreduce_unit.h)  none, fp16, bf16: one all-reduce
//   TopKUnit      (topk.h)           top-k entries, all-gathered, summed here
//   PowerSgdUnit  (powersgd.h)       low-rank factors P and Q, two all-reduces
//
// A strategy (grad_sync.h) calls, on the training thread: launch() when the
// region's gradients are final; after backward, advance() on every launched
// unit in launch order, then complete() on each in the same order. Every
// rank therefore issues the same collectives in the same order: all first
// rounds during backward, then (PowerSGD) the second rounds.
//
// Note [Compression state]. The compressing units keep tensors from one step
// to the next: the error-feedback residual (what this rank did not send yet;
// different on every rank) and PowerSGD's warm-started Q (the same on every
// rank). Checkpoints do not hold them: a resumed run starts its error
// feedback afresh (zero residuals, the initial Q), so it is not bitwise the
// run that was not interrupted (docs/ddp.md "Compression").
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/comm/process_group.h"
#include "core/ddp/grad_sync.h"

namespace mddp::ddp {

class SyncUnit {
 public:
  virtual ~SyncUnit() = default;

  // Starts the exchange of the region (training thread).
  virtual void launch(comm::ProcessGroup& comm) = 0;
  // The second round, which needs the first one's result (PowerSGD's Q);
  // nothing for one-round units.
  virtual void advance(comm::ProcessGroup& comm) { (void)comm; }
  // Waits; the region then holds the average over ranks (of what was sent);
  // appends this unit's spans to `stats`.
  virtual void complete(SyncStats& stats) = 0;
  bool launched() const { return launched_; }
  void mark_ready(int64_t now) { ready_ns_ = now; }

 protected:
  // A collective of this unit, from its launch to its span.
  struct Round {
    CommSpan span;
    comm::WorkPtr work;
    int world = 1;
  };
  // Starts a span for a collective of `bytes` about to be issued.
  Round begin_round(int index, int round, SpanOp op, std::size_t bytes, std::size_t grad_bytes,
                    const comm::ProcessGroup& comm);
  // Waits for r's collective and fills in its span.
  static void wait_round(Round& r);
  // Appends r's span to `stats` and clears r.
  static void report_round(Round& r, SyncStats& stats);

  bool launched_ = false;
  int64_t ready_ns_ = 0;
};

// The unit for `region` under `compress`. `parts` are the gradients the
// region holds, in order, as views of it with their parameters' shapes
// (PowerSGD compresses each matrix separately; the others ignore them).
// Throws InputError when the compression cannot run on the region's device.
std::unique_ptr<SyncUnit> make_sync_unit(int index, tensor::Tensor region,
                                         std::vector<tensor::Tensor> parts,
                                         const Compression& compress);

}  // namespace mddp::ddp
