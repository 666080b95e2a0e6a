#include "dashboard/server/job_json.h"

namespace mddp::dashboard {

using nlohmann::json;

namespace {
json or_null(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}
}  // namespace

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json job_json(const JobSnapshot& s) {
  json restarts = json::array();
  for (const coordinator::Restart& r : s.restarts) {
    // Where the attempt resumed: known once its first record arrived.
    json from_step = nullptr, steps_lost = nullptr;
    for (const auto& resume : s.resumes)
      if (resume.attempt == r.attempt) {
        from_step = resume.from_step;
        steps_lost = resume.steps_lost;
      }
    restarts.push_back({{"attempt", r.attempt},
                        {"cause", control::to_string(r.verdict.cause)},
                        {"rank", r.verdict.rank},
                        {"host", r.verdict.host},
                        {"message", r.verdict.message},
                        {"unix_ns", r.unix_ns},
                        {"from_step", from_step},
                        {"steps_lost", steps_lost},
                        {"shrink", r.shrink},  // the survivors went on in their processes
                        {"grow", r.grow}});    // and newcomers joined them (a heal)
  }
  json membership = json::array();
  for (const json& line : s.membership) {
    json m = line;
    m.erase("members");  // the ranks table has them; left and joined say what changed
    membership.push_back(std::move(m));
  }
  json evals = json::array();
  for (const EvalPoint& e : s.evals) {
    json point = {{"step", e.step}, {"loss", e.loss}, {"accuracy", e.accuracy}};
    if (!e.sample.empty()) point["sample"] = e.sample;
    evals.push_back(std::move(point));
  }
  return {{"job_id", s.job_id},
          {"state", control::to_string(s.status.state)},
          {"world_size", s.world_size},
          {"max_world_size", s.max_world_size},
          {"attempt", s.attempt},
          {"restarts", restarts},
          {"membership", membership},
          {"goodput", s.goodput},
          {"backend", s.backend},
          {"transport", s.transport},
          {"algorithm", s.algorithm},
          {"ddp", s.ddp},
          {"compress", s.compress},
          {"compression_ratio", s.compression_ratio},
          {"precision", s.precision},
          {"model", s.model},
          {"global_batch", s.global_batch},
          {"step", s.step},
          {"total_steps", s.total_steps},
          {"samples_per_s", s.samples_per_s},
          {"eta_s", or_null(s.eta_s)},
          {"elapsed_s", s.elapsed_s},
          {"loss", or_null(s.loss)},
          {"eval", evals},
          {"failure", s.status.failure().empty() ? json(nullptr) : json(s.status.failure())},
          {"failed_rank", s.status.failed_rank()},
          {"fit", s.fit ? json{{"transport", s.fit->transport},
                               {"algorithm", s.fit->algorithm},
                               {"world_size", s.fit->world_size},
                               {"alpha_s", s.fit->link.alpha_s},
                               {"beta_Bps", s.fit->link.beta_Bps},
                               {"r2", s.fit->r2}}
                        : json(nullptr)}};
}

json ranks_json(const JobSnapshot& s) {
  json out = json::array();
  for (const RankSnapshot& r : s.ranks)
    out.push_back(
        {{"rank", r.rank},
         {"host", r.host},
         {"device", r.device},
         {"pid", r.pid},
         {"threads", r.threads > 0 ? json(r.threads) : json(nullptr)},
         {"cpus", r.cpus > 0 ? json(r.cpus) : json(nullptr)},
         {"oversubscribed", r.oversubscribed},
         {"state", r.state},
         {"phase", r.phase},
         {"step", r.step},
         {"heartbeat_age_ms", r.heartbeat_age_ms},
         {"clock_offset_ms", or_null(r.clock_offset_ms)},
         {"loss", r.loss && std::isfinite(*r.loss) ? json(*r.loss) : json(nullptr)},
         {"nonfinite_since", r.nonfinite_since > 0 ? json(r.nonfinite_since) : json(nullptr)},
         {"message", r.message}});
  return out;
}

json record_json(const control::MetricsRecord& r) {
  return coordinator::MetricsLog::to_json(r);
}

// Every client gets every record, so each byte left out here is saved
// (clients x records) times: the stream drops the clock fields the page
// never reads (the timeline it draws comes aligned from /api/timeline).
json stream_record_json(const control::MetricsRecord& r) {
  json j = record_json(r);
  for (const char* key : {"time_unix_ns", "received_unix_ns", "clock_offset_ns", "start_ns",
                          "comm_bytes", "grad_bytes", "sent_bytes"})
    j.erase(key);
  // A bucket's all-reduce as its duration: the page only needs busbw, an
  // all-reduce's (top-k's all-gathers and PowerSGD's second round left out).
  json buckets = json::array();
  for (const auto& b : r.metrics.buckets)
    if (b.op == comm::SpanOp::kAllReduce && b.round == 0)
      buckets.push_back({{"index", b.index},
                         {"bytes", b.bytes},
                         {"ms", static_cast<double>(b.end_ns - b.start_ns) / 1e6}});
  j["buckets"] = std::move(buckets);
  return j;
}

std::string job_frame(const JobSnapshot& s) {
  return dump_json({{"type", "job"}, {"job", job_json(s)}, {"ranks", ranks_json(s)}});
}

std::string metrics_frame(const std::vector<std::string>& records) {
  // Spliced as text: each record was serialised once for all clients.
  std::string out = R"({"type":"metrics","records":[)";
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (i) out += ',';
    out += records[i];
  }
  return out + "]}";
}

}  // namespace mddp::dashboard
