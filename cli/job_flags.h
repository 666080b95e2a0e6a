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
// Restarts and the elastic size (docs/recovery.md).
struct RestartFlags {
  int max_restarts = 0;
  // How long an attempt waits for all ranks before it forms with fewer
  // (at least --min-nproc, the job's TrainConfig::min_nproc).
  double elastic_wait_s = 10;
};
// --on-failure (into `on_failure`), --max-restarts, --min-nproc (into `min_nproc`),
// --elastic-wait-s in `group` (Note [Attempts] in coordinator/job.cc).
void add_restart_flags(CLI::App& cmd, RestartFlags& r, int64_t& min_nproc, std::string& on_failure,
                       const std::string& group);
// What the flags' own checks cannot see: --min-nproc at most the world size,
// the elastic wait shorter than the rendezvous timeout. InputError naming
// the flags.
void validate_elastic(const RestartFlags& r, int64_t min_nproc, int world_size,
                      const HealthFlags& h);
// --on-failure fail with restarts allowed: InputError naming both flags.
void validate_on_failure(const RestartFlags& r, const std::string& on_failure);
// How the timeouts nest, for the --help of coordinator, run and worker.
extern const char* const kTimeoutsHelp;
// Refuses timeouts that cannot nest: two --heartbeat-ms under
// --heartbeat-timeout-ms, under the collectives' --comm-timeout-ms.
void validate_health(const HealthFlags& h, int64_t comm_timeout_ms);

// The coordinator's dashboard server (dashboard/API.md). `microddp run`
// takes the same flags and hands them to its coordinator.
struct DashboardFlags {
  int http_port = 0;  // 0: any free port; -1: no dashboard
  std::string http_host = "127.0.0.1";
  double http_linger_s = 0;                 // keep serving this long after the job ended
  std::string dashboard_dir;                // "": the page compiled into the binary
  std::string http_token, http_token_file;  // "": no authentication (dashboard/server/auth.h)
  // The token given either way ("" = none), checked (InputError when unusable).
  std::string token() const;
};
// --http-port, --http-host, --http-linger, --dashboard-dir, --http-token,
// --http-token-file in group "Dashboard".
void add_dashboard_flags(CLI::App& cmd, DashboardFlags& d);

}  // namespace mddp::cli
