// Flags and helpers shared by the commands that form a job (coordinator,
// worker, run): the token file and the health settings.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace mddp::cli {

// The token in `path`, trailing whitespace removed; InputError if unreadable or empty.
std::string read_token_file(const std::string& path);

struct HealthFlags {
  int64_t heartbeat_ms;
  int64_t heartbeat_timeout_ms;
  double rendezvous_timeout_s;
};
// --heartbeat-ms, --heartbeat-timeout-ms, --rendezvous-timeout-s in `group`.
void add_health_flags(CLI::App& cmd, HealthFlags& h, const std::string& group);

}  // namespace mddp::cli
