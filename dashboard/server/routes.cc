#include "dashboard/server/routes.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

#include "core/perf/collectives.h"
#include "core/perf/timeline.h"
#include "dashboard/server/chrome_trace.h"
#include "dashboard/server/job_json.h"
#include "dashboard/server/prometheus.h"
#include "dashboard/server/request_target.h"

namespace mddp::dashboard {

using nlohmann::json;

namespace {

Reply json_reply(const json& j) {
  return {200, "application/json", dump_json(j), {}};
}

Reply error_reply(int status, const std::string& why) {
  return {status, "application/json", dump_json({{"error", why}}), {}};
}

// The steps of the log's in-memory tail that every rank reported (a training
// record each), in step order. Chosen from the log's (step, rank) index, so
// no record is copied: see MetricsLog::step_ranks.
std::vector<int64_t> complete_step_numbers(const coordinator::Job& job) {
  const int world = job.world_size();
  auto keys = job.metrics_log().step_ranks();
  std::erase_if(keys, [world](const auto& k) { return k.rank < 0 || k.rank >= world; });
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());  // delivery is at-least-once
  std::vector<int64_t> out;
  for (std::size_t i = 0, j = 0; i < keys.size(); i = j) {
    while (j < keys.size() && keys[j].step == keys[i].step) ++j;
    if (j - i == static_cast<std::size_t>(world)) out.push_back(keys[i].step);
  }
  return out;
}

// The complete steps among first..last in the tail, oldest first, each as
// its ranks' records in rank order. Copies only those steps' records.
std::vector<std::vector<perf::StepMetrics>> complete_steps(const coordinator::Job& job,
                                                           int64_t first, int64_t last) {
  std::vector<perf::StepMetrics> records;
  for (auto& r : job.metrics_log().steps(first, last)) records.push_back(std::move(r.metrics));
  return perf::complete_steps(records, job.world_size());
}

Reply api_job(const RequestTarget&, const RouteContext& c) {
  return json_reply(job_json(c.tracker.snapshot(coordinator::Clock::now())));
}

Reply api_ranks(const RequestTarget&, const RouteContext& c) {
  return json_reply(ranks_json(c.tracker.snapshot(coordinator::Clock::now())));
}

Reply api_metrics(const RequestTarget& t, const RouteContext& c) {
  const auto since =
      static_cast<uint64_t>(t.integer("since", 0, 0, std::numeric_limits<int64_t>::max()));
  const auto max =
      static_cast<std::size_t>(t.integer("max", kMetricsPageDefault, 1, kMetricsPageMax));
  json records = json::array();
  uint64_t next = since;
  for (const auto& r : c.job.metrics_log().since(since, max)) {
    records.push_back(record_json(r));
    next = r.seq;
  }
  return json_reply({{"next", next}, {"records", std::move(records)}});
}

Reply api_timeline(const RequestTarget& t, const RouteContext& c) {
  int64_t step = 0;
  if (t.has("step")) {
    step = t.integer("step", 0, 0, std::numeric_limits<int64_t>::max());
  } else {
    const auto numbers = complete_step_numbers(c.job);
    if (numbers.empty()) return error_reply(404, "no step has been reported by every rank yet");
    step = numbers.back();
  }
  const auto steps = complete_steps(c.job, step, step);
  if (steps.empty())
    return error_reply(404, str("step ", step, " is not complete in the in-memory tail"));
  return json_reply(perf::to_json(perf::build_timeline(steps.front(), c.job.world_size())));
}

Reply api_stragglers(const RequestTarget& t, const RouteContext& c) {
  const auto n =
      static_cast<std::size_t>(t.integer("steps", kStragglerStepsDefault, 1, kStragglerStepsMax));
  const auto numbers = complete_step_numbers(c.job);
  std::vector<perf::StepTimeline> timelines;
  if (!numbers.empty()) {
    const auto steps = complete_steps(c.job, numbers[numbers.size() - std::min(n, numbers.size())],
                                      numbers.back());
    // A step completed since the index was taken may have come along: the last n.
    for (std::size_t i = steps.size() - std::min(n, steps.size()); i < steps.size(); ++i)
      timelines.push_back(perf::build_timeline(steps[i], c.job.world_size()));
  }
  return json_reply(perf::to_json(perf::summarize_stragglers(timelines)));
}

Reply api_trace(const RequestTarget& t, const RouteContext& c) {
  const auto numbers = complete_step_numbers(c.job);
  if (numbers.empty()) return error_reply(404, "no step has been reported by every rank yet");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t to = t.integer("to", numbers.back(), 0, kMax);
  const int64_t from = t.integer("from", std::max<int64_t>(0, to - kTraceStepsDefault + 1), 0, to);
  if (to - from + 1 > kTraceStepsMax)
    throw BadRequest(str("from=", from, "&to=", to, " spans more than ", kTraceStepsMax, " steps"));
  std::vector<perf::StepTimeline> timelines;
  for (const auto& s : complete_steps(c.job, from, to))
    timelines.push_back(perf::build_timeline(s, c.job.world_size()));
  if (timelines.empty())
    return error_reply(404, str("no complete step in ", from, "..", to, " in the in-memory tail"));
  std::vector<std::string> hosts;
  for (const auto& m : c.job.members()) hosts.push_back(m.host);
  Reply r = json_reply(chrome_trace(timelines, hosts));
  r.headers.emplace_back("Content-Disposition",
                         str("attachment; filename=\"microddp-trace-", timelines.front().step, "-",
                             timelines.back().step, ".json\""));
  return r;
}

// The all-reduces of a traced step, step by step (core/perf/collectives.h):
// the Collectives view. Without ?step=, the latest traced step that every
// rank reported; `traced_steps` lists the recent ones to choose from; the
// steps of one bucket (?bucket=, default the largest).
Reply api_collectives(const RequestTarget& t, const RouteContext& c) {
  const int world = c.job.world_size();
  std::vector<int64_t> traced;
  for (int64_t s : complete_step_numbers(c.job))
    if (perf::traced_step(s, world)) traced.push_back(s);
  int64_t step = 0;
  if (t.has("step")) {
    step = t.integer("step", 0, 0, std::numeric_limits<int64_t>::max());
  } else {
    if (world > perf::kStepTraceMaxRanks)
      return error_reply(
          404, str("a job of ", world, " ranks traces no all-reduce steps: only jobs of up to ",
                   perf::kStepTraceMaxRanks,
                   " ranks do (a step's transfers grow with the square of the ranks)"));
    if (traced.empty())
      return error_reply(
          404, str("no traced step (every ", perf::kStepTraceEvery,
                   "th carries its all-reduces' steps) has been reported by every rank yet"));
    step = traced.back();
  }
  const auto steps = complete_steps(c.job, step, step);
  if (steps.empty())
    return error_reply(404, str("step ", step, " is not complete in the in-memory tail"));
  const JobSnapshot snap = c.tracker.snapshot(coordinator::Clock::now());
  const int bucket = static_cast<int>(t.integer("bucket", -1, -1, std::numeric_limits<int>::max()));
  json j = perf::to_json(perf::build_collectives(steps.front(), world, snap.algorithm, snap.fit),
                         bucket);
  const std::size_t keep = std::min<std::size_t>(traced.size(), kCollectiveStepsListed);
  j["traced_steps"] =
      std::vector<int64_t>(traced.end() - static_cast<std::ptrdiff_t>(keep), traced.end());
  return json_reply(j);
}

Reply prometheus(const RequestTarget&, const RouteContext& c) {
  return {200,
          kPrometheusContentType,
          prometheus_text(c.tracker.snapshot(coordinator::Clock::now())),
          {}};
}

Reply static_file(const RequestTarget& t, const RouteContext& c) {
  StaticReply s = c.files.get(t.path);
  return {s.status, std::move(s.content_type), std::move(s.body), {}};
}

using Handler = std::function<Reply(const RequestTarget&, const RouteContext&)>;
const std::map<std::string, Handler, std::less<>>& api_routes() {
  static const std::map<std::string, Handler, std::less<>> routes = {
      {"/api/job", api_job},
      {"/api/ranks", api_ranks},
      {"/api/metrics", api_metrics},
      {"/api/timeline", api_timeline},
      {"/api/stragglers", api_stragglers},
      {"/api/trace", api_trace},
      {"/api/collectives", api_collectives},
      {"/metrics", prometheus},
  };
  return routes;
}

}  // namespace

Reply route(std::string_view target, const RouteContext& ctx) {
  try {
    const RequestTarget t = parse_target(target);
    if (auto it = api_routes().find(t.path); it != api_routes().end()) return it->second(t, ctx);
    if (t.path.rfind("/api/", 0) == 0) return error_reply(404, "no such route: " + t.path);
    return static_file(t, ctx);
  } catch (const BadRequest& e) {
    return error_reply(400, e.what());
  }
}

}  // namespace mddp::dashboard
