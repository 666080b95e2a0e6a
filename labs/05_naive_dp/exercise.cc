// Lab 5 — naive data parallelism: after backward, all-reduce every gradient.
// Read labs/05_naive_dp/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check naive_dp
#include "labs/05_naive_dp/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {
namespace {

class NaiveSync : public ddp::GradSync {
 public:
  NaiveSync(std::vector<nn::Parameter*> params, comm::ProcessGroup& group)
      : params_(std::move(params)), group_(group) {}

  // Backward calls this as each gradient becomes final; naive DP waits for
  // the whole backward instead.
  void on_grad_ready(nn::Parameter&) override {}

  // After backward: every parameter's grad must become the average over ranks.
  void finish() override {
    // EXERCISE: for each parameter p in params_, all-reduce its gradient
    // (p->grad.data(), p->grad.numel() floats, comm::DataType::kFloat32) with
    // comm::ReduceOp::kAvg over group_, and wait() for the returned Work.
    MDDP_LAB_TODO("NaiveSync::finish");
  }

 private:
  std::vector<nn::Parameter*> params_;
  comm::ProcessGroup& group_;
};

}  // namespace

std::unique_ptr<ddp::GradSync> make_naive_sync(std::vector<nn::Parameter*> params,
                                               comm::ProcessGroup& group) {
  return std::make_unique<NaiveSync>(std::move(params), group);
}

}  // namespace mddp::labs::impl
