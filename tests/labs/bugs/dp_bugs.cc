// The data-parallel Labs' planted bugs (bugs.h).
#include <chrono>
#include <thread>

#include "core/tensor/ops.h"
#include "tests/labs/bugs/bugs.h"

namespace mddp::labs::bugs {
namespace {

// Naive DP with a configurable mistake in how it averages.
class NaiveSync : public ddp::GradSync {
 public:
  NaiveSync(std::vector<nn::Parameter*> params, comm::ProcessGroup& group, comm::ReduceOp op,
            float then_scale)
      : params_(std::move(params)), group_(group), op_(op), scale_(then_scale) {}
  void on_grad_ready(nn::Parameter&) override {}
  void finish() override {
    for (nn::Parameter* p : params_) {
      group_.all_reduce(p->grad.data(), p->grad.numel(), comm::DataType::kFloat32, op_)->wait();
      tensor::scale(p->grad, scale_);
    }
  }

 private:
  std::vector<nn::Parameter*> params_;
  comm::ProcessGroup& group_;
  comm::ReduceOp op_;
  float scale_;
};

// Hooks that wait inside the hook.
class BlockingHooks : public ddp::GradSync {
 public:
  explicit BlockingHooks(comm::ProcessGroup& group) : group_(group) {}
  void on_grad_ready(nn::Parameter& p) override {
    group_
        .all_reduce(p.grad.data(), p.grad.numel(), comm::DataType::kFloat32, comm::ReduceOp::kAvg)
        ->wait();
  }
  void finish() override {}

 private:
  comm::ProcessGroup& group_;
};

// A DDP wrapper; `broadcast` and `no_sync` switch off the two things it must do.
class Ddp : public ddp::DataParallel {
 public:
  Ddp(nn::Module& model, comm::ProcessGroup& group, const ddp::SyncOptions& sync, bool broadcast,
      bool no_sync)
      : model_(model), no_sync_(no_sync) {
    if (broadcast) ddp::broadcast_parameters(model, group);
    sync_ = ddp::make_grad_sync(sync, model.parameters(), group);
    model.set_grad_ready_hook([this](nn::Parameter& p) {
      if (syncing_) sync_->on_grad_ready(p);
    });
  }
  ~Ddp() override { model_.set_grad_ready_hook({}); }
  void before_backward(bool last) override { syncing_ = last || !no_sync_; }
  void after_backward() override {
    if (syncing_) sync_->finish();
  }

 private:
  nn::Module& model_;
  bool no_sync_;
  std::unique_ptr<ddp::GradSync> sync_;
  bool syncing_ = true;
};

}  // namespace

namespace manual_only_first {
void average_gradients(const std::vector<nn::Module*>& replicas) {
  std::vector<std::vector<nn::Parameter*>> params;
  for (nn::Module* m : replicas) params.push_back(m->parameters());
  for (std::size_t i = 0; i < params[0].size(); ++i) {
    for (std::size_t r = 1; r < params.size(); ++r)
      tensor::axpy(1.0f, params[r][i]->grad, params[0][i]->grad);
    tensor::scale(params[0][i]->grad, 1.0f / static_cast<float>(replicas.size()));
    // the bug: the mean is never copied back into the other replicas
  }
}
}  // namespace manual_only_first

namespace naive_dp_average_twice {
std::unique_ptr<ddp::GradSync> make_naive_sync(std::vector<nn::Parameter*> params,
                                               comm::ProcessGroup& group) {
  const float n = static_cast<float>(group.size());
  return std::make_unique<NaiveSync>(std::move(params), group, comm::ReduceOp::kAvg, 1.0f / n);
}
}  // namespace naive_dp_average_twice

namespace naive_dp_sum_only {
std::unique_ptr<ddp::GradSync> make_naive_sync(std::vector<nn::Parameter*> params,
                                               comm::ProcessGroup& group) {
  return std::make_unique<NaiveSync>(std::move(params), group, comm::ReduceOp::kSum, 1.0f);
}
}  // namespace naive_dp_sum_only

namespace hooks_wait_in_hook {
std::unique_ptr<ddp::GradSync> make_hooked_sync(std::vector<nn::Parameter*>,
                                                comm::ProcessGroup& group) {
  return std::make_unique<BlockingHooks>(group);
}
}  // namespace hooks_wait_in_hook

namespace flush_out_of_order {
std::size_t flush_in_order(const std::vector<std::size_t>& pending, std::size_t next,
                           const std::function<void(std::size_t bucket)>& launch) {
  // the bug: launches whatever is complete, as if buckets were independent
  // (and relaunches it on every call)
  for (std::size_t b = next; b < pending.size(); ++b)
    if (pending[b] == 0) launch(b);
  while (next < pending.size() && pending[next] == 0) ++next;
  return next;
}
}  // namespace flush_out_of_order

namespace assign_cap_off_by_one {
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap_bytes,
                                                     std::size_t cap_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t filled = 0;
  for (std::size_t k = param_bytes.size(); k-- > 0;) {
    const std::size_t cap = buckets.size() == 1 ? first_cap_bytes : cap_bytes;
    if (buckets.empty() ||
        filled + param_bytes[k] >= cap) {  // the bug: >= closes a bucket exactly at its cap
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(k);
    filled += param_bytes[k];
  }
  return buckets;
}
}  // namespace assign_cap_off_by_one

namespace ddp_no_broadcast {
std::unique_ptr<ddp::DataParallel> make_ddp(nn::Module& model, comm::ProcessGroup& group,
                                            const ddp::SyncOptions& sync) {
  return std::make_unique<Ddp>(model, group, sync, /*broadcast=*/false, /*no_sync=*/true);
}
}  // namespace ddp_no_broadcast

namespace ddp_always_sync {
std::unique_ptr<ddp::DataParallel> make_ddp(nn::Module& model, comm::ProcessGroup& group,
                                            const ddp::SyncOptions& sync) {
  return std::make_unique<Ddp>(model, group, sync, /*broadcast=*/true, /*no_sync=*/false);
}
}  // namespace ddp_always_sync

namespace gather_mean_of_accuracies {
GatheredEval gather_eval(const EvalCounts& mine, comm::Communicator& comm, int root) {
  const float in[2] = {static_cast<float>(mine.correct), static_cast<float>(mine.samples)};
  std::vector<float> out(comm.rank() == root ? 2 * static_cast<std::size_t>(comm.size()) : 0);
  comm.gather(in, out.data(), 2, comm::DataType::kFloat32, root)->wait();
  GatheredEval g;
  for (std::size_t r = 0; 2 * r < out.size(); ++r) {
    g.per_rank.push_back({static_cast<int64_t>(out[2 * r]), static_cast<int64_t>(out[2 * r + 1])});
    g.accuracy += static_cast<double>(out[2 * r]) / out[2 * r + 1] / comm.size();  // the bug
  }
  return g;
}
}  // namespace gather_mean_of_accuracies

namespace save_without_barrier {
void save_on_root(comm::Communicator& comm, int root, const std::function<void()>& save) {
  if (comm.rank() == root) save();  // the bug: the others return at once
}
}  // namespace save_without_barrier

namespace tied_count_firings {
bool count_contribution(std::vector<int>&, std::vector<std::size_t>& pending, std::size_t,
                        std::size_t bucket) {
  return --pending[bucket] == 0;
}
}  // namespace tied_count_firings

}  // namespace mddp::labs::bugs
