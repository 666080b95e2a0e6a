#include "cli/job_flags.h"

#include <fstream>
#include <sstream>

#include "core/common/check.h"

namespace mddp::cli {

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read --token-file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  if (t.empty()) throw InputError("--token-file " + path + " is empty");
  return t;
}

void add_health_flags(CLI::App& cmd, HealthFlags& h, const std::string& group) {
  cmd.add_option("--heartbeat-ms", h.heartbeat_ms, "how often workers send a heartbeat")
      ->group(group)
      ->capture_default_str();
  cmd.add_option("--heartbeat-timeout-ms", h.heartbeat_timeout_ms, "fail the job when a worker is silent this long")
      ->group(group)
      ->capture_default_str();
  cmd.add_option("--rendezvous-timeout-s", h.rendezvous_timeout_s,
                 "fail when not all workers joined this long after the start")
      ->group(group)
      ->capture_default_str();
}

}  // namespace mddp::cli
