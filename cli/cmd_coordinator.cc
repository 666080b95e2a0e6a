// `microddp coordinator`: the control plane of one job. Waits for
// --world-size workers, hands them ranks and the job config (the training
// flags given here), watches them and logs their metrics; exits 0 when every
// rank finished, else 1 with one line naming the rank that failed, after
// the command that resumes the run (resume_command.h). --max-restarts and
// --min-nproc: restarts and the elastic size (docs/recovery.md).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/job_flags.h"
#include "cli/resume_command.h"
#include "cli/tls_flags.h"
#include "cli/train_flags.h"
#include "control/exit_status.h"
#include "control/job_config_json.h"
#include "coordinator/coordinator.h"
#include "coordinator/flag_config.h"
#include "core/common/check.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/train/checkpoint_meta.h"
#include "dashboard/server/server.h"

namespace mddp::cli {
namespace {

struct CoordinatorFlags {
  int world_size = 0;
  int port = 29500;
  std::string host = "127.0.0.1";
  std::string token, token_file, job_id = "local", config, address_file, http_url_file;
  std::string http_public_url;     // what to print for the dashboard ("": its own address)
  bool insecure_no_token = false;  // off loopback with no token: asked for explicitly
  DashboardFlags dashboard;
  control::TlsFlags tls;
  HealthFlags health{1000, 10000, 300};
  RestartFlags restarts;
  train::TrainConfig train;
};

// The name to dial a listening host by: itself, or this machine's name when
// listening on every interface.
std::string dial_host(const std::string& host) {
  if (host == "0.0.0.0" || host == "::" || host.empty()) {
    char name[256] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
  }
  return host;
}

// What workers should dial.
std::string dial_address(const std::string& host, int port) {
  const std::string h = dial_host(host);
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
}

// SIGINT / SIGTERM, caught for as long as this lives: the handler only
// writes the signal number to a pipe, which SignalWatcher reads. (A handler
// rather than a blocked mask, so a thread started before, e.g. by a
// sanitizer's runtime, cannot take the default action and kill the process.)
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const char c = static_cast<char>(sig);
  (void)!::write(g_signal_pipe[1], &c, 1);
}

class SignalPipe {
 public:
  SignalPipe() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw Error(str("pipe2 failed: ", std::strerror(errno)));
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalPipe() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  int fd() const { return g_signal_pipe[0]; }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// Turns a caught signal into a clean end of the job: it fails ("interrupted")
// and every waiting worker is answered. Stops (joins) on destruction, so
// declare it after the coordinator it shuts down.
class SignalWatcher {
 public:
  SignalWatcher(const SignalPipe& signals, coordinator::Coordinator& c) {
    thread_ = std::thread([this, fd = signals.fd(), &c] {
      pollfd p{fd, POLLIN, 0};
      while (!stop_) {
        char sig = 0;
        if (::poll(&p, 1, 200) > 0 && ::read(fd, &sig, 1) == 1) {
          caught_ = true;
          c.job().shutdown(
              str("the coordinator was interrupted (", sig == SIGINT ? "SIGINT" : "SIGTERM", ")"));
          return;
        }
      }
    });
  }
  ~SignalWatcher() {
    stop_ = true;
    thread_.join();
  }
  bool caught() const { return caught_; }

