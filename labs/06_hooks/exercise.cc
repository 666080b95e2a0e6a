// Lab 6 — hooks: launch each parameter's all-reduce from its grad-ready hook.
// Read labs/06_hooks/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check hooks
#include "labs/06_hooks/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {
namespace {

class HookedSync : public ddp::GradSync {
 public:
  HookedSync(std::vector<nn::Parameter*> params, comm::ProcessGroup& group)
      : params_(std::move(params)), group_(group) {}

  // Backward calls this the moment p's gradient is final (last layer first).
  void on_grad_ready(nn::Parameter& p) override {
    // EXERCISE: start p's all-reduce now, without waiting for it:
    // group_.all_reduce(p.grad.data(), p.grad.numel(), comm::DataType::kFloat32,
    // comm::ReduceOp::kAvg) returns at once with a comm::WorkPtr; keep it.
    MDDP_LAB_TODO("HookedSync::on_grad_ready");
  }

  // After backward: wait until every gradient is the average over ranks.
  void finish() override {
    // EXERCISE: wait() for every all-reduce launched in this backward, then
    // forget them (the next backward launches new ones).
    MDDP_LAB_TODO("HookedSync::finish");
  }

 private:
  std::vector<nn::Parameter*> params_;
  comm::ProcessGroup& group_;
  std::vector<comm::WorkPtr> launched_;
};

}  // namespace

std::unique_ptr<ddp::GradSync> make_hooked_sync(std::vector<nn::Parameter*> params,
                                                comm::ProcessGroup& group) {
  return std::make_unique<HookedSync>(std::move(params), group);
}

}  // namespace mddp::labs::impl
