// to_json(Analysis): the `microddp analyze --json` document (docs/analyze.md).
#include <algorithm>

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

// A measure that is only known when positive (a prediction, a rate): null otherwise.
nlohmann::json positive_or_null(double v) {
  return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// Each phase's statistics over all ranks, with its share and slowest rank.
nlohmann::json phases_json(const Analysis& a) {
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& p : a.phases) {
    nlohmann::json j = stats_json(p.all);
    j["share"] = p.share;
    j["rank_mean"] = p.rank_mean;
    j["slowest_rank"] = p.slowest_rank;
    phases[p.name] = j;
  }
  return phases;
}

// One row per all-reduce size; the predictions are null without a link fit.
nlohmann::json allreduces_json(const Analysis& a) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& b : a.buckets) {
    const auto fitted = [&](double v) {
      return b.fit ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    buckets.push_back({{"bytes", b.bytes},
                       {"per_step", b.per_step},
                       {"algorithm", b.algorithm},
                       {"measured_ms", stats_json(b.measured_ms)},
                       {"busbw_gbps", b.busbw_gbps},
                       {"predicted_ms", fitted(b.predicted_ms)},
                       {"predicted_busbw_gbps", fitted(b.predicted_busbw_gbps)},
                       {"latency_share", fitted(b.latency_share)},
                       {"fit", fit_json(b.fit)}});
  }
  return buckets;
}

nlohmann::json hosts_json(const Analysis& a) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& h : a.hosts)
    hosts.push_back({{"host", h.host},
                     {"ranks", h.ranks},
                     {"threads", h.threads},
                     {"cpus", h.cpus_known() ? nlohmann::json(h.cpus) : nlohmann::json(nullptr)},
                     {"oversubscribed", h.oversubscribed()},
                     {"summary", h.describe()}});
  return hosts;
}

// Whether the run oversubscribed its CPUs: null when no host reported its CPU count.
nlohmann::json oversubscribed_json(const Analysis& a) {
  const bool cpus_known =
      std::any_of(a.hosts.begin(), a.hosts.end(), [](const auto& h) { return h.cpus_known(); });
  return cpus_known ? nlohmann::json(oversubscribed(a)) : nlohmann::json(nullptr);
}

// Null unless the hierarchical all-reduce ran.
nlohmann::json levels_json(const Analysis& a) {
  const auto& l = a.levels;
  if (!l) return nullptr;
  return {{"traced_steps", l->traced_steps},
          {"hosts", l->hosts},
          {"ranks_per_host",
           l->ranks_per_host ? nlohmann::json(l->ranks_per_host) : nlohmann::json(nullptr)},
          {"host_ms_per_step", l->host_ms},
          {"cross_host_ms_per_step", l->cross_host_ms},
          {"cross_host_bytes_per_step", l->cross_host_bytes},
          {"predicted_host_ms_per_step", positive_or_null(l->predicted_host_ms)},
          {"predicted_cross_host_ms_per_step", positive_or_null(l->predicted_cross_host_ms)}};
}

nlohmann::json evals_json(const Analysis& a) {
  nlohmann::json evals = nlohmann::json::array();
  for (const auto& e : a.evals)
    evals.push_back({{"step", e.step},
                     {"loss", e.loss},
                     {"accuracy", e.accuracy},
                     {"train_s", positive_or_null(e.train_s)}});
  return evals;
}

nlohmann::json config_json(const RunConfig& c) {
  return {{"world_size", c.world_size},
          {"transport", c.transport},
          {"transport_inferred", c.transport_inferred},
          {"algorithm", c.algorithm},
          {"ddp", c.ddp},
          {"compress", c.compress},
          {"precision", c.precision},
          {"global_batch", c.global_batch},
          {"source", c.source}};
}

nlohmann::json communication_json(const Analysis& a) {
  return {{"exposed_ms_per_step", a.phases[kExposedComm].all.mean},
          {"total_ms_per_step", a.phases[kTotalComm].all.mean},
          {"exposed_share", a.exposed_comm_share},
          {"total_share", a.total_comm_share},
          {"overlap", a.overlap},
          {"bytes_per_step", a.comm_bytes_per_step},
          {"grad_bytes_per_step", a.grad_bytes_per_step},
          {"sent_bytes_per_step", a.sent_bytes_per_step},
          {"compression_ratio", a.compression_ratio()},
          {"predicted_ms_per_step", positive_or_null(a.predicted_comm_ms_per_step)}};
}

}  // namespace

nlohmann::json to_json(const Analysis& a) {
  return {
      {"run_dir", a.dir.string()},
      {"config", config_json(a.config)},
      {"records", a.records},
      {"steps_in_log", a.steps_in_log},
      {"steps_used", a.steps_used},
      {"warmup_skipped", a.warmup_skipped},
      {"phases_ms", phases_json(a)},
      {"communication", communication_json(a)},
      {"samples_per_s", positive_or_null(a.samples_per_s)},
      {"tokens_per_s", positive_or_null(a.tokens_per_s)},
      {"allreduces", allreduces_json(a)},
      {"hierarchical", levels_json(a)},
      {"links", to_json(a.links)},
      {"stragglers", to_json(a.stragglers)},
      {"hosts", hosts_json(a)},
      {"oversubscribed", oversubscribed_json(a)},
      {"evals", evals_json(a)},
      {"verdict",
       {{"kind", a.verdict.kind},
        {"by_shares", a.verdict.by_shares},
        {"evidence", a.verdict.evidence},
        {"advice", a.verdict.advice}}},
      {"notes", a.notes},
  };
}

}  // namespace mddp::perf
