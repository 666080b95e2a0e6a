// Reading a run directory: metrics.jsonl (the coordinator's MetricsLog) and,
// when present, job.json (the job's config).
#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "core/common/check.h"
#include "core/common/json_number.h"
#include "core/common/log.h"
#include "core/perf/analysis.h"

namespace mddp::perf {
namespace {

// Ranks on one host share one steady clock (CLOCK_MONOTONIC counts from that
// host's boot), so their clock offsets agree up to the estimate's error (half
// a heartbeat round trip, well under a millisecond). Ranks on different hosts
// differ by the difference of their boot times: seconds at least.
constexpr double kSameHostOffsetMs = 50.0;

std::string str_or(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// A positive count, else 0 ("unknown": absent, null, or not a number).
int count_or_0(const nlohmann::json& j, const char* key) {
  return std::max(0, number_at<int>(j, key).value_or(0));
}

// job.json is written by the coordinator once the job has formed
// (coordinator/job.cc): {"world_size": N, "config": {"batch": 64, "dist":
// {"ddp", "transport", "algorithm", "compress", ...}, ...}, "members":
// [{"rank", "host", "device", "threads", "cpus", ...}]}. Read leniently: the
// analysis needs a few keys and must not break when the file grows; threads
// and cpus are absent in the runs of older versions.
void read_job(const std::filesystem::path& path, RunConfig& c,
              std::vector<RankPlacement>& members) {
  std::ifstream in(path);
  if (!in) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(str(path.string(), ": not valid JSON (", e.what(), ")"));
  }
  if (!j.is_object()) throw InputError(str(path.string(), ": expected a JSON object"));
  c.world_size = number_at<int>(j, "world_size").value_or(c.world_size);
  const nlohmann::json& cfg = j.contains("config") && j["config"].is_object() ? j["config"] : j;
  c.global_batch = number_at<int64_t>(cfg, "batch").value_or(c.global_batch);
  if (cfg.contains("dist") && cfg["dist"].is_object()) {
    const auto& d = cfg["dist"];
    c.transport = str_or(d, "transport");
    c.algorithm = str_or(d, "algorithm");
    c.ddp = str_or(d, "ddp");
    c.compress = str_or(d, "compress");
  }
  // --precision (absent before it existed: fp32). bf16/fp16 send 16-bit
  // gradients when --compress is left at none (train::effective_compress).
  c.precision = cfg.contains("precision") ? str_or(cfg, "precision") : "fp32";
  const bool local_sgd = cfg.contains("dist") && cfg["dist"].is_object() &&
                         number_at<int64_t>(cfg["dist"], "local_sgd").value_or(0) > 0;
  if (c.precision != "fp32" && c.compress == "none" && !local_sgd) c.compress = c.precision;
  if (j.contains("members") && j["members"].is_array())
    for (const auto& m : j["members"])
      if (const auto rank = m.is_object() ? number_at<int>(m, "rank") : std::nullopt)
        members.push_back(
            {*rank, str_or(m, "host"), count_or_0(m, "threads"), count_or_0(m, "cpus")});
  // `auto` picks shm exactly when every rank is on one host
  // (core/comm/transport/connect.cc): the members' hosts say whether they were.
  if (c.transport == "auto" && j.contains("members") && j["members"].is_array() &&
      !j["members"].empty()) {
    std::set<std::string> hosts;
    for (const auto& m : j["members"]) hosts.insert(str_or(m, "host"));
    if (!hosts.count("")) {
      c.transport = hosts.size() == 1 ? "shm" : "tcp";
      c.transport_inferred = true;
    }
  }
  c.source = "job.json";
}

// Without job.json's hosts: ranks on one host share one steady clock.
std::string infer_transport(const std::vector<StepMetrics>& records) {
  std::map<int, int64_t> offset;  // first known offset per rank
  for (const auto& r : records)
    if (r.clock_offset_ns != 0) offset.emplace(r.rank, r.clock_offset_ns);
  if (offset.size() < 2) return "";
  const auto [lo, hi] =
      std::minmax_element(offset.begin(), offset.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; });
  return static_cast<double>(hi->second - lo->second) * 1e-6 < kSameHostOffsetMs ? "shm" : "tcp";
}

// The coordinator's event lines have a kind of their own (records' are
// "step" and "eval").
bool is_event(const nlohmann::json& j) {
  const std::string kind = str_or(j, "kind");
  return kind == "attempt" || kind == "restart" || kind == "resume" || kind == "membership";
}

// An event line of the coordinator ("kind": "attempt", "restart", "resume":
// Note [Exactly once by (attempt, rank, step)] in coordinator/metrics_log.h).
// A resume from step S supersedes the records of earlier attempts past S:
// they stay in the file, and readers leave them out.
// `world_size`: the size of the last attempt that formed, kept from line to line.
void apply_event(const nlohmann::json& j, std::vector<StepMetrics>& out,
                 std::vector<int>& attempt_of, std::vector<RestartEvent>* restarts,
                 int& world_size) {
  const std::string kind = str_or(j, "kind");
  const int attempt = number_at<int>(j, "attempt").value_or(0);
  if (kind == "restart" && restarts)
    restarts->push_back({attempt, str_or(j, "cause"), number_at<int>(j, "rank").value_or(-1),
                         str_or(j, "host"), str_or(j, "message"), -1, 0, world_size, 0,
                         j.value("shrink", false), j.value("grow", false)});
  if (kind == "attempt") {
    world_size = number_at<int>(j, "world_size").value_or(0);
    if (restarts)
      for (auto& r : *restarts)
        if (r.attempt == attempt) r.world_size = world_size;
  }
  if (kind != "resume") return;
  const int64_t from = number_at<int64_t>(j, "from_step").value_or(0);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!(attempt_of[i] < attempt && out[i].step > from)) {
      if (kept != i) out[kept] = std::move(out[i]);  // never onto itself: a self-move empties it
      attempt_of[kept++] = attempt_of[i];
    }
  out.resize(kept);
  attempt_of.resize(kept);
  if (restarts)
    for (auto& r : *restarts)
      if (r.attempt == attempt) {
        r.resumed_from_step = from;
        r.steps_lost = number_at<int64_t>(j, "steps_lost").value_or(0);
      }
}

