#include "cli/job_flags.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "cli/flag_checks.h"
#include "core/common/check.h"
#include "dashboard/server/auth.h"

namespace mddp::cli {

std::string read_token_file(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) throw InputError(str("cannot read ", flag, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  if (t.empty()) throw InputError(str(flag, " ", path, " is empty"));
  return t;
}

const char* const kTimeoutsHelp =
    "Timeouts nest, outermost first (docs/failures.md, \"Timeouts\"): a worker's "
    "--connect-timeout-s and --join-timeout-s; the coordinator's --rendezvous-timeout-s, longer "
    "than --elastic-wait-s; each collective's --comm-timeout-ms, longer than "
    "--heartbeat-timeout-ms, longer than two --heartbeat-ms. A combination that cannot work is "
    "refused at start.";

void add_health_flags(CLI::App& cmd, HealthFlags& h, const std::string& group) {
  cmd.footer(kTimeoutsHelp);
  cmd.add_option("--heartbeat-ms", h.heartbeat_ms, "how often workers send a heartbeat")
      ->check(CLI::Range(int64_t{1}, kMaxTimeoutMs))
      ->group(group)
      ->capture_default_str();
  cmd.add_option("--heartbeat-timeout-ms", h.heartbeat_timeout_ms,
                 "fail the job when a worker is silent this long (more than --heartbeat-ms)")
      ->check(CLI::Range(int64_t{1}, kMaxTimeoutMs))
      ->group(group)
      ->capture_default_str();
  cmd.add_option("--rendezvous-timeout-s", h.rendezvous_timeout_s,
                 "fail when not all workers joined this long after the start")
      ->check(timeout_seconds())
      ->group(group)
      ->capture_default_str();
}

std::string DashboardFlags::token() const {
  std::string t =
      http_token_file.empty() ? http_token : read_token_file(http_token_file, "--http-token-file");
  if (!t.empty()) dashboard::Auth::validate_token(t);
  return t;
}

void add_restart_flags(CLI::App& cmd, RestartFlags& r, int64_t& min_nproc, std::string& on_failure,
                       const std::string& group) {
  cmd.add_option("--on-failure", on_failure,
                 "when a rank dies or hangs: restart (every rank starts again from the last "
                 "checkpoint, up to --max-restarts times), shrink (the others train on in their "
                 "processes from the state they hold, down to --min-nproc ranks; no checkpoint "
                 "read), heal (shrink; a worker that joins later, such as the dead one started "
                 "again by run up to --max-restarts times, takes the state from the live ranks "
                 "and the job grows back) or fail")
      ->check(CLI::IsMember({"restart", "shrink", "heal", "fail"}))
      ->group(group)
      ->capture_default_str();
  cmd.add_option(
         "--max-restarts", r.max_restarts,
         "when a rank dies, re-form the job up to this many times in all, resuming from the "
         "last checkpoint in --run-dir (docs/recovery.md); 0: the job fails")
      ->check(CLI::Range(0, 1000))
      ->group(group)
      ->capture_default_str();
  cmd.add_option(
         "--min-nproc", min_nproc,
         "elastic: an attempt that still lacks ranks after --elastic-wait-s forms with the "
         "ones there, at least this many (a host gone for good); the global --batch is kept "
         "and shared over the ranks there. 0: always the full world size, waited for up to "
         "--rendezvous-timeout-s")
      ->check(CLI::Range(int64_t{0}, int64_t{std::numeric_limits<int>::max()}))
      ->group(group)
      ->capture_default_str();
  cmd.add_option("--elastic-wait-s", r.elastic_wait_s,
                 "with --min-nproc: how long an attempt waits for all ranks before it forms with "
                 "fewer")
      ->check(timeout_seconds())
      ->group(group)
      ->capture_default_str();
}

void validate_elastic(const RestartFlags& r, int64_t min_nproc, int world_size,
                      const HealthFlags& h) {
  if (min_nproc == 0) return;
  if (min_nproc > world_size)
    throw InputError(str("--min-nproc ", min_nproc, " is more than the job's ", world_size,
                         " ranks: give 1..", world_size));
  if (min_nproc < world_size && r.elastic_wait_s >= h.rendezvous_timeout_s)
    throw InputError(str("--elastic-wait-s ", r.elastic_wait_s,
                         " must be shorter than --rendezvous-timeout-s ", h.rendezvous_timeout_s,
                         " (the rendezvous fails before it would form with fewer ranks)"));
}

void validate_on_failure(const RestartFlags& r, const std::string& on_failure) {
  if (on_failure == "fail" && r.max_restarts > 0)
    throw InputError(str("--on-failure fail and --max-restarts ", r.max_restarts,
                         " contradict each other: a failure either ends the job or restarts it"));
}

// The timeouts' nesting (docs/failures.md, "Timeouts"): each check says
// which wait must outlast which, and why.
void validate_health(const HealthFlags& h, int64_t comm_timeout_ms) {
  if (h.heartbeat_timeout_ms <= 2 * h.heartbeat_ms)
    throw InputError(str("--heartbeat-timeout-ms ", h.heartbeat_timeout_ms,
                         " must be longer than two --heartbeat-ms ", h.heartbeat_ms,
                         ": a worker is declared lost after that long without a heartbeat, and "
                         "one late heartbeat must not do it"));
  if (comm_timeout_ms <= h.heartbeat_timeout_ms)
    throw InputError(str("--comm-timeout-ms ", comm_timeout_ms,
                         " must be longer than --heartbeat-timeout-ms ", h.heartbeat_timeout_ms,
                         ": a collective waiting on a rank that went silent would give up before "
                         "the coordinator names that rank"));
}

void add_dashboard_flags(CLI::App& cmd, DashboardFlags& d) {
  const char* g = "Dashboard";
  cmd.add_option("--http-port", d.http_port,
                 "port of the live dashboard (0: any free port, printed at start; -1: none)")
      ->check(CLI::Range(-1, 65535))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--http-host", d.http_host,
                 "interface the dashboard listens on. Without --http-token anyone who can reach "
                 "it reads the job's metrics, hosts and config: bind another interface than "
                 "127.0.0.1 only with a token (or reach it over an SSH tunnel)")
      ->group(g)
      ->capture_default_str();
  auto* token = cmd.add_option("--http-token", d.http_token,
                               "every dashboard request must carry this token (16+ letters, digits "
                               "or -._~): log in at the printed /login?token=... URL, or send "
                               "'Authorization: Bearer TOKEN' (Prometheus)")
                    ->group(g);
  cmd.add_option("--http-token-file", d.http_token_file, "read --http-token from this file")
      ->excludes(token)
      ->group(g);
  cmd.add_option("--http-linger", d.http_linger_s,
                 "after the job ends, keep serving the dashboard this many seconds so the page "
                 "shows the final (or failed) state; Ctrl-C ends it early")
      ->check(finite_in(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--dashboard-dir", d.dashboard_dir,
                 "serve the page from this directory (e.g. dashboard/web) instead of the copy "
                 "compiled in: for developing the page")
      ->check(CLI::ExistingDirectory)
      ->group(g);
}

}  // namespace mddp::cli
