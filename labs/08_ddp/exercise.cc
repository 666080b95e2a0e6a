// Lab 8 — the DDP wrapper: initial broadcast, gradient sync, no_sync.
// Read labs/08_ddp/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check ddp
#include "labs/08_ddp/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {
namespace {

class Ddp : public ddp::DataParallel {
 public:
  Ddp(nn::Module& model, comm::ProcessGroup& group, const ddp::SyncOptions& sync) : model_(model) {
    // EXERCISE, in this order:
    //  1. make every replica start from rank 0's parameters: broadcast each
    //     parameter's value (p->value.data(), p->value.numel() floats) from
    //     rank 0 over group and wait;
    //  2. sync_ = ddp::make_grad_sync(sync, model.parameters(), group);
    //  3. model.set_grad_ready_hook(...) with a hook that passes each
    //     parameter to sync_->on_grad_ready, but only while syncing_.
    MDDP_LAB_TODO("Ddp::Ddp");
  }
  ~Ddp() override { model_.set_grad_ready_hook({}); }

  void before_backward(bool last_micro_batch) override {
    // EXERCISE: no_sync. Accumulating micro-batches synchronise only on the
    // last one: remember whether this backward synchronises.
    MDDP_LAB_TODO("Ddp::before_backward");
  }

  void after_backward() override {
    // EXERCISE: when this backward synchronised, sync_->finish() waits until
    // every gradient is the average over ranks.
    MDDP_LAB_TODO("Ddp::after_backward");
  }

 private:
  nn::Module& model_;
  std::unique_ptr<ddp::GradSync> sync_;
  bool syncing_ = true;
};

}  // namespace

std::unique_ptr<ddp::DataParallel> make_ddp(nn::Module& model, comm::ProcessGroup& group,
                                            const ddp::SyncOptions& sync) {
  return std::make_unique<Ddp>(model, group, sync);
}

}  // namespace mddp::labs::impl
