// DistributedDataParallel: wraps a model so that N replicas on N ranks train
// as one model on the union of their batches.
//
//  * at construction: checks that every rank built the same model (names and
//    shapes; the error shows the first difference) and broadcasts rank 0's
//    initial parameters, so replicas start identical;
//  * per step: the grad-ready hooks feed the chosen GradSync strategy;
//    after_backward() waits until every gradient is the average over ranks;
//  * no_sync: with accumulation over K micro-batches, only the last
//    micro-batch's backward synchronises (the others just accumulate);
//  * local SGD: with local_sgd = K, gradients are never synchronised;
//    instead parameters are averaged after every K-th optimiser step.
#pragma once

#include <memory>

#include "core/ddp/grad_sync.h"
#include "core/nn/module.h"

namespace mddp::ddp {

// What a training loop needs from a data-parallel wrapper around its model:
// DistributedDataParallel below, or the one the course's Lab 8 writes
// (labs/08_ddp). Around each micro-batch's backward:
class DataParallel {
 public:
  virtual ~DataParallel() = default;
  // Before backward: will this backward's gradients be synchronised?
  virtual void before_backward(bool last_micro_batch) = 0;
  // After backward: when it synchronised, every gradient is now the average over ranks.
  virtual void after_backward() = 0;
};

// The ranks' model fingerprints ("name:[shape]" per parameter, joined by
// ';', index = rank) compared: "" when all are equal, else one line naming
// the odd rank(s) and the first parameter where they differ
// (Note [Naming the odd rank] in ddp.cc).
std::string model_difference(const std::vector<std::string>& fingerprints);

// Every rank's parameters become `root`'s: one broadcast per parameter, in
// registration order. Collective.
void broadcast_parameters(nn::Module& model, comm::ProcessGroup& comm, int root = 0);

struct DdpOptions {
  SyncOptions sync;
  int64_t local_sgd = 0;  // > 0: average parameters every K steps instead of gradients
  // Every rank starts from rank 0's weights; false when the ranks hold the
  // same ones already (a re-formed group that agreed on its state).
  bool broadcast_parameters = true;
};

class DistributedDataParallel : public DataParallel {
 public:
  // Collective: every rank must construct it at the same point.
  DistributedDataParallel(nn::Module& model, comm::ProcessGroup& comm, DdpOptions options);
  ~DistributedDataParallel() override;

  // Before each micro-batch's backward: synchronise only on the last one.
  void before_backward(bool last_micro_batch) override;
  // After backward: waits for the averaged gradients (no-op while not synchronising).
  void after_backward() override;
  // After the optimiser step `step` (1-based): local SGD's parameter average.
  void after_optimizer(int64_t step);
  // Mean over ranks of a scalar (e.g. the loss). Collective.
  double mean_over_ranks(double value);

  // The last synchronisation's cost (empty if the step did not synchronise).
  const SyncStats& last_stats() const;
  GradSync& grad_sync() { return *sync_; }

 private:
  void check_same_model();

  nn::Module& model_;
  comm::ProcessGroup& comm_;
  DdpOptions options_;
  std::unique_ptr<GradSync> sync_;
  bool sync_enabled_ = true;
  bool synced_this_step_ = false;
  SyncStats empty_;
};

}  // namespace mddp::ddp
