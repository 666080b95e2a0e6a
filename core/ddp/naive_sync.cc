// Naive data parallelism: wait for the whole backward, then all-reduce
// every gradient, one blocking call per parameter. Nothing overlaps, and n
// parameters cost n latencies — the baseline the hooked and bucketed
// strategies improve on. docs/naive.md.
#include "core/common/timer.h"
#include "core/ddp/strategies.h"

namespace mddp::ddp {

NaiveSync::NaiveSync(std::vector<nn::Parameter*> params, const Compression& compress,
                     comm::ProcessGroup& comm)
    : comm_(comm), units_(units_per_parameter(params, compress)) {}

void NaiveSync::on_grad_ready(nn::Parameter&) {}

void NaiveSync::finish() {
  stats_ = {};
  const int64_t t0 = now_ns();
  for (auto& u : units_) {  // registration order
    u->launch(comm_);
    u->advance(comm_);
    u->complete(stats_);
  }
  stats_.exposed_ms = ns_to_ms(now_ns() - t0);
}

}  // namespace mddp::ddp
