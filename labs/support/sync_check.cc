#include "labs/support/sync_check.h"

#include <unistd.h>

#include <algorithm>

#include "core/common/rng.h"
#include "core/common/timer.h"
#include "core/nn/loss.h"
#include "core/nn/models.h"
#include "labs/support/dp_fixture.h"

namespace mddp::labs {

MakeSync core_sync(ddp::Mode mode) {
  return [mode](std::vector<nn::Parameter*> p, comm::ProcessGroup& g) {
    return ddp::make_grad_sync({.mode = mode}, std::move(p), g);
  };
}

void grad_sync_cases(
    DpRank& r, const std::string& what, const MakeSync& make,
    const std::function<CaseResult(const WatchedGroup&, std::size_t params)>& structure) {
  auto model = dp_model();
  const Grads want = whole_batch_grads(r.world());
  const Grads local = shard_grads(r.rank(), r.world());
  std::unique_ptr<ddp::GradSync> sync;
  for (int pass = 1; pass <= 2; ++pass) {
    const bool ok = r.run(str(what, ", backward ", pass, " of 2"), [&] {
      WatchedGroup& g = r.group();
      if (!sync) {
        sync = make(model->parameters(), g);
        model->set_grad_ready_hook([&](nn::Parameter& p) { sync->on_grad_ready(p); });
      }
      model->zero_grad();
      g.clear();
      g.set_phase("backward");
      backward_shard(*model, r.rank(), r.world());
      g.set_phase("finish");
      sync->finish();
      g.set_phase("");
      if (structure) {
        CaseResult s = structure(g, model->parameters().size());
        if (!s.message.empty()) return s;
      }
      return compare_grads(*model, want, local, r.world(), str("rank ", r.rank()));
    });
    if (!ok) break;
  }
  model->set_grad_ready_hook({});
}

namespace {

constexpr int64_t kWidth = 256, kBatch = 32, kSteps = 10;

struct Sample {
  double step_ms, exposed_ms;
  int64_t collectives;
};

RankFinding time_rank(const std::vector<SyncContender>& contenders, const CheckOptions& o,
                      int world, int r, comm::Store& store) {
  RankFinding f;
  f.rank = r;
  const comm::JobIdentity job{str("lab-speed-", ::getppid()), ""};
  auto comm = comm::connect(store, r, world, job, o.speed_transport,
                            comm::CommOptions{comm::Algorithm::kAuto, o.timeout});
  WatchedGroup group(*comm);
  Rng rng(7 + r);
  std::vector<float> xs(kBatch * kWidth), ys(kBatch);
  for (float& v : xs) v = rng.normal();
  for (float& v : ys) v = static_cast<float>(rng.below(10));
  const auto x = tensor::Tensor::from_vector({kBatch, kWidth}, xs),
             y = tensor::Tensor::from_vector({kBatch}, ys);
  std::vector<std::vector<Sample>> samples(contenders.size());
  try {
    for (int step = 0; step <= kSteps; ++step) {  // step 0 warms up
      for (std::size_t c = 0; c < contenders.size(); ++c) {
        auto model =
            nn::build_model({.kind = "mlp", .width = kWidth, .depth = 4, .classes = 10}, {kWidth});
        auto sync = contenders[c].make(model->parameters(), group);
        model->set_grad_ready_hook([&](nn::Parameter& p) { sync->on_grad_ready(p); });
        nn::CrossEntropyLoss loss;
        group.clear();
        comm->barrier()->wait();
        const int64_t t0 = now_ns();
        loss.forward(model->forward(x), y);
        model->backward(loss.backward(), false);
        const int64_t t1 = now_ns();
        sync->finish();
        const int64_t t2 = now_ns();
        model->set_grad_ready_hook({});
        if (step > 0)
          samples[c].push_back(
              {ns_to_ms(t2 - t0), ns_to_ms(t2 - t1), static_cast<int64_t>(group.calls().size())});
      }
    }
  } catch (const std::exception& e) {
    f.problem = Problem::kException;
    f.message = str("while timing: ", e.what());
    return f;
  }
  for (auto& s : samples) {
    auto median = [&](auto key) {
      std::vector<double> v;
      for (const Sample& x : s) v.push_back(key(x));
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    f.evidence.push_back({median([](const Sample& x) { return x.step_ms; }),
                          median([](const Sample& x) { return x.exposed_ms; }),
                          s.front().collectives});
  }
  return f;
}

}  // namespace

void sync_speed(const std::vector<SyncContender>& contenders, const CheckOptions& o,
                Report& report) {
  const int n = o.speed_ranks;
  if (n < 2) return;
  const auto ranks = run_timing(
      n, [&](int r, comm::Store& store) { return time_rank(contenders, o, n, r, store); },
      o.timeout * 10 + std::chrono::seconds(30), report);
  if (!ranks) return;
  report.note(str("speed: ", n, " ranks over ", comm::to_string(o.speed_transport), ", FullMLP(",
                  kWidth, ", 4), batch ", kBatch, " per rank; rank 0's median of ", kSteps,
                  " steps"));
  char line[200];
  std::snprintf(line, sizeof line, "%-22s %18s %26s %18s", "", "backward + sync",
                "exposed (after backward)", "collectives/step");
  report.note(line);
  for (std::size_t c = 0; c < contenders.size(); ++c) {
    const auto& row = (*ranks)[0].evidence[c];
    std::snprintf(line, sizeof line, "%-22s %15.2f ms %23.2f ms %18lld", contenders[c].name.c_str(),
                  row[0].get<double>(), row[1].get<double>(),
                  static_cast<long long>(row[2].get<int64_t>()));
    report.note(line);
  }
}

}  // namespace mddp::labs