 private:
  std::atomic<bool> stop_{false}, caught_{false};
  std::thread thread_;
};

// Writes `text` and a newline to `path` through a rename, so a reader never
// sees half of it; mode 0600 (the dashboard's URL may carry its token).
void write_flag_file(const std::string& path, const std::string& text, const char* flag) {
  if (const std::string error = write_atomically(path, text + "\n", 0600); !error.empty())
    throw InputError(str("cannot write ", flag, " ", path, ": ", error));
}

// What the run directory lacks: the metrics records that could not be
// written (by rank and step) and a job.json whose last write failed; "" if nothing.
std::string lost_output(const coordinator::Job& job) {
  const coordinator::MetricsLog::Lost lost = job.metrics_log().lost();
  std::string out;
  if (lost.count > 0)
    out = str(lost.count, " of ", job.metrics_log().count(), " metrics records are not in ",
              job.metrics_log().path().string(), " (", lost.why, "): ", lost.which);
  if (const std::string e = job.job_file_error(); !e.empty())
    out += str(out.empty() ? "" : "; ", e);
  return out;
}

// What the flags resolve to beyond themselves.
struct Resolved {
  std::string http_token;  // the dashboard's ("" = none)
  std::optional<control::TlsConfig> tls;
  std::string resuming;  // where the job resumes ("" when it does not)
};

// Reads --config, checks what the flags' own checks cannot see and resolves
// the files rank 0 will read (before any worker waits on them).
Resolved check_flags(CLI::App& cmd, CoordinatorFlags& a) {
  if (!a.config.empty()) coordinator::apply_toml_config(cmd, a.config);
  if (a.world_size < 1)
    throw InputError("give the number of workers: --world-size N (or world-size in --config)");
  a.train.validate();
  if (!a.token_file.empty()) a.token = read_token_file(a.token_file);
  if (a.token.empty() && !control::is_loopback(a.host) && !a.insecure_no_token)
    throw InputError(str("--host ", a.host,
                         " with no --token: anyone who can reach the port could join the job; "
                         "give --token or --token-file, or --insecure-no-token to allow it"));
  Resolved r;
  r.http_token = a.dashboard.token();
  r.tls = control::load_tls(a.tls, control::TlsRole::kServer);
  validate_health(a.health, a.train.dist.timeout_ms);
  validate_elastic(a.restarts, a.train.min_nproc, a.world_size, a.health);
  validate_on_failure(a.restarts, a.train.on_failure);
  if (!a.train.resume.empty()) {
    const train::Checkpoint ck = train::checked_resume(a.train, a.world_size);
    // The directory resolved, to this pair whatever is written meanwhile, and
    // absolute: rank 0 may run in another directory.
    a.train.resume = std::filesystem::absolute(ck.path).string();
    r.resuming = str("resuming from ", a.train.resume, " at step ", ck.step);
  }
  if (!a.train.init_from.empty()) {
    train::load_safetensors_metadata(a.train.init_from);
    a.train.init_from = std::filesystem::absolute(a.train.init_from).string();
  }
  if (!a.http_public_url.empty()) {
    if (a.dashboard.http_port < 0)
      throw InputError("--http-public-url names the dashboard, but --http-port -1 turns it off");
    if (a.http_public_url.rfind("http://", 0) != 0 && a.http_public_url.rfind("https://", 0) != 0)
      throw InputError(str("--http-public-url must be an http:// or https:// URL, got '",
                           a.http_public_url, "'"));
  }
  return r;
}

// The flags as the coordinator's options.
coordinator::CoordinatorOptions coordinator_options(const CoordinatorFlags& a,
                                                    const std::optional<control::TlsConfig>& tls) {
  coordinator::CoordinatorOptions o;
  o.host = a.host;
  o.port = a.port;
  o.tls = tls;
  o.job.job_id = a.job_id;
  o.job.token = a.token;
  o.job.world_size = a.world_size;
  o.job.config_json = control::dump_job_config(a.train);
  o.job.heartbeat_interval = std::chrono::milliseconds(a.health.heartbeat_ms);
  o.job.heartbeat_timeout = std::chrono::milliseconds(a.health.heartbeat_timeout_ms);
  o.job.rendezvous_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(a.health.rendezvous_timeout_s * 1000.0));
  o.job.run_dir = a.train.run_dir;
  o.job.max_restarts = a.restarts.max_restarts;
  o.job.min_nproc = static_cast<int>(a.train.min_nproc);
  o.job.shrink = a.train.survivors_train_on();
  o.job.heal = a.train.on_failure == "heal";
  o.job.elastic_wait =
      std::chrono::milliseconds(static_cast<int64_t>(a.restarts.elastic_wait_s * 1000.0));
  return o;
}

// The dashboard on the coordinator's job, and the URL to print for it
// (--http-public-url: the same page reached another way, with the same login).
struct Dashboard {
  std::optional<dashboard::Server> server;
  std::string url;
};

void start_dashboard(const CoordinatorFlags& a, coordinator::Coordinator& c,
                     const std::optional<control::TlsConfig>& tls, const std::string& http_token,
                     Dashboard& dash) {
  if (a.dashboard.http_port < 0) return;
  dash.server.emplace(dashboard::ServerOptions{.host = a.dashboard.http_host,
                                               .port = a.dashboard.http_port,
                                               .dashboard_dir = a.dashboard.dashboard_dir,
                                               .token = http_token,
                                               .tls = tls},
                      c.job());
  dash.url = dash.server->login_url(dial_host(a.dashboard.http_host));
  if (!a.http_public_url.empty()) {
    const std::string base =
        a.http_public_url.back() == '/' ? a.http_public_url : a.http_public_url + "/";
    dash.url = http_token.empty() ? a.http_public_url : base + "login?token=" + http_token;
  }
  if (http_token.empty() && !control::is_loopback(a.dashboard.http_host))
    spdlog::warn(
        "the dashboard on {} has no --http-token: anyone who can reach the port reads the job's "
        "metrics, hosts and config (docs/security.md)",
        dash.server->url(dial_host(a.dashboard.http_host)));
}

// Where the coordinator listens and how a worker joins it; then the files
// that say so to whoever waits for them.
void announce_listening(const CoordinatorFlags& a, const coordinator::Coordinator& c,
                        const std::optional<control::TlsConfig>& tls, const Dashboard& dash,
                        const std::string& resuming) {
  const std::string addr = dial_address(a.host, c.port());
  std::printf("microddp coordinator: job '%s', %d workers, listening on %s\n", a.job_id.c_str(),
              a.world_size, c.address().c_str());
  std::string tls_args;
  if (tls) tls_args = " --tls-ca " + (a.tls.ca.empty() ? std::string("CA.pem") : a.tls.ca);
  if (tls && tls->client_auth) tls_args += " --tls-cert HOST.pem --tls-key HOST.key";
  std::printf(
      "start each worker with: microddp worker --coordinator %s%s%s\n", addr.c_str(),
      a.token.empty()
          ? ""
          : (a.token_file.empty() ? " --token ..." : " --token-file " + a.token_file).c_str(),
      tls_args.c_str());
  if (a.token.empty())
    std::printf("warning: no --token: anyone who can reach %s can join this job%s\n", addr.c_str(),
                control::is_loopback(a.host) ? " (every user of this machine)" : "");
  if (dash.server) std::printf("dashboard: %s\n", dash.url.c_str());
  if (!resuming.empty()) std::printf("%s\n", resuming.c_str());
  std::fflush(stdout);
  // Before --address-file: whoever waits for that one finds this one ready.
  if (!a.http_url_file.empty()) write_flag_file(a.http_url_file, dash.url, "--http-url-file");
  if (!a.address_file.empty()) write_flag_file(a.address_file, addr, "--address-file");
}

// --http-linger: the dashboard serves the final state a while longer.
void linger_dashboard(const CoordinatorFlags& a, const Dashboard& dash,
                      const control::JobStatus& status, const SignalWatcher& watcher) {
  if (!dash.server || a.dashboard.http_linger_s <= 0 || watcher.caught()) return;
  std::printf("dashboard: the job is over (%s); still serving %s for %g s (Ctrl-C to stop)\n",
              control::to_string(status.state), dash.url.c_str(), a.dashboard.http_linger_s);
  std::fflush(stdout);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(a.dashboard.http_linger_s);
  while (std::chrono::steady_clock::now() < until && !watcher.caught())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// How the job ended, as the coordinator's last words and its exit.
void end_job(const CoordinatorFlags& a, const control::JobStatus& status, int world_size,
             uint64_t records, const std::filesystem::path& log_path, const std::string& lost) {
  if (status.state != control::State::kSucceeded) {
    // Under `run`, run says it with its own command (its flags to this one are its own).
    if (!std::getenv(kNoResumeHintEnv))
      std::fprintf(stderr, "microddp coordinator: %s (and start the workers again)\n",
                   resume_line(own_command_line(), a.train.run_dir).c_str());
    throw Error(
        str(status.failure().empty() ? std::string("the job did not finish") : status.failure(),
            lost.empty() ? "" : "; also " + lost));
  }
  std::printf("job '%s' succeeded: %d ranks finished, %llu metrics records%s\n", a.job_id.c_str(),
              world_size, static_cast<unsigned long long>(records),
              log_path.empty() ? "" : (" in " + log_path.string()).c_str());
  if (!lost.empty()) throw control::RecordsLostError("the job succeeded, but " + lost);
}

void run_coordinator(CLI::App& cmd, CoordinatorFlags& a) {
  log::init("coordinator");
  const Resolved r = check_flags(cmd, a);
  if (a.restarts.max_restarts > 0 && (a.train.run_dir.empty() || a.train.checkpoint_every <= 0))
    std::printf(
        "note: --max-restarts without --run-dir and --checkpoint-every: a restarted job "
        "starts again from step 0\n");

  SignalPipe signals;
  coordinator::Coordinator c(coordinator_options(a, r.tls));
  SignalWatcher watcher(signals, c);
  Dashboard dash;  // after `c`: stops before the Job it reads goes away
  start_dashboard(a, c, r.tls, r.http_token, dash);
  announce_listening(a, c, r.tls, dash, r.resuming);

  const control::JobStatus status = c.wait();
  const auto records = c.job().metrics_log().count();
  const auto log_path = c.job().metrics_log().path();
  const std::string lost = lost_output(c.job());
  c.shutdown();
  linger_dashboard(a, dash, status, watcher);
  dash.server.reset();
  end_job(a, status, c.job().world_size(), records, log_path, lost);
}

}  // namespace

void register_coordinator(CLI::App& app) {
  auto a = std::make_shared<CoordinatorFlags>();
  auto* cmd = app.add_subcommand(
      "coordinator",
      "Run the control plane of a job: rendezvous, key/value store, barriers, health, metrics log");
  const char* g = "Coordinator";
  cmd->add_option("--world-size", a->world_size, "number of workers (ranks) in the job")
      ->envname("WORLD_SIZE")
      ->group(g);
  cmd->add_option("--port", a->port, "port to listen on (0: any free port)")
      ->envname("MASTER_PORT")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--host", a->host,
                  "interface to listen on: 127.0.0.1 (this machine only) or 0.0.0.0 (all)")
      ->group(g)
      ->capture_default_str();
  auto* token =
      cmd->add_option("--token", a->token, "shared secret a worker must present to join")->group(g);
  cmd->add_option("--token-file", a->token_file, "read the token from this file")
      ->excludes(token)
      ->group(g);
  cmd->add_flag("--insecure-no-token", a->insecure_no_token,
                "listen off loopback with no --token: anyone who can reach the port may join the "
                "job (refused otherwise; docs/security.md)")
      ->group(g);
  cmd->add_option("--job-id", a->job_id, "name of the job; workers must ask for the same")
      ->check(job_id_check())
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--config", a->config,
                  "TOML file of flags (same names without --; the command line wins)")
      ->configurable(false)
      ->group(g);
  add_health_flags(*cmd, a->health, g);
  add_restart_flags(*cmd, a->restarts, a->train.min_nproc, a->train.on_failure, g);
  cmd->add_option("--address-file", a->address_file,
                  "write HOST:PORT for workers here once listening")
      ->group(g);
  cmd->add_option("--http-url-file", a->http_url_file,
                  "write the dashboard's URL here once serving, before --address-file (an empty "
                  "line with --http-port -1)")
      ->group(g);
  add_dashboard_flags(*cmd, a->dashboard);
  add_tls_flags(*cmd, a->tls, control::TlsRole::kServer);
  cmd->add_option("--http-public-url", a->http_public_url,
                  "the dashboard's URL as printed and written to --http-url-file, when it is "
                  "reached another way than --http-host:--http-port (a container's published "
                  "port, a proxy)")
      ->group("Dashboard");
  add_training_flags(*cmd, a->train);
  add_checkpoint_flags(*cmd, a->train);
  add_ddp_flags(*cmd, a->train);
  cmd->callback([cmd, a] { run_coordinator(*cmd, *a); });
}

}  // namespace mddp::cli
