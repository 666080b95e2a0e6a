// to_json(Analysis): the `microddp analyze --json` document (docs/analyze.md).
#include "core/perf/analysis.h"

namespace mddp::perf {
namespace {

nlohmann::json stats_json(const Stats& s) {
  return {{"n", s.n},     {"mean", s.mean}, {"median", s.median},
          {"p95", s.p95}, {"min", s.min},   {"max", s.max}};
}

nlohmann::json fit_json(const std::optional<LinkFit>& f) {
  if (!f) return nullptr;
  return {{"transport", f->transport},
          {"algorithm", f->algorithm},
          {"world_size", f->world_size},
          {"alpha_us", f->link.alpha_s * 1e6},
          {"beta_gbps", f->link.beta_Bps * 1e-9},
          {"r2", f->r2}};
}

}  // namespace

nlohmann::json to_json(const Analysis& a) {
  const auto& c = a.config;
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& p : a.phases) {
    nlohmann::json j = stats_json(p.all);
    j["share"] = p.share;
    j["rank_mean"] = p.rank_mean;
    j["slowest_rank"] = p.slowest_rank;
    phases[p.name] = j;
  }
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& b : a.buckets)
    buckets.push_back(
        {{"bytes", b.bytes},
         {"per_step", b.per_step},
         {"algorithm", b.algorithm},
         {"measured_ms", stats_json(b.measured_ms)},
         {"busbw_gbps", b.busbw_gbps},
         {"predicted_ms", b.fit ? nlohmann::json(b.predicted_ms) : nlohmann::json(nullptr)},
         {"predicted_busbw_gbps",
          b.fit ? nlohmann::json(b.predicted_busbw_gbps) : nlohmann::json(nullptr)},
         {"latency_share", b.fit ? nlohmann::json(b.latency_share) : nlohmann::json(nullptr)},
         {"fit", fit_json(b.fit)}});
  nlohmann::json hosts = nlohmann::json::array();
  bool cpus_known = false;
  for (const auto& h : a.hosts) {
    cpus_known = cpus_known || h.cpus_known();
    hosts.push_back({{"host", h.host},
                     {"ranks", h.ranks},
                     {"threads", h.threads},
                     {"cpus", h.cpus_known() ? nlohmann::json(h.cpus) : nlohmann::json(nullptr)},
                     {"oversubscribed", h.oversubscribed()},
                     {"summary", h.describe()}});
  }
  nlohmann::json levels;  // null unless the hierarchical all-reduce ran
  if (const auto& l = a.levels) {
    const auto predicted = [&](double v) {
      return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    levels = {{"traced_steps", l->traced_steps},
              {"hosts", l->hosts},
              {"ranks_per_host",
               l->ranks_per_host ? nlohmann::json(l->ranks_per_host) : nlohmann::json(nullptr)},
              {"host_ms_per_step", l->host_ms},
              {"cross_host_ms_per_step", l->cross_host_ms},
              {"cross_host_bytes_per_step", l->cross_host_bytes},
              {"predicted_host_ms_per_step", predicted(l->predicted_host_ms)},
              {"predicted_cross_host_ms_per_step", predicted(l->predicted_cross_host_ms)}};
  }
  nlohmann::json evals = nlohmann::json::array();
  for (const auto& e : a.evals)
    evals.push_back(
        {{"step", e.step},
         {"loss", e.loss},
         {"accuracy", e.accuracy},
         {"train_s", e.train_s > 0 ? nlohmann::json(e.train_s) : nlohmann::json(nullptr)}});
  return {
      {"run_dir", a.dir.string()},
      {"config",
       {{"world_size", c.world_size},
        {"transport", c.transport},
        {"transport_inferred", c.transport_inferred},
        {"algorithm", c.algorithm},
        {"ddp", c.ddp},
        {"compress", c.compress},
        {"precision", c.precision},
        {"global_batch", c.global_batch},
        {"source", c.source}}},
      {"records", a.records},
      {"steps_in_log", a.steps_in_log},
      {"steps_used", a.steps_used},
      {"warmup_skipped", a.warmup_skipped},
      {"phases_ms", phases},
      {"communication",
       {{"exposed_ms_per_step", a.phases[kExposedComm].all.mean},
        {"total_ms_per_step", a.phases[kTotalComm].all.mean},
        {"exposed_share", a.exposed_comm_share},
        {"total_share", a.total_comm_share},
        {"overlap", a.overlap},
        {"bytes_per_step", a.comm_bytes_per_step},
        {"grad_bytes_per_step", a.grad_bytes_per_step},
        {"sent_bytes_per_step", a.sent_bytes_per_step},
        {"compression_ratio", a.compression_ratio()},
        {"predicted_ms_per_step", a.predicted_comm_ms_per_step > 0
                                      ? nlohmann::json(a.predicted_comm_ms_per_step)
                                      : nlohmann::json(nullptr)}}},
      {"samples_per_s",
       a.samples_per_s > 0 ? nlohmann::json(a.samples_per_s) : nlohmann::json(nullptr)},
      {"tokens_per_s",
       a.tokens_per_s > 0 ? nlohmann::json(a.tokens_per_s) : nlohmann::json(nullptr)},
      {"allreduces", buckets},
      {"hierarchical", levels},
      {"stragglers", to_json(a.stragglers)},
      {"hosts", hosts},
      {"oversubscribed", cpus_known ? nlohmann::json(oversubscribed(a)) : nlohmann::json(nullptr)},
      {"evals", evals},
      {"verdict",
       {{"kind", a.verdict.kind},
        {"by_shares", a.verdict.by_shares},
        {"evidence", a.verdict.evidence},
        {"advice", a.verdict.advice}}},
      {"notes", a.notes},
  };
}

}  // namespace mddp::perf
