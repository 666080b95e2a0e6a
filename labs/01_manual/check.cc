// Lab 1's checker, in this process: K replicas (K = each world size) of the
// small model, each after backward on its equal share of one batch; after
// the student's average_gradients every replica must hold the whole batch's
// gradient (one model's backward on the whole batch). Then its speed next to
// core's average_replica_gradients on two replicas of a larger model.
#include <algorithm>
#include <memory>

#include "core/common/timer.h"
#include "core/ddp/manual_average.h"
#include "core/nn/models.h"
#include "labs/checks.h"
#include "labs/support/dp_fixture.h"

namespace mddp::labs {
namespace {

CaseResult average_case(const ManualFns& fns, int k) {
  std::vector<std::unique_ptr<nn::Sequential>> replicas;
  std::vector<nn::Module*> ptrs;
  for (int r = 0; r < k; ++r) {
    replicas.push_back(dp_model());
    replicas.back()->zero_grad();
    backward_shard(*replicas.back(), r, k);
    ptrs.push_back(replicas.back().get());
  }
  const Grads want = whole_batch_grads(k);
  fns.average_gradients(ptrs);
  for (int r = 0; r < k; ++r) {
    CaseResult c = compare_grads(*replicas[r], want, shard_grads(r, k), k, str("replica ", r));
    if (!c.message.empty()) return c;
  }
  return CaseResult::ok();
}

// Median time of averaging two replicas of FullMLP(256, 4).
double time_average(void (*average)(const std::vector<nn::Module*>&)) {
  auto a = nn::build_model({.kind = "mlp", .width = 256, .depth = 4, .classes = 10}, {256});
  auto b = nn::build_model({.kind = "mlp", .width = 256, .depth = 4, .classes = 10}, {256});
  std::vector<double> t;
  for (int i = 0; i < 21; ++i) {
    const int64_t t0 = now_ns();
    average({a.get(), b.get()});
    t.push_back(ns_to_ms(now_ns() - t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

void check_manual(const Implementations& impl, const CheckOptions& o, Report& report) {
  int cases = 0;
  for (int k : o.world_sizes) {
    const auto [problem, result] = run_guarded([&] { return average_case(impl.manual, k); });
    if (problem != Problem::kNone) {
      report.fail(str("average of ", k, " replica", k == 1 ? "" : "s", ": ", result.message),
                  result.details);
      return;
    }
    ++cases;
  }
  report.passed("every replica holds the whole batch's gradient, 1 to 7 replicas", cases);
  char line[160];
  std::snprintf(
      line, sizeof line,
      "speed: averaging two replicas of FullMLP(256, 4): yours %.3f ms, reference %.3f ms",
      time_average(impl.manual.average_gradients), time_average(ddp::average_replica_gradients));
  report.note(line);
}

}  // namespace mddp::labs