// A "membership" line (coordinator/membership_log.h), its ranks in words.
MembershipChange membership_change(const nlohmann::json& j) {
  const auto who = [](const nlohmann::json& ranks) {
    std::vector<std::string> out;
    if (ranks.is_array())
      for (const auto& r : ranks)
        out.push_back(str("rank ", number_at<int>(r, "rank").value_or(-1), " (host ",
                          str_or(r, "host"), ", pid ", number_at<int64_t>(r, "pid").value_or(0),
                          ")"));
    return out;
  };
  return {number_at<int>(j, "attempt").value_or(0),
          number_at<int64_t>(j, "from_step").value_or(0),
          str_or(j, "how"),
          number_at<int>(j, "world_size").value_or(0),
          who(j.value("left", nlohmann::json())),
          who(j.value("joined", nlohmann::json())),
          number_at<double>(j, "to_first_step_s").value_or(0.0)};
}

}  // namespace

std::vector<StepMetrics> parse_metrics(std::istream& in, const std::string& name,
                                       MetricsEvents* events) {
  std::vector<RestartEvent>* restarts = events ? &events->restarts : nullptr;
  std::vector<StepMetrics> out;
  std::vector<int> attempt_of;  // parallel to out
  int world_size = 0;           // of the last attempt that formed
  std::map<int, int> size_of;   // attempt -> its world size ("attempt" lines)
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      // The last line cut short, without its newline (a writer that died
      // mid-record, or a full disk before microddp wrote whole records): the
      // records before it stand. A bad line anywhere else is an error.
      if (in.eof()) {
        spdlog::warn(
            "{}:{}: the last line is torn (a write cut short: a crash or a full disk); the {} "
            "whole "
            "records before it are used",
            name, n, out.size());
        break;
      }
      // nlohmann's message repeats the whole line; the position is enough.
      throw InputError(str(name, ":", n, ": not a JSON object (a truncated or corrupted line?)"));
    }
    if (!j.is_object())
      throw InputError(str(name, ":", n, ": expected a JSON object, got ", j.type_name()));
    if (is_event(j)) {
      apply_event(j, out, attempt_of, restarts, world_size);
      if (events && str_or(j, "kind") == "membership")
        events->membership.push_back(membership_change(j));
      if (str_or(j, "kind") == "attempt")
        size_of[number_at<int>(j, "attempt").value_or(0)] = world_size;
      continue;
    }
    if (!j.contains("rank") || !j.contains("step"))
      throw InputError(str(name, ":", n, ": not a metrics record (no \"rank\" or \"step\")"));
    try {
      out.push_back(StepMetrics::from_json(j));
    } catch (const Error& e) {
      throw InputError(str(name, ":", n, ": ", e.what()));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(str(name, ":", n, ": ", e.what()));
    }
    if (out.back().rank < 0)
      throw InputError(str(name, ":", n, ": negative rank ", out.back().rank));
    attempt_of.push_back(
        j.contains("attempt") && j["attempt"].is_number_integer() ? j["attempt"].get<int>() : 0);
    const StepMetrics& m = out.back();
    if (events && !m.eval)
      events->goodput.add(attempt_of.back(), m.step, m.step_ms,
                          number_at<int64_t>(j, "time_unix_ns").value_or(0));
  }
  // An elastic job that changed size: the steps of one size only, the last.
  const auto other = [&](std::size_t i) {
    const auto it = size_of.find(attempt_of[i]);
    return it != size_of.end() && it->second != world_size;
  };
  std::size_t kept = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (!other(i)) {
      if (kept != i) out[kept] = std::move(out[i]);
      ++kept;
    }
  if (events) events->other_size_records = static_cast<int64_t>(out.size() - kept);
  out.resize(kept);
  return out;
}

RunLog load_run(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir))
    throw InputError(
        str("no run directory ", dir.string(), " (give the --run-dir of a microddp run)"));
  const auto metrics = dir / "metrics.jsonl";
  std::ifstream in(metrics);
  if (!in)
    throw InputError(str("no metrics.jsonl in ", dir.string(),
                         ": is this the --run-dir of `microddp run` or `microddp coordinator`?"));
  RunLog run{dir, {}, {}, {}, {}};
  run.records = parse_metrics(in, metrics.string(), &run.events);
  read_job(dir / "job.json", run.config, run.members);
  int max_rank = -1;
  for (const auto& r : run.records) max_rank = std::max(max_rank, r.rank);
  if (run.config.world_size == 0) run.config.world_size = max_rank + 1;
  if (run.config.source.empty()) run.config.source = "metrics.jsonl only";
  if (run.config.transport.empty() || run.config.transport == "auto") {
    const std::string t = infer_transport(run.records);
    if (!t.empty()) {
      run.config.transport = t;
      run.config.transport_inferred = true;
    }
  }
  return run;
}

}  // namespace mddp::perf
