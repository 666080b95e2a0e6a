#include "coordinator/job_file.h"

#include <fstream>
#include <map>

#include "core/common/check.h"
#include "core/common/files.h"

namespace mddp::coordinator {
namespace {

nlohmann::json count_or_null(int n) {
  return n > 0 ? nlohmann::json(n) : nlohmann::json(nullptr);
}

// Every rank with what it runs on; a rank that named no device runs on the job's.
nlohmann::json members_json(const std::vector<Member>& members, const nlohmann::json& config) {
  const std::string job_device = config.contains("device") && config["device"].is_string()
                                     ? config["device"].get<std::string>()
                                     : std::string();
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& m : members)
    ranks.push_back({{"rank", m.rank},
                     {"host", m.host},
                     {"device", m.device.empty() ? job_device : m.device},
                     {"pid", m.pid},
                     {"threads", count_or_null(m.threads)},
                     {"cpus", count_or_null(m.cpus)}});
  return ranks;
}

// Why each attempt after the first formed, and where it resumed once known.
nlohmann::json restarts_json(const JobFile& f) {
  std::map<int, MetricsLog::Resume> resumed;
  for (const auto& r : f.resumes) resumed[r.attempt] = r;
  nlohmann::json restarts = nlohmann::json::array();
  for (const auto& r : f.restarts) {
    nlohmann::json j = verdict_json(r.verdict);
    j.update({{"attempt", r.attempt}, {"unix_ns", r.unix_ns}});
    if (r.shrink) j["shrink"] = true;  // the survivors went on: nobody restarted
    if (r.grow) j["grow"] = true;      // and workers joined them, healed from live peers
    if (auto it = resumed.find(r.attempt); it != resumed.end())
      j.update(
          {{"resumed_from_step", it->second.from_step}, {"steps_lost", it->second.steps_lost}});
    restarts.push_back(j);
  }
  return restarts;
}

}  // namespace

nlohmann::json verdict_json(const Verdict& v) {
  return {
      {"cause", v.cause == control::Cause::kNone ? "coordinator restarted" : to_string(v.cause)},
      {"rank", v.rank},
      {"peer", v.peer},
      {"host", v.host},
      {"pid", v.pid},
      {"doing", v.doing},
      {"message", v.message}};
}

nlohmann::json job_file_json(const JobFile& f) {
  nlohmann::json config = nlohmann::json::parse(f.config_json, nullptr, false);
  if (config.is_discarded() || !config.is_object()) config = nlohmann::json::object();
  nlohmann::json attempts = nlohmann::json::array();
  for (const auto& a : f.attempts)
    attempts.push_back({{"attempt", a.number}, {"world_size", count_or_null(a.world_size)}});
  return {{"job_id", f.job_id},
          {"world_size", f.world_size},
          {"max_world_size", f.max_world_size},
          {"min_world_size", f.min_nproc > 0 ? f.min_nproc : f.max_world_size},
          {"attempt", f.attempt},
          {"max_restarts", f.max_restarts},
          {"attempts", attempts},
          {"restarts", restarts_json(f)},
          {"started_unix_ns", f.started_unix_ns},
          {"config", config},
          {"members", members_json(f.members, config)}};
}

std::string write_job_file(const std::filesystem::path& run_dir, const JobFile& f) {
  const auto path = (run_dir / "job.json").string();
  const std::string error = write_atomically(path, job_file_json(f).dump(2) + "\n");
  return error.empty() ? error : str("cannot write ", path, ": ", error);
}

std::vector<Restart> earlier_restarts(const std::filesystem::path& run_dir) {
  if (run_dir.empty()) return {};
  std::ifstream in(run_dir / "job.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("restarts") || !j["restarts"].is_array()) return {};
  std::vector<Restart> out;
  for (const auto& r : j["restarts"]) {
    Restart old;
    old.attempt = r.value("attempt", 0);
    old.unix_ns = r.value("unix_ns", int64_t{0});
    old.verdict.message = r.value("message", std::string());
    old.verdict.rank = r.value("rank", -1);
    old.verdict.host = r.value("host", std::string());
    old.shrink = r.value("shrink", false);
    old.grow = r.value("grow", false);
    out.push_back(old);
  }
  return out;
}

}  // namespace mddp::coordinator
