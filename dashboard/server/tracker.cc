#include "dashboard/server/tracker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "control/job_config_json.h"
#include "core/comm/algo_step.h"
#include "core/common/check.h"
#include "core/perf/host_load.h"
#include "core/train/mixed_precision.h"

namespace mddp::dashboard {

using coordinator::TimePoint;

namespace {

// The stored fits; a broken file costs the comparison, not the dashboard.
std::vector<perf::LinkFit> read_fits() {
  try {
    return perf::load_fits(perf::default_fit_path());
  } catch (const InputError& e) {
    spdlog::warn("dashboard: no benchmark fit: {}", e.what());
    return {};
  }
}

// The backend the workers pick (train::process_group_backend); a config
// they would refuse shows the backend it asked for.
std::string backend_of(const train::TrainConfig& config) {
  try {
    return train::process_group_backend(config);
  } catch (const InputError&) {
    return config.dist.backend;
  }
}

}  // namespace

Tracker::Tracker(const coordinator::Job& job)
    : job_(job),
      config_(control::parse_job_config(job.options().config_json)),
      fits_(read_fits()) {}

// Every rank evaluates the same model: the first report of a step gives its
// point, and the sample, which only rank 0's carries, joins it whenever it
// comes. Each rank's stream is in step order, but not the ranks among
// themselves: rank 0's report of one step can come after another rank's
// report of a later one, so a point is found by its step.
void Tracker::observe_eval(const perf::StepMetrics& m) {
  auto after = std::find_if(evals_.rbegin(), evals_.rend(),
                            [&](const EvalPoint& e) { return e.step <= m.step; });
  if (after != evals_.rend() && after->step == m.step) {
    if (!m.eval_sample.empty()) after->sample = m.eval_sample;
    return;
  }
  evals_.insert(after.base(), {m.step, m.eval_loss, m.eval_accuracy, m.eval_sample});
}

void Tracker::observe(const std::vector<control::MetricsRecord>& records, TimePoint now) {
  for (const auto& r : records) {
    const perf::StepMetrics& m = r.metrics;
    if (m.eval) {
      observe_eval(m);
      continue;
    }
    RankWindow& w = ranks_[m.rank];
    w.bytes += m.comm_bytes;
    w.grad_bytes += m.grad_bytes;
    if (m.clock_offset_ns != 0) w.clock_offset_ns = m.clock_offset_ns;
    if (!std::isfinite(m.loss) && (w.nonfinite_since == 0 || m.step < w.nonfinite_since))
      w.nonfinite_since = m.step;
    w.last.push_back({r.time_unix_ns,
                      m.step,
                      m.loss,
                      m.step_ms,
                      {m.data_ms, m.forward_ms, m.backward_ms, m.exposed_comm_ms, m.total_comm_ms,
                       m.optimizer_ms}});
    if (w.last.size() > kPhaseWindow) w.last.pop_front();
    step_ = std::max(step_, m.step);
    goodput_.add(r.attempt, m.step, m.step_ms, r.time_unix_ns);
    for (const comm::CommSpan& b : m.buckets)
      ran_direct_ = ran_direct_ || comm::algorithm_of(b.steps) == "direct";
  }
  const control::State state = job_.status().state;
  if (state != control::State::kForming && !running_since_) running_since_ = now;
  if (job_.status().terminal() && !ended_at_) ended_at_ = now;
}

// Per rank, the steps it finished in its last 2 s of records (its own clock,
// so unsynchronised hosts do not matter), summed over ranks; a rank with a
// single step in the window counts by that step's duration.
double Tracker::samples_per_s() const {
  const double per_rank_batch =
      static_cast<double>(config_.batch * config_.accumulate) / std::max(1, job_.world_size());
  double rate = 0;
  for (const auto& [rank, w] : ranks_) {
    if (w.last.empty()) continue;
    const int64_t newest = w.last.back().time_unix_ns;
    auto first = std::find_if(w.last.begin(), w.last.end(), [&](const Sample& s) {
      return s.time_unix_ns >= newest - kRateWindowNs;
    });
    const auto steps = std::distance(first, w.last.end());
    if (steps >= 2 && newest > first->time_unix_ns)
      rate += static_cast<double>(steps - 1) * per_rank_batch /
              (static_cast<double>(newest - first->time_unix_ns) * 1e-9);
    else if (w.last.back().step_ms > 0)
      rate += per_rank_batch / (w.last.back().step_ms * 1e-3);
  }
  return rate;
}

std::string Tracker::rank_state(const coordinator::RankHealth& h, const control::JobStatus& status,
                                TimePoint now) const {
  if (h.left) return h.left_ok ? "done" : "failed";
  if (status.state == control::State::kFailed && status.failed_rank() == h.rank) return "failed";
  return now - h.last_seen > 2 * job_.options().heartbeat_interval ? "silent" : "running";
}

JobSnapshot Tracker::snapshot(TimePoint now) const {
  JobSnapshot s;
  s.job_id = job_.options().job_id;
  s.status = job_.status();
  s.world_size = job_.world_size();
  s.max_world_size = job_.options().world_size;
  describe_config(s);
  s.step = step_;
  s.samples_per_s = samples_per_s();
  s.evals = evals_;
  s.records_total = job_.metrics_log().count();
  s.restarts = job_.restarts();
  s.resumes = job_.metrics_log().resumes();
  s.membership = job_.membership_log().lines();
  s.goodput = goodput_.value();
  s.attempt = s.restarts.empty() ? 0 : s.restarts.back().attempt;
  if (running_since_)
    s.elapsed_s = std::chrono::duration<double>(ended_at_.value_or(now) - *running_since_).count();
  double loss_sum = 0;
  for (const auto& [rank, w] : ranks_)
    if (!w.last.empty()) loss_sum += w.last.back().loss;
  if (!ranks_.empty()) s.loss = loss_sum / static_cast<double>(ranks_.size());

  const std::vector<coordinator::Member> members = job_.members();
  add_ranks(s, members, now);
  if (!members.empty() && !fits_.empty()) s.fit = link_fit(s, members);
  if (s.total_steps > 0 && s.samples_per_s > 0 && !s.status.terminal())
    s.eta_s = static_cast<double>(std::max<int64_t>(0, s.total_steps - s.step)) *
              static_cast<double>(s.global_batch) / s.samples_per_s;
  return s;
}

void Tracker::describe_config(JobSnapshot& s) const {
  s.backend = backend_of(config_);
  s.transport = config_.dist.transport;
  s.algorithm = config_.dist.algorithm;
  s.ddp = config_.dist.ddp;
  s.compress =
      train::effective_compress(config_);  // what DDP sends, --precision's default included
  s.precision = config_.precision;
  uint64_t bytes = 0, grad_bytes = 0;
  for (const auto& [rank, w] : ranks_) {
    bytes += w.bytes;
    grad_bytes += w.grad_bytes;
  }
  if (bytes > 0) s.compression_ratio = static_cast<double>(grad_bytes) / static_cast<double>(bytes);
  s.model = config_.model.kind;
  s.global_batch = config_.batch * config_.accumulate;
}

void Tracker::add_ranks(JobSnapshot& s, const std::vector<coordinator::Member>& members,
                        TimePoint now) const {
  std::vector<perf::RankPlacement> placement;
  for (const auto& m : members) placement.push_back({m.rank, m.host, m.threads, m.cpus});
  std::set<int> oversubscribed;  // ranks on an oversubscribed host
  for (const auto& host : perf::host_loads(placement))
    if (host.oversubscribed()) oversubscribed.insert(host.ranks.begin(), host.ranks.end());
  for (const coordinator::RankHealth& h : job_.ranks()) {
    RankSnapshot r;
    r.rank = h.rank;
    r.host = h.host;
    r.phase = h.progress.phase;
    r.step = h.progress.step;
    r.state = rank_state(h, s.status, now);
    if (r.state == "failed")
      r.message = h.leave_message.empty() && s.status.failed_rank() == h.rank ? s.status.failure()
                                                                              : h.leave_message;
    r.heartbeat_age_ms = std::chrono::duration<double, std::milli>(now - h.last_seen).count();
    s.total_steps = std::max(s.total_steps, h.progress.total_steps);
    if (static_cast<std::size_t>(h.rank) < members.size()) {
      r.device = members[h.rank].device.empty() ? config_.device : members[h.rank].device;
      r.pid = members[h.rank].pid;
      r.threads = members[h.rank].threads;
      r.cpus = members[h.rank].cpus;
      r.oversubscribed = oversubscribed.count(h.rank) > 0;
    }
    if (auto it = ranks_.find(h.rank); it != ranks_.end()) {
      const RankWindow& w = it->second;
      if (w.clock_offset_ns != 0) r.clock_offset_ms = static_cast<double>(w.clock_offset_ns) * 1e-6;
      r.allreduce_bytes = w.bytes;
      if (!w.last.empty()) r.loss = w.last.back().loss;
      r.nonfinite_since = w.nonfinite_since;
      for (const Sample& x : w.last)
        for (std::size_t p = 0; p < kPhases.size(); ++p) r.phase_mean_ms[p] += x.phase_ms[p];
      for (double& v : r.phase_mean_ms)
        v /= static_cast<double>(std::max<std::size_t>(1, w.last.size()));
    }
    s.ranks.push_back(std::move(r));
  }
}

std::optional<perf::LinkFit> Tracker::link_fit(
    const JobSnapshot& s, const std::vector<coordinator::Member>& members) const {
  std::string transport = config_.dist.transport;
  if (transport == "auto")
    transport = std::all_of(members.begin(), members.end(),
                            [&](const auto& m) { return m.host == members[0].host; })
                    ? "shm"
                    : "tcp";
  if (s.backend == "nccl") transport = "nccl";
  std::string algorithm = config_.dist.algorithm;
  if (algorithm == "auto") algorithm = ran_direct_ ? "direct" : "ring";
  return perf::find_fit(fits_, transport, algorithm, s.world_size);
}

}  // namespace mddp::dashboard
