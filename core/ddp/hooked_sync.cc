// Hooked DDP (hooks without bucketing): each parameter's all-reduce is
// launched asynchronously from its grad-ready hook, so the last layers'
// gradients travel while earlier layers are still in backward. The step
// waits for all of them before the optimiser. One collective per parameter:
// many small messages, each paying the latency α. docs/hooks.md. A
// parameter used several times launches after its last contribution
// (Note [Contributions]: here each parameter is its own bucket).
#include "core/common/check.h"
#include "core/common/timer.h"
#include "core/ddp/strategies.h"

namespace mddp::ddp {

HookedSync::HookedSync(std::vector<nn::Parameter*> params, const Compression& compress,
                       comm::ProcessGroup& comm)
    : comm_(comm), units_(units_per_parameter(params, compress)), uses_(uses_of(params)) {
  for (std::size_t i = 0; i < params.size(); ++i) index_of_[params[i]] = i;
  uses_left_ = uses_;
  pending_.assign(params.size(), 1);
}

void HookedSync::on_grad_ready(nn::Parameter& p) {
  auto it = index_of_.find(&p);
  MDDP_CHECK(it != index_of_.end(), "grad-ready hook for unknown parameter ", p.name);
  const std::size_t i = it->second;
  MDDP_CHECK(uses_left_[i] > 0, "parameter ", p.name, " became ready more often than it is used (",
             uses_[i], ") in one backward");
  if (!count_contribution(uses_left_, pending_, i, i)) return;
  SyncUnit& u = *units_[i];
  u.mark_ready(now_ns());
  u.launch(comm_);
  launch_order_.push_back(it->second);
}

void HookedSync::finish() {
  stats_ = {};
  MDDP_CHECK(launch_order_.size() == units_.size(), "only ", launch_order_.size(), " of ",
             units_.size(),
             " parameters got a gradient in this backward (unused parameters are not supported)");
  const int64_t t0 = now_ns();
  for (std::size_t i : launch_order_) units_[i]->advance(comm_);
  for (std::size_t i : launch_order_) units_[i]->complete(stats_);
  stats_.exposed_ms = ns_to_ms(now_ns() - t0);
  launch_order_.clear();
  uses_left_ = uses_;
  pending_.assign(units_.size(), 1);
}

}  // namespace mddp::ddp
