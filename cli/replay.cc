#include "cli/replay.h"

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/child_processes.h"
#include "cli/resume_command.h"
#include "control/job_config_json.h"
#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::cli {
namespace {

using namespace std::chrono_literals;

// `j` as "key.sub" -> value text, for a flat comparison.
void flatten(const nlohmann::json& j, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  if (!j.is_object()) {
    out[prefix] = j.dump();
    return;
  }
  for (const auto& [key, value] : j.items())
    flatten(value, prefix.empty() ? key : prefix + "." + key, out);
}

}  // namespace

void check_same_job(const std::filesystem::path& replayed, const train::TrainConfig& here) {
  const std::filesystem::path dir =
      std::filesystem::is_directory(replayed) ? replayed : replayed.parent_path();
  std::ifstream in(dir / "job.json");
  const nlohmann::json job = nlohmann::json::parse(in, nullptr, false);
  if (!in || !job.is_object() || !job.contains("config"))
    throw InputError(str("--replay: no job.json with the job's config in ", dir.string(),
                         ": the replay could not check it runs the same job"));
  // What may differ: where things are written and read, and what a failure does.
  static const std::set<std::string> kFree = {
      "run_dir",          "resume",    "resume_latest", "from_peers",
      "stop_after_step",  "min_nproc", "on_failure",    "checkpoint_every",
      "keep_checkpoints", "log_every", "eval"};
  std::map<std::string, std::string> there, mine;
  flatten(job["config"], "", there);
  flatten(control::job_config_to_json(here), "", mine);
  std::vector<std::string> diffs;
  for (const auto& [key, value] : mine) {
    const auto it = there.find(key);
    if (kFree.count(key.substr(0, key.find('.'))) || it == there.end() || it->second == value)
      continue;
    diffs.push_back(str(key, " ", it->second, " there, ", value, " here"));
  }
  if (!diffs.empty())
    throw InputError(str("--replay: this job is not the one in ", dir.string(), " (",
                         join(diffs, "; "), "): give the replayed job's flags"));
}

void replay(const std::vector<ReplayLeg>& legs, const std::vector<std::string>& args,
            const std::string& run_dir) {
  const std::vector<std::string> common =
      without_flags(args, {"--nproc", "--run-dir", "--stop-after-step"});
  std::string before;  // the leg before's run directory
  for (std::size_t k = 0; k < legs.size(); ++k) {
    const ReplayLeg& leg = legs[k];
    const bool last = k + 1 == legs.size();
    const std::string dir = last ? run_dir : str(run_dir, "/replay/leg-", k + 1);
    std::vector<std::string> cmd = before.empty() ? common : without_flags(common, {"--resume"});
    for (const std::string& a :
         {std::string("--nproc"), std::to_string(leg.world_size), std::string("--run-dir"), dir})
      cmd.push_back(a);
    if (!before.empty()) cmd.insert(cmd.end(), {"--resume", before});
    if (!last) cmd.insert(cmd.end(), {"--stop-after-step", std::to_string(leg.to_step)});
    std::printf("microddp run --replay: leg %zu of %zu: steps %lld to %s on %d rank%s\n", k + 1,
                legs.size(), static_cast<long long>(leg.from_step + 1),
                last ? "the end" : std::to_string(leg.to_step).c_str(), leg.world_size,
                leg.world_size == 1 ? "" : "s");
    std::fflush(stdout);
    ChildProcesses children;
    children.add({str("leg ", k + 1), spawn(cmd, {}, ""), "", {}});
    while (!children.all_done()) {
      children.poll(100ms);
      if (children.interrupted()) children.signal(SIGTERM);  // it stops its own children
    }
    const int status = children.child(0).state.status;
    if (children.interrupted()) std::exit(128 + children.interrupted());
    if (status != 0)
      throw Error(str("--replay: leg ", k + 1, " (", leg.world_size, " ranks",
                      last ? "" : str(", to step ", leg.to_step), ") failed (",
                      status > 128 ? str("signal ", status - 128) : str("exit ", status),
                      "); its run directory: ", dir));
    before = dir;
  }
}

}  // namespace mddp::cli
