// Flags and helpers shared by the commands that form a job (coordinator,
// worker, run): the token file and the health settings.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace mddp::cli {

// The token in `path`, trailing whitespace removed; InputError naming `flag`
// if unreadable or empty.
std::string read_token_file(const std::string& path, const char* flag = "--token-file");

struct HealthFlags {
  int64_t heartbeat_ms;
  int64_t heartbeat_timeout_ms;
  double rendezvous_timeout_s;
};
// --heartbeat-ms, --heartbeat-timeout-ms, --rendezvous-timeout-s in `group`.
void add_health_flags(CLI::App& cmd, HealthFlags& h, const std::string& group);
// What one flag's check cannot see: the timeout must be longer than the
// interval (InputError naming both).
void validate_health(const HealthFlags& h);

// The coordinator's dashboard server (dashboard/API.md). `microddp run`
// takes the same flags and hands them to its coordinator.
struct DashboardFlags {
  int http_port = 0;  // 0: any free port; -1: no dashboard
  std::string http_host = "127.0.0.1";
  double http_linger_s = 0;  // keep serving this long after the job ended
  std::string dashboard_dir;  // "": the page compiled into the binary
  std::string http_token, http_token_file;  // "": no authentication (dashboard/server/auth.h)
  // The token given either way ("" = none), checked (InputError when unusable).
  std::string token() const;
};
// --http-port, --http-host, --http-linger, --dashboard-dir, --http-token,
// --http-token-file in group "Dashboard".
void add_dashboard_flags(CLI::App& cmd, DashboardFlags& d);

}  // namespace mddp::cli
