// analyze(): phases, communication, all-reduce timings against the cost
// model, stragglers and the per-step series, over the complete steps of a
// run after its warm-up.
#include "core/perf/analysis.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>

#include "core/comm/algo_step.h"
#include "core/comm/algorithms/algorithms.h"
#include "core/common/check.h"

namespace mddp::perf {
namespace {

struct PhaseField {
  const char* name;
  double StepMetrics::*field;
};
// In PhaseIndex order: the step's phases, then the step and the progress thread's total.
constexpr PhaseField kPhases[] = {{"data", &StepMetrics::data_ms},
                                  {"forward", &StepMetrics::forward_ms},
                                  {"backward", &StepMetrics::backward_ms},
                                  {"exposed_comm", &StepMetrics::exposed_comm_ms},
                                  {"optimizer", &StepMetrics::optimizer_ms},
                                  {"step", &StepMetrics::step_ms},
                                  {"total_comm", &StepMetrics::total_comm_ms}};

using Steps = std::vector<std::vector<StepMetrics>>;  // complete steps, records sorted by rank

void add_phases(Analysis& a, const Steps& steps, int world) {
  for (const auto& p : kPhases) {
    PhaseStats ps{p.name, {}, std::vector<double>(world, 0.0), 0, 0};
    std::vector<double> all;
    for (const auto& step : steps)
      for (const auto& r : step) {
        all.push_back(r.*p.field);
        ps.rank_mean[r.rank] += r.*p.field / static_cast<double>(steps.size());
      }
    ps.all = summarize(std::move(all));
    ps.slowest_rank = static_cast<int>(std::max_element(ps.rank_mean.begin(), ps.rank_mean.end()) -
                                       ps.rank_mean.begin());
    a.phases.push_back(std::move(ps));
  }
  const double step_mean = a.phases[kStep].all.mean;
  for (auto& ps : a.phases) ps.share = step_mean > 0 ? ps.all.mean / step_mean : 0;
}

void add_comm_and_series(Analysis& a, const Steps& steps) {
  double exposed = 0, total = 0, bytes = 0, grad_bytes = 0, sent_bytes = 0, tokens = 0;
  for (const auto& step : steps) {
    StepPoint pt{step.front().step};
    for (const auto& r : step) {
      pt.data_ms += r.data_ms;
      pt.forward_ms += r.forward_ms;
      pt.backward_ms += r.backward_ms;
      pt.exposed_comm_ms += r.exposed_comm_ms;
      pt.optimizer_ms += r.optimizer_ms;
      pt.step_ms += r.step_ms;
      pt.total_comm_ms += r.total_comm_ms;
      bytes += static_cast<double>(r.comm_bytes);
      grad_bytes += static_cast<double>(r.grad_bytes);
      sent_bytes += static_cast<double>(r.sent_bytes);
      tokens += static_cast<double>(r.tokens);
    }
    const double n = static_cast<double>(step.size());
    for (double* v : {&pt.data_ms, &pt.forward_ms, &pt.backward_ms, &pt.exposed_comm_ms,
                      &pt.optimizer_ms, &pt.step_ms, &pt.total_comm_ms})
      *v /= n;
    pt.overlap = overlap_fraction(pt.exposed_comm_ms, pt.total_comm_ms);
    exposed += pt.exposed_comm_ms;
    total += pt.total_comm_ms;
    a.series.push_back(pt);
  }
  a.overlap = overlap_fraction(exposed, total);
  const auto records = static_cast<double>(steps.size() * steps.front().size());
  a.comm_bytes_per_step = bytes / records;
  a.grad_bytes_per_step = grad_bytes / records;
  a.sent_bytes_per_step = sent_bytes / records;
  const double step_ms = a.phases[kStep].all.mean;
  a.exposed_comm_share = a.phases[kExposedComm].share;
  a.total_comm_share = step_ms > 0 ? a.phases[kTotalComm].all.mean / step_ms : 0;
  if (a.config.global_batch > 0 && step_ms > 0)
    a.samples_per_s = a.config.global_batch * 1e3 / step_ms;
  // Every rank's tokens of a step: the global batch's (0 for the other models).
  if (step_ms > 0) a.tokens_per_s = tokens / static_cast<double>(steps.size()) * 1e3 / step_ms;
}

// Note [Measured all-reduce time]. An all-reduce cannot finish before the
// last rank has joined it, so on the ranks that launched it early its span
// (start..end on the progress thread) includes waiting for the late one.
// The rank that joined last waited least: the shortest span across ranks is
// the closest measure of the transfer itself, which is what the alpha-beta
// model predicts. (The waiting is not lost: it shows up as a straggler.)
void add_buckets(Analysis& a, const Steps& steps, const AnalyzeOptions& o) {
  const int world = a.config.world_size;
  std::map<std::size_t, std::vector<double>> by_bytes;
  for (const auto& step : steps) {
    // (index, round) -> (bytes, ms); top-k's all-gathers are not all-reduces.
    // ZeRO-1 (--ddp sharded) cuts a bucket's all-reduce in two halves: its
    // reduce-scatter and the all-gather of its parameters count together as
    // the bucket's all-reduce (the same bytes on the wire).
    std::map<std::pair<int, int>, std::pair<std::size_t, double>> shortest;
    for (const auto& r : step) {
      std::map<std::pair<int, int>, std::pair<std::size_t, double>> mine;
      std::map<int, double> gathers;  // ZeRO-1's all-gather ms by bucket
      for (const auto& b : r.buckets) {
        if (b.start_ns == 0 || b.end_ns <= b.start_ns) continue;  // did not run
        const double ms = static_cast<double>(b.end_ns - b.start_ns) * 1e-6;
        if (b.op == comm::SpanOp::kAllGather) gathers[b.index] += ms;
        if (b.op != comm::SpanOp::kAllReduce && b.op != comm::SpanOp::kReduceScatter) continue;
        mine[{b.index, b.round}] = {b.bytes, ms};
      }
      for (const auto& b : r.buckets)
        if (const auto it = mine.find({b.index, b.round});
            it != mine.end() && b.op == comm::SpanOp::kReduceScatter)
          it->second.second += gathers[b.index];
      for (const auto& [key, v] : mine) {
        auto [it, fresh] = shortest.try_emplace(key, v);
        if (!fresh) it->second.second = std::min(it->second.second, v.second);
      }
    }
    for (const auto& [index, v] : shortest) by_bytes[v.first].push_back(v.second);
  }
  for (const auto& f : o.fits)
    if (f.transport == a.config.transport && f.world_size == world) a.fits.push_back(f);

  bool all_predicted = !by_bytes.empty();
  for (auto it = by_bytes.rbegin(); it != by_bytes.rend(); ++it) {
    BucketStats b;
    b.bytes = it->first;
    b.per_step = static_cast<double>(it->second.size()) / static_cast<double>(steps.size());
    b.measured_ms = summarize(it->second);
    b.busbw_gbps =
        bus_bandwidth_gbps(static_cast<double>(b.bytes), b.measured_ms.median * 1e-3, world);
    b.algorithm = resolve_algorithm(a.config.algorithm, b.bytes, world);
    if (const auto p = predict(a, b.bytes)) {
      b.fit = p->fit;
      b.predicted_ms = p->ms;
      b.predicted_busbw_gbps = p->busbw_gbps;
      b.latency_share =
          p->ms > 0 ? allreduce_seconds(b.algorithm, 0, world, p->fit.link) * 1e3 / p->ms : 0;
      a.predicted_comm_ms_per_step += b.predicted_ms * b.per_step;
    } else {
      all_predicted = false;
    }
    a.buckets.push_back(std::move(b));
  }
  if (!all_predicted) a.predicted_comm_ms_per_step = 0;
}

// The hierarchical all-reduce's levels over the steps that carry algorithm
// steps with a level (LevelSplit); nothing when none does.
void add_levels(Analysis& a, const Steps& steps, const std::vector<RankPlacement>& members,
                const AnalyzeOptions& o) {
  LevelSplit s;
  for (const auto& step : steps) {
    double host = 0, cross = 0, bytes = 0;
    bool hierarchical = false;
    for (const auto& r : step)
      for (const auto& b : r.buckets)
        for (const comm::AlgoStep& x : b.steps) {
          if (x.level == comm::StepLevel::kWorld) continue;
          hierarchical = true;
          const double ms = static_cast<double>(x.end_ns - x.start_ns) * 1e-6;
          (x.level == comm::StepLevel::kHost ? host : cross) += ms;
          if (x.level == comm::StepLevel::kCrossHost) bytes += static_cast<double>(x.send_bytes);
        }
    if (!hierarchical) continue;
    ++s.traced_steps;
    s.host_ms += host / static_cast<double>(step.size());
    s.cross_host_ms += cross / static_cast<double>(step.size());
    s.cross_host_bytes += bytes;
  }
  if (s.traced_steps == 0) return;
  for (double* v : {&s.host_ms, &s.cross_host_ms, &s.cross_host_bytes})
    *v /= static_cast<double>(s.traced_steps);
  const auto hosts = host_loads(members);
  s.hosts = static_cast<int>(hosts.size());
  if (s.hosts > 0 && std::all_of(hosts.begin(), hosts.end(), [&](const HostLoad& h) {
        return h.ranks.size() == hosts.front().ranks.size();
      }))
    s.ranks_per_host = static_cast<int>(hosts.front().ranks.size());
  const auto shm = find_fit(o.fits, "shm", "ring", s.ranks_per_host);
  const auto tcp = find_fit(o.fits, "tcp", "ring", s.hosts);
  if (s.ranks_per_host > 1 && shm && tcp)
    for (const auto& b : steps.front().front().buckets) {
      const auto t = hierarchical_allreduce_seconds(static_cast<double>(b.bytes), s.hosts,
                                                    s.ranks_per_host, shm->link, tcp->link);
      s.predicted_host_ms += t.host_s * 1e3;
      s.predicted_cross_host_ms += t.cross_s * 1e3;
    }
  a.levels = s;
  if (a.config.algorithm == "auto") {
    a.config.algorithm = "hierarchical";
    a.notes.push_back("algorithm auto ran hierarchical (its steps run within and across hosts)");
  }
}

// Auto's direct all-reduce (one host's shared memory, DDP's buckets there)
// where the traced steps show it ran: then the buckets are predicted with
// its cost and fit, not with those of the algorithm their size picks.
void add_direct(Analysis& a, const Steps& steps) {
  if (a.config.algorithm != "auto") return;
  for (const auto& step : steps)
    for (const auto& r : step)
      for (const auto& b : r.buckets)
        if (comm::algorithm_of(b.steps) == "direct") {
          a.config.algorithm = "direct";
          a.notes.push_back(
              "algorithm auto ran direct (every rank read its block out of its peers' buckets "
              "in shared memory)");
          return;
        }
}

// Each link's rate over the steps that carry algorithm steps (the traced
// ones): Note [Link rate] in collectives.cc.
void add_links(Analysis& a, const Steps& steps) {
  for (const auto& step : steps) {
    const bool traced = std::any_of(step.begin(), step.end(), [](const StepMetrics& r) {
      return std::any_of(r.buckets.begin(), r.buckets.end(),
                         [](const comm::CommSpan& b) { return !b.steps.empty(); });
    });
    if (traced)
      add_link_rates(build_collectives(step, a.config.world_size, a.config.algorithm, std::nullopt),
                     a.links);
  }
  sort_slowest_first(a.links);
}

void add_notes(Analysis& a, const AnalyzeOptions& o, int64_t incomplete) {
  auto& c = a.config;
  if (c.source != "job.json") {
    std::string unknown;
    for (const auto& [what, value] : {std::pair{"ddp mode", c.ddp}, {"compression", c.compress}})
      if (value.empty()) unknown += str(unknown.empty() ? "" : ", ", what);
    if (c.global_batch == 0)
      unknown += str(unknown.empty() ? "" : ", ", "global batch (--batch, for samples/s)");
    a.notes.push_back(
        str("no job.json in the run directory: the world size is the ranks seen in the log",
            unknown.empty() ? "" : "; unknown: " + unknown));
  }
  if (c.transport_inferred)
    a.notes.push_back(
        str("transport auto taken as ", c.transport, ": the ranks ran on ",
            c.transport == "shm" ? "one host" : "several hosts",
            c.source == "job.json" ? " (job.json's members)" : " (by their clock offsets)"));
  if (incomplete > 0)
    a.notes.push_back(
        str(incomplete, " step(s) lack some rank's record (a job cut short?) and are left out"));
  if (!a.hosts.empty() && std::none_of(a.hosts.begin(), a.hosts.end(),
                                       [](const HostLoad& h) { return h.cpus_known(); }))
    a.notes.push_back(
        "job.json records no CPU counts (a run of an older microddp): oversubscription (more "
        "compute "
        "threads than CPUs on a host) was not checked");
  if (a.config.world_size > 1 && !a.buckets.empty() && a.predicted_comm_ms_per_step == 0) {
    if (c.algorithm == "hierarchical")
      a.notes.push_back(
          a.levels && a.levels->predicted_host_ms > 0
              ? "the hierarchical all-reduce is predicted level by level (above), not per size"
              : "no prediction of the hierarchical all-reduce: it needs the shm ring fit at the "
                "ranks per "
                "host and the tcp ring fit at the hosts (`microddp bench allreduce --fit` on "
                "each), and "
                "an even layout");
    else if (c.transport.empty() || c.transport == "auto")
      a.notes.push_back("no prediction: the transport is unknown (pass --transport tcp|shm)");
    else if (o.fits.empty())
      a.notes.push_back(
          "no prediction: no alpha-beta fits (run `microddp bench allreduce --fit`, or pass --fit "
          "FILE)");
    else
      a.notes.push_back(str("no prediction for some sizes: no fit for transport ", c.transport,
                            " and ", a.config.world_size,
                            " ranks (run `microddp bench allreduce --fit` with that setup)"));
  }
}

// EvalPoint::train_s for each evaluation: the slowest rank's step time,
// summed over the steps up to the evaluation's (all of them must be logged).
// Running sums along the steps, so each evaluation is one binary search.
void set_train_time(const std::vector<StepMetrics>& records, std::vector<EvalPoint>& evals) {
  std::map<int64_t, double> slowest_ms;
  for (const auto& r : records)
    if (!r.eval) slowest_ms[r.step] = std::max(slowest_ms[r.step], r.step_ms);
  std::vector<std::pair<int64_t, double>> upto;  // (step, ms of the logged steps up to it)
  double ms = 0;
  for (const auto& [step, t] : slowest_ms) upto.emplace_back(step, ms += t);
  for (auto& e : evals) {
    const auto end = std::upper_bound(upto.begin(), upto.end(), e.step,
                                      [](int64_t step, const auto& u) { return step < u.first; });
    const int64_t logged = end - upto.begin();  // steps at or before e.step
    e.train_s = logged == e.step && logged > 0 ? std::prev(end)->second / 1000 : 0;
  }
}

}  // namespace

std::string resolve_algorithm(const std::string& algorithm, std::size_t bytes, int world_size) {
  if (algorithm != "auto") return algorithm;
  return comm::to_string(comm::choose_all_reduce_algorithm(bytes, world_size));
}

std::optional<Prediction> predict(const Analysis& a, std::size_t bytes) {
  const int world = a.config.world_size;
  const std::string algorithm = resolve_algorithm(a.config.algorithm, bytes, world);
  if (algorithm == "hierarchical") return std::nullopt;  // two links: LevelSplit's prediction
  const auto fit = find_fit(a.fits, a.config.transport, algorithm, world);
  if (!fit) return std::nullopt;
  const double s = allreduce_seconds(algorithm, static_cast<double>(bytes), world, fit->link);
  return Prediction{s * 1e3, bus_bandwidth_gbps(static_cast<double>(bytes), s, world), *fit};
}

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = static_cast<int64_t>(v.size());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  const std::size_t mid = v.size() / 2;
  s.median = v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  // Nearest rank: the smallest value with at least 95% of the values at or below it.
  const auto rank = static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(v.size())));
  s.p95 = v[std::max<std::size_t>(rank, 1) - 1];
  s.min = v.front();
  s.max = v.back();
  return s;
}

