#include "core/perf/timeline.h"

#include <algorithm>
#include <set>

#include "core/common/median.h"
#include "core/perf/cost_model.h"

namespace mddp::perf {
namespace {

// nccl-tests' busbw of a span's collective. A reduce-scatter moves (n-1)/n
// of its buffer, half an all-reduce's traffic; an all-gather's `bytes` is
// one rank's part of the n gathered.
double span_busbw_gbps(const comm::CommSpan& b, int world) {
  const double s = static_cast<double>(b.end_ns - b.start_ns) * 1e-9,
               bytes = static_cast<double>(b.bytes);
  switch (b.op) {
    case comm::SpanOp::kReduceScatter:
      return bus_bandwidth_gbps(bytes, s, world) / 2;
    case comm::SpanOp::kAllGather:
      return bus_bandwidth_gbps(bytes * world, s, world) / 2;
    case comm::SpanOp::kAllReduce:
      break;
  }
  return bus_bandwidth_gbps(bytes, s, world);
}

// When a rank's first bucket became ready, on the common clock, and the
// parts of its step before that moment. The pieces add up: arrival = start +
// data + forward + backward_until_ready, which is what lets a lateness be
// split into the phases that caused it.
struct Arrival {
  double arrival_ms = 0;
  std::map<std::string, double> parts;  // start | data | forward | backward
};

Arrival arrival_of(const StepMetrics& m, int64_t origin) {
  const auto first =
      std::min_element(m.buckets.begin(), m.buckets.end(),
                       [](const auto& a, const auto& b) { return a.ready_ns < b.ready_ns; });
  const double start_ms = ns_to_ms_since(m.start_ns + m.clock_offset_ns, origin);
  const double ready_ms = ns_to_ms_since(first->ready_ns + m.clock_offset_ns, origin);
  const double backward_start = start_ms + m.data_ms + m.forward_ms;
  return {ready_ms,
          {{"start", start_ms},
           {"data", m.data_ms},
           {"forward", m.forward_ms},
           {"backward", std::max(0.0, ready_ms - backward_start)}}};
}

}  // namespace

double ns_to_ms_since(int64_t ns, int64_t origin_ns) {
  return static_cast<double>(ns - origin_ns) * 1e-6;
}

// The late rank is compared with the median of the *other* ranks, so that
// with two ranks the reference is the punctual one rather than the midpoint.
std::optional<Straggler> find_straggler(const std::vector<StepMetrics>& records, int64_t origin) {
  if (records.size() < 2) return std::nullopt;
  std::vector<Arrival> arrivals;
  for (const auto& m : records) {
    if (m.buckets.empty()) return std::nullopt;
    arrivals.push_back(arrival_of(m, origin));
  }
  const auto late = std::max_element(
      arrivals.begin(), arrivals.end(),
      [](const Arrival& a, const Arrival& b) { return a.arrival_ms < b.arrival_ms; });
  const std::size_t late_i = static_cast<std::size_t>(late - arrivals.begin());
  std::vector<double> others;
  for (std::size_t i = 0; i < arrivals.size(); ++i)
    if (i != late_i) others.push_back(arrivals[i].arrival_ms);
  Straggler s;
  s.rank = records[late_i].rank;
  s.late_ms = late->arrival_ms - median(others);
  double worst = -1e300;
  for (const auto& [phase, value] : late->parts) {
    std::vector<double> ref;
    for (std::size_t i = 0; i < arrivals.size(); ++i)
      if (i != late_i) ref.push_back(arrivals[i].parts.at(phase));
    s.excess_ms[phase] = value - median(ref);
    if (s.excess_ms[phase] > worst) {
      worst = s.excess_ms[phase];
      s.phase = phase;
    }
  }
  return s;
}

StepTimeline build_timeline(const std::vector<StepMetrics>& step_records, int world_size) {
  StepTimeline t;
  if (step_records.empty()) return t;
  t.step = step_records.front().step;
  t.origin_unix_ns = step_records.front().start_ns + step_records.front().clock_offset_ns;
  for (const auto& m : step_records)
    t.origin_unix_ns = std::min(t.origin_unix_ns, m.start_ns + m.clock_offset_ns);
  const int64_t origin = t.origin_unix_ns;
  for (const auto& m : step_records) {
    RankTimeline r;
    r.rank = m.rank;
    const auto at = [&](int64_t steady_ns) {
      return ns_to_ms_since(steady_ns + m.clock_offset_ns, origin);
    };
    r.start_ms = at(m.start_ns);
    double cursor = r.start_ms;
    // The phases run one after another on the training thread.
    const std::pair<const char*, double> phases[] = {{"data", m.data_ms},
                                                     {"forward", m.forward_ms},
                                                     {"backward", m.backward_ms},
                                                     {"exposed_comm", m.exposed_comm_ms},
                                                     {"optimizer", m.optimizer_ms}};
    for (const auto& [name, ms] : phases) {
      r.phases.push_back({name, cursor, cursor + ms});
      cursor += ms;
    }
    r.end_ms = std::max(cursor, r.start_ms + m.step_ms);
    for (const auto& b : m.buckets)
      r.buckets.push_back({b.index, b.bytes, at(b.ready_ns), at(b.launch_ns), at(b.start_ns),
                           at(b.end_ns), span_busbw_gbps(b, world_size), b.op});
    t.ranks.push_back(std::move(r));
  }
  std::sort(t.ranks.begin(), t.ranks.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  t.straggler = find_straggler(step_records, origin);
  return t;
}

std::vector<std::vector<StepMetrics>> complete_steps(const std::vector<StepMetrics>& records,
                                                     int world_size) {
  std::map<int64_t, std::vector<StepMetrics>> by_step;
  std::set<std::pair<int64_t, int>> seen;  // (step, rank): delivery is at-least-once
  for (const auto& m : records)
    if (!m.eval && m.rank >= 0 && m.rank < world_size && seen.emplace(m.step, m.rank).second)
      by_step[m.step].push_back(m);
  std::vector<std::vector<StepMetrics>> out;
  for (auto& [step, v] : by_step) {
    if (static_cast<int>(v.size()) != world_size) continue;
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    out.push_back(std::move(v));
  }
  return out;
}

StragglerSummary summarize_stragglers(const std::vector<StepTimeline>& steps, double min_late_ms) {
  StragglerSummary s;
  s.steps = static_cast<int64_t>(steps.size());
  s.min_late_ms = min_late_ms;
  std::map<int, StragglerRank> by_rank;
  for (const auto& t : steps) {
    if (!t.straggler || t.straggler->late_ms < min_late_ms) continue;
    StragglerRank& r = by_rank[t.straggler->rank];
    r.rank = t.straggler->rank;
    ++r.late_steps;
    r.late_ms_total += t.straggler->late_ms;
    ++r.by_phase[t.straggler->phase];
  }
  for (auto& [rank, r] : by_rank) s.ranks.push_back(std::move(r));
  std::sort(s.ranks.begin(), s.ranks.end(),
            [](const auto& a, const auto& b) { return a.late_ms_total > b.late_ms_total; });
  if (!s.ranks.empty()) {
    const StragglerRank& w = s.ranks.front();
    const auto phase =
        std::max_element(w.by_phase.begin(), w.by_phase.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    s.worst = Straggler{w.rank, phase->first, w.late_ms_total, {}};
  }
  return s;
}

nlohmann::json to_json(const Straggler& s) {
  return {{"rank", s.rank}, {"phase", s.phase}, {"late_ms", s.late_ms}, {"excess_ms", s.excess_ms}};
}

nlohmann::json to_json(const StepTimeline& t) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : t.ranks) {
    nlohmann::json phases = nlohmann::json::array(), buckets = nlohmann::json::array();
    for (const auto& p : r.phases)
      phases.push_back({{"name", p.name}, {"start_ms", p.start_ms}, {"end_ms", p.end_ms}});
    for (const auto& b : r.buckets)
      buckets.push_back({{"index", b.index},
                         {"bytes", b.bytes},
                         {"ready_ms", b.ready_ms},
                         {"launch_ms", b.launch_ms},
                         {"start_ms", b.start_ms},
                         {"end_ms", b.end_ms},
                         {"busbw_gbps", b.busbw_gbps},
                         {"op", comm::to_string(b.op)}});
    ranks.push_back({{"rank", r.rank},
                     {"start_ms", r.start_ms},
                     {"end_ms", r.end_ms},
                     {"phases", phases},
                     {"buckets", buckets}});
  }
  return {{"step", t.step},
          {"origin_unix_ns", t.origin_unix_ns},
          {"ranks", ranks},
          {"straggler", t.straggler ? to_json(*t.straggler) : nlohmann::json(nullptr)}};
}

nlohmann::json to_json(const StragglerSummary& s) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : s.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"late_steps", r.late_steps},
                     {"late_ms_total", r.late_ms_total},
                     {"by_phase", r.by_phase}});
  nlohmann::json worst = nullptr;
  if (s.worst) worst = {{"rank", s.worst->rank}, {"phase", s.worst->phase}};
  return {{"steps", s.steps}, {"min_late_ms", s.min_late_ms}, {"ranks", ranks}, {"worst", worst}};
}

}  // namespace mddp::perf
