#include "dashboard/server/chrome_trace.h"

#include <algorithm>
#include <set>
#include <string>

namespace mddp::dashboard {

using nlohmann::json;

namespace {
constexpr int kComputeTid = 0, kCommTid = 1;

json metadata(const char* what, int pid, int tid, json args) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// "all-reduce", "reduce-scatter", "all-gather".
std::string span_name(comm::SpanOp op) {
  std::string s = comm::to_string(op);
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}
}  // namespace

json chrome_trace(const std::vector<perf::StepTimeline>& steps,
                  const std::vector<std::string>& hosts) {
  json events = json::array();
  if (steps.empty()) return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  const int64_t base_ns = steps.front().origin_unix_ns;
  std::set<int> ranks;
  for (const perf::StepTimeline& t : steps) {
    // ms relative to this step's origin -> µs relative to the first step's.
    const double shift_us = static_cast<double>(t.origin_unix_ns - base_ns) * 1e-3;
    auto span = [&](std::string name, const char* cat, int pid, int tid, double start_ms,
                    double end_ms, json args) {
      events.push_back({{"name", std::move(name)},
                        {"cat", cat},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", tid},
                        {"ts", shift_us + start_ms * 1e3},
                        {"dur", std::max(0.0, end_ms - start_ms) * 1e3},
                        {"args", std::move(args)}});
    };
    for (const perf::RankTimeline& r : t.ranks) {
      ranks.insert(r.rank);
      for (const perf::PhaseSpan& p : r.phases)
        span(p.name, "compute", r.rank, kComputeTid, p.start_ms, p.end_ms, {{"step", t.step}});
      for (const perf::BucketSpanMs& b : r.buckets)
        span(span_name(b.op) + " bucket " + std::to_string(b.index), "comm", r.rank, kCommTid,
             b.start_ms, b.end_ms,
             {{"step", t.step}, {"bucket", b.index}, {"bytes", b.bytes}, {"busbw", b.busbw_gbps}});
    }
  }
  for (int r : ranks) {
    const std::string host = static_cast<std::size_t>(r) < hosts.size() ? hosts[r] : "";
    events.push_back(metadata("process_name", r, 0,
                              {{"name", "rank " + std::to_string(r) + " (" + host + ")"}}));
    events.push_back(metadata("process_sort_index", r, 0, {{"sort_index", r}}));
    events.push_back(metadata("thread_name", r, kComputeTid, {{"name", "compute"}}));
    events.push_back(metadata("thread_name", r, kCommTid, {{"name", "comm"}}));
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace mddp::dashboard