Analysis analyze(const RunLog& run, const AnalyzeOptions& o) {
  Analysis a;
  a.dir = run.dir;
  a.config = run.config;
  a.min_late_ms = o.min_late_ms;
  if (a.config.algorithm.empty()) a.config.algorithm = "auto";  // the flag's default
  const int world = a.config.world_size;
  std::set<int64_t> steps;
  for (const auto& r : run.records) {
    if (r.eval) {
      a.evals.push_back({r.step, r.eval_loss, r.eval_accuracy});
      continue;
    }
    if (r.rank >= world)
      throw InputError(str(run.dir.string(), ": a record of rank ", r.rank, " in a world of ",
                           world, " (job.json and metrics.jsonl disagree?)"));
    ++a.records;
    steps.insert(r.step);
  }
  a.steps_in_log = static_cast<int64_t>(steps.size());
  set_train_time(run.records, a.evals);
  Steps complete = complete_steps(run.records, world);
  if (complete.empty())
    throw InputError(str(run.dir.string(), "/metrics.jsonl holds no complete training step (",
                         a.records, " training records from ", world,
                         " ranks): did the job run at least one step with every rank?"));
  const int64_t incomplete = a.steps_in_log - static_cast<int64_t>(complete.size());
  // Skip the warm-up (first allocations, page faults, cold caches), but never
  // most of a short run.
  a.warmup_skipped = std::min<int64_t>(o.warmup_steps, static_cast<int64_t>(complete.size()) / 4);
  complete.erase(complete.begin(), complete.begin() + a.warmup_skipped);
  a.steps_used = static_cast<int64_t>(complete.size());

  add_phases(a, complete, world);
  add_comm_and_series(a, complete);
  add_levels(a, complete, run.members, o);
  add_direct(a, complete);
  add_buckets(a, complete, o);
  add_links(a, complete);
  if (world > 1) {
    std::vector<StepTimeline> timelines;
    timelines.reserve(complete.size());
    for (const auto& step : complete) timelines.push_back(build_timeline(step, world));
    a.stragglers = summarize_stragglers(timelines, o.min_late_ms);
  }
  a.hosts = host_loads(run.members);
  add_notes(a, o, incomplete);
  if (run.events.other_size_records > 0)
    a.notes.push_back(str(
        "the world size changed (an elastic job, --min-nproc): the ", run.events.other_size_records,
        " records of the attempts with another number of ranks are left out; this is the ", world,
        "-rank part of the run"));
  a.verdict = classify(a);
  return a;
}

bool oversubscribed(const Analysis& a) {
  return std::any_of(a.hosts.begin(), a.hosts.end(),
                     [](const HostLoad& h) { return h.oversubscribed(); });
}

}  // namespace mddp::perf
