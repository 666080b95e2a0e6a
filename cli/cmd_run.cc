// `microddp run --nproc N ...`: a whole job on this machine, like torchrun's
// standalone mode. Starts a coordinator and N workers as child processes of
// this binary (fork + exec of /proc/self/exe): the coordinator gets the
// training flags given here, the workers join it. Rank 0's output is shown
// (its progress); the coordinator's and the other ranks' go to log files in
// the run directory (or a temporary one, kept when the job fails). The
// token lives in a private directory that no way out leaves behind
// (PrivateRunDir).
//
// Cleanup: children live in their own process group (a Ctrl-C reaches only
// this process, which then stops them in order) and die with this process
// (PR_SET_PDEATHSIG), so none is left behind, nor their shared-memory
// segments (the names of children killed in set-up are removed at the end).
// Restarts (--max-restarts K, handed to the coordinator): a worker that
// died, or exited 75 because its attempt ended (another rank died), is
// started again, at most K times per rank; it re-joins the coordinator,
// which re-forms the job from the last checkpoint (Note [Attempts] in
// coordinator/job.cc). With --min-nproc (elastic), a worker that is not
// started again does not end the job: the coordinator re-forms it with
// fewer ranks, or fails it.
// Exit status: 0 when every rank finished (elastic: every rank of the last
// attempt); 1 with one line (the coordinator's verdict naming the failed
// rank) when the job failed; 130 / 143 after SIGINT / SIGTERM. A job that
// failed or was interrupted is told how to resume (resume_command.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/job_flags.h"
#include "cli/local_ranks.h"
#include "cli/log_follower.h"
#include "cli/resume_command.h"
#include "cli/run_private_dir.h"
#include "cli/train_flags.h"
#include "control/certs.h"
#include "control/exit_status.h"
#include "core/comm/transport/shm/segment.h"
#include "core/common/check.h"
#include "core/common/files.h"
#include "core/common/stop_signals.h"
#include "core/tensor/device.h"

namespace mddp::cli {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct RunFlags {
  int nproc = 0;
  int port = 0;
  std::string token, job_id = "local";
  bool tls = false;  // a throw-away CA and certificate: mutual TLS on the control plane, HTTPS
  HealthFlags health{500, 5000, 120};
  RestartFlags restarts;     // forwarded to the coordinator as typed
  DashboardFlags dashboard;  // forwarded to the coordinator as typed
  train::TrainConfig train;
};

// The flags of this command that are re-emitted explicitly (with run's
// defaults) instead of being forwarded to the coordinator as typed.
const std::set<std::string> kOwnFlags = {"--nproc",
                                         "--port",
                                         "--token",
                                         "--heartbeat-ms",
                                         "--heartbeat-timeout-ms",
                                         "--rendezvous-timeout-s"};
const std::set<std::string> kOwnSwitches = {"--tls"};  // the same, without a value

// The arguments after `run` on our own command line, less kOwnFlags.
std::vector<std::string> forwarded_args() {
  const std::vector<std::string> argv = own_command_line();
  std::vector<std::string> out;
  std::size_t i = 1;
  while (i < argv.size() && argv[i] != "run") ++i;
  for (++i; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    const std::string name = a.substr(0, a.find('='));
    if (kOwnSwitches.count(name)) continue;
    if (kOwnFlags.count(name)) {
      if (name == a) ++i;  // "--flag value": skip the value too
      continue;
    }
    out.push_back(a);
  }
  return out;
}

std::string random_token() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char b[16] = {};
  in.read(reinterpret_cast<char*>(b), sizeof b);
  if (!in) throw Error("cannot read /dev/urandom for the job token");
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char c : b) {
    t += hex[c >> 4];
    t += hex[c & 15];
  }
  return t;
}

void write_private(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw Error(str("cannot write ", path, ": ", std::strerror(errno)));
  ::close(fd);
}

struct Child {
  std::string name;  // "coordinator", "rank 2"
  pid_t pid = -1;
  std::string log;  // "" = inherits our stdout/stderr
  bool done = false;
  int status = 0;  // exit code, or 128 + signal
};

// fork + exec of this binary (exec resets our signal handlers); the child
// gets its own process group and dies with us.
pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
            const std::string& log, bool append_log = false) {
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env_store) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int log_fd = -1;
  if (!log.empty()) {  // 0600: the coordinator's log holds the dashboard's login URL
    log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append_log ? O_APPEND : O_TRUNC),
                    0600);
    if (log_fd < 0) throw Error(str("cannot write ", log, ": ", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(str("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    ::execve("/proc/self/exe", argv.data(), envp.data());
    const char msg[] = "microddp run: exec of /proc/self/exe failed\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  return pid;
}

// The last "microddp: error: ..." line of a log, without the prefix.
std::string error_line(const std::string& log) {
  if (log.empty()) return "";
  std::ifstream in(log);
  std::string line, last;
  const std::string prefix = "microddp: error: ";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) last = line.substr(prefix.size());
  return last;
}

class Supervisor {
 public:
  Supervisor() = default;
  ~Supervisor() {
    for (auto& c : children_)
      if (!c.done) ::kill(c.pid, SIGKILL);
    for (auto& c : children_)
      if (!c.done) ::waitpid(c.pid, nullptr, 0);
  }

  std::size_t add(Child c) {
    children_.push_back(std::move(c));
    return children_.size() - 1;
  }
  Child& child(std::size_t i) { return children_[i]; }
  std::vector<Child>& children() { return children_; }
  int interrupted() const { return signal_; }

  // Sleeps up to `timeout` (a signal cuts it short); reaps children.
  void poll(std::chrono::milliseconds timeout) {
    const timespec ts{static_cast<time_t>(timeout.count() / 1000),
                      static_cast<long>(timeout.count() % 1000) * 1'000'000};
    if (signals_.pending() == 0) ::nanosleep(&ts, nullptr);
    if (signals_.pending() != 0 && !signal_) signal_ = signals_.pending();
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;)
      for (auto& c : children_)
        if (c.pid == pid) {
          c.done = true;
          c.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
  }
  bool all_done() const {
    for (const auto& c : children_)
      if (!c.done) return false;
    return true;
  }
  void signal_all(int sig) {
    for (auto& c : children_)
      if (!c.done) ::kill(c.pid, sig);
  }

 private:
  StopSignals signals_;  // SIGINT/SIGTERM, read by poll()
  std::vector<Child> children_;
  int signal_ = 0;
};

void run_job(RunFlags& a) {
  if (a.nproc < 1) throw InputError("give the number of workers: --nproc N");
  a.train.validate();
  validate_health(a.health);
  if (a.train.batch % a.nproc != 0)
    throw InputError(str("--batch ", a.train.batch, " is not divisible by --nproc ", a.nproc));
  validate_elastic(a.restarts, a.train.min_nproc, a.nproc, a.train.batch, a.health);
  tensor::require_gpu_per_local_rank(a.train.device, a.nproc);  // before any process starts
  const std::vector<std::string> forwarded = forwarded_args();

  PrivateRunDir secrets;  // the token and the coordinator's address; removed on every way out
  // Without --run-dir the logs go to a directory of their own, removed when
  // the job succeeds and kept (named in the error) when it does not.
  const bool temp_logs = a.train.run_dir.empty();
  const std::string logs = temp_logs ? make_temp_dir("microddp-logs") : a.train.run_dir;
  make_dirs(logs, "--run-dir");
  const std::string token_file = secrets.path() + "/token";
  write_private(token_file, a.token.empty() ? random_token() : a.token);
  const std::string address_file = secrets.path() + "/address";
  const std::string url_file = secrets.path() + "/http_url";
  // --tls: one certificate for 127.0.0.1 (where the coordinator listens),
  // served by the coordinator and presented by every worker (mutual TLS).
  std::vector<std::string> coord_tls, worker_tls;
  if (a.tls) {
    const std::string dir = secrets.path() + "/tls", cert = dir + "/127.0.0.1.pem",
                      key = dir + "/127.0.0.1.key", ca = dir + "/ca.pem";
    control::make_lab_certs(dir, {.hosts = {"127.0.0.1"}, .days = 2});
    coord_tls = {"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, "--tls-client-auth"};
    worker_tls = {"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key};
  }

  Supervisor sup;
  std::vector<std::string> coord_args = {"microddp", "coordinator"};
  coord_args.insert(coord_args.end(), forwarded.begin(), forwarded.end());
  for (const std::string& s :
       {std::string("--world-size"), std::to_string(a.nproc), std::string("--port"),
        std::to_string(a.port), std::string("--token-file"), token_file,
        std::string("--address-file"), address_file, std::string("--http-url-file"), url_file,
        std::string("--heartbeat-ms"), std::to_string(a.health.heartbeat_ms),
        std::string("--heartbeat-timeout-ms"), std::to_string(a.health.heartbeat_timeout_ms),
        std::string("--rendezvous-timeout-s"), std::to_string(a.health.rendezvous_timeout_s)})
    coord_args.push_back(s);
  coord_args.insert(coord_args.end(), coord_tls.begin(), coord_tls.end());
  const std::string coord_log = logs + "/coordinator.log";
  const std::size_t coord = sup.add(
      {"coordinator", spawn(coord_args, {str(kNoResumeHintEnv, "=1")}, coord_log), coord_log});
  LogFollower coord_follower(coord_log);
  const auto show_coordinator_warnings = [&coord_follower] {
    coord_follower.poll([](const std::string& line) {
      if (is_warning_or_error(line)) std::fprintf(stderr, "%s\n", line.c_str());
    });
  };

  // The coordinator writes its address once it listens.
  std::string address;
  const auto start_deadline = Clock::now() + 30s;
  while (address.empty()) {
    sup.poll(20ms);
    std::ifstream in(address_file);
    std::getline(in, address);
    if (!address.empty()) break;
    if (sup.child(coord).done) {
      const std::string why = error_line(coord_log);
      throw Error(str("the coordinator did not start", why.empty() ? "" : ": " + why,
                      " (log: ", coord_log, ")"));
    }
    if (sup.interrupted()) {
      secrets.remove();
      std::exit(128 + sup.interrupted());  // ~Supervisor is skipped: children die with us
    }
    if (Clock::now() > start_deadline)
      throw Error(str("the coordinator did not start within 30 s (log: ", coord_log, ")"));
  }
  std::printf("microddp run: coordinator at %s, %d workers (job '%s'); logs in %s\n",
              address.c_str(), a.nproc, a.job_id.c_str(), logs.c_str());
  std::string dashboard_url;  // written before the address: ready now
  std::ifstream url_in(url_file);
  std::getline(url_in, dashboard_url);
  if (!dashboard_url.empty()) std::printf("microddp run: dashboard at %s\n", dashboard_url.c_str());
  std::fflush(stdout);

  // A restarted rank's log goes on where the attempt before left it.
  const auto start_rank = [&](int r, bool again) {
    std::vector<std::string> args = {"microddp",     "worker",   "--coordinator", address,
                                     "--token-file", token_file, "--job-id",      a.job_id};
    args.insert(args.end(), worker_tls.begin(), worker_tls.end());
    const std::string log = r == 0 ? "" : str(logs, "/worker-", r, ".log");
    return spawn(args, {str("RANK=", r), str("LOCAL_RANK=", r), str("LOCAL_WORLD_SIZE=", a.nproc)},
                 log, again);
  };
  std::vector<int> restarts(static_cast<std::size_t>(a.nproc) + 1, 0);  // by child index
  for (int r = 0; r < a.nproc; ++r) {
    const std::string log = r == 0 ? "" : str(logs, "/worker-", r, ".log");
    sup.add({str("rank ", r), start_rank(r, false), log});
  }

  // Supervise. A failed child gives the others one heartbeat timeout to hear
  // the verdict and exit by themselves; then (or at once on SIGINT/SIGTERM)
  // the workers get SIGTERM (they leave, saying so), then the coordinator,
  // and whatever is still there after a few seconds SIGKILL. With
  // --http-linger the coordinator outlives the workers by that long (unless
  // interrupted), serving the final state of the job.
  const auto grace = std::chrono::milliseconds(a.health.heartbeat_timeout_ms) + 5s;
  const auto linger = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(a.dashboard.http_port >= 0 ? a.dashboard.http_linger_s : 0));
  bool linger_said = false;
  std::optional<Clock::time_point> stop_workers_at, stop_all_at, kill_at;
  bool workers_stopped = false;
  const bool elastic = a.train.min_nproc > 0;
  while (!sup.all_done()) {
    sup.poll(100ms);
    show_coordinator_warnings();
    const auto now = Clock::now();
    // A worker that died, or whose attempt ended (exit 75), joins again
    // while the job goes on; the coordinator decides whether it does.
    for (std::size_t i = 0; i < sup.children().size() && !stop_workers_at; ++i) {
      Child& c = sup.child(i);
      const bool restartable = c.status == control::kExitRestart || c.status > 128;
      if (i == coord || !c.done || !restartable || sup.child(coord).done ||
          restarts[i] >= a.restarts.max_restarts)
        continue;
      ++restarts[i];
      std::printf(
          "microddp run: %s %s; starting it again (%d of --max-restarts %d)\n", c.name.c_str(),
          c.status == control::kExitRestart ? "left its ended attempt"
                                            : str("died (signal ", c.status - 128, ")").c_str(),
          restarts[i], a.restarts.max_restarts);
      std::fflush(stdout);
      c.pid = start_rank(static_cast<int>(i - 1), true);
      c.done = false;
      c.status = 0;
    }
    bool failed = false, workers_done = true;
    for (std::size_t i = 0; i < sup.children().size(); ++i) {
      const Child& c = sup.child(i);
      // Elastic: a worker gone for good ends nothing by itself; the coordinator
      // re-forms the job without it, or fails it (then it exits too).
      const bool coordinator_decides = elastic && i != coord && !sup.child(coord).done;
      failed = failed || (c.done && c.status != 0 && c.status != control::kExitRecordsLost &&
                          !coordinator_decides);
      if (i != coord) workers_done = workers_done && c.done;
    }
    if (sup.interrupted() && (!stop_workers_at || *stop_workers_at > now)) stop_workers_at = now;
    if (failed && !stop_workers_at) stop_workers_at = now + grace;
    if (stop_workers_at && now >= *stop_workers_at && !workers_stopped) {
      for (std::size_t i = 0; i < sup.children().size(); ++i)
        if (i != coord && !sup.child(i).done) ::kill(sup.child(i).pid, SIGTERM);
      workers_stopped = true;
      stop_all_at = now + 5s + (sup.interrupted() ? 0s : linger);
    }
    if (workers_done && !sup.child(coord).done && linger > 0s && !linger_said) {
      std::printf(
          "microddp run: the workers are done; the dashboard stays up for %g s "
          "(--http-linger; Ctrl-C to stop)\n",
          a.dashboard.http_linger_s);
      std::fflush(stdout);
      linger_said = true;
    }
    const bool coordinator_may_linger = linger > 0s && !sup.interrupted();
    if (workers_stopped && !kill_at &&
        ((workers_done && !coordinator_may_linger) || now >= *stop_all_at)) {
      sup.signal_all(SIGTERM);
      kill_at = now + 3s;
    }
    if (kill_at && now >= *kill_at) sup.signal_all(SIGKILL);
  }

  show_coordinator_warnings();
  // A child killed during shared-memory set-up leaves its segment's name in
  // /dev/shm (Note [Orphaned segments]); none may outlive the job.
  comm::shm::Segment::remove_orphans();
  const auto say_how_to_resume = [&] {
    std::fflush(stdout);
    std::fprintf(stderr, "microddp run: %s\n",
                 resume_line(own_command_line(), a.train.run_dir).c_str());
  };
  if (sup.interrupted()) {
    std::fflush(stdout);
    std::fprintf(stderr, "microddp run: interrupted (%s); all processes stopped; logs in %s\n",
                 sup.interrupted() == SIGINT ? "SIGINT" : "SIGTERM", logs.c_str());
    say_how_to_resume();
    secrets.remove();
    std::exit(128 + sup.interrupted());
  }
  // lost: finished, but records not written (a full disk); gone: a worker
  // of an elastic job that did not come back, in a job that succeeded without it.
  std::vector<std::string> failed, lost, gone;
  const bool succeeded = sup.child(coord).status == 0;
  for (std::size_t i = 0; i < sup.children().size(); ++i) {
    const Child& c = sup.child(i);
    if (c.status == control::kExitRecordsLost)
      lost.push_back(c.log.empty() ? c.name + " (see above)"
                                   : str(c.name, ": ", error_line(c.log)));
    else if (c.status != 0)
      (elastic && succeeded && i != coord ? gone : failed)
          .push_back(str(c.name, " (",
                         c.status > 128 ? str("signal ", c.status - 128) : str("exit ", c.status),
                         ")"));
  }
  if (failed.empty() && lost.empty()) {
    std::string without;
    for (const auto& g : gone) without += (without.empty() ? "" : ", ") + g;
    std::printf("microddp run: %s%s\n",
                gone.empty() ? str("all ", a.nproc, " ranks finished").c_str()
                             : str("the job finished without ", without, ": --min-nproc ",
                                   a.train.min_nproc, " let it go on with fewer ranks")
                                   .c_str(),
                a.train.run_dir.empty()
                    ? ""
                    : (", metrics in " + a.train.run_dir + "/metrics.jsonl").c_str());
    if (temp_logs) std::filesystem::remove_all(logs);
    return;
  }
  if (failed.empty()) {
    std::string which;
    for (const auto& l : lost) which += (which.empty() ? "" : "; ") + l;
    throw control::RecordsLostError(
        str("all ", a.nproc, " ranks finished, but records were lost: ", which));
  }
  std::string why = error_line(coord_log);
  for (std::size_t i = 1; why.empty() && i < sup.children().size(); ++i)
    why = error_line(sup.child(i).log);
  std::string who;
  for (const auto& f : failed) who += (who.empty() ? "" : ", ") + f;
  say_how_to_resume();
  throw Error(
      str(why.empty() ? "the job failed" : why, " [failed: ", who, "; logs in ", logs, "]"));
}

}  // namespace

void register_run(CLI::App& app) {
  auto a = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand(
      "run", "Run a whole job on this machine: a coordinator and N workers as child processes");
  const char* g = "Run";
  cmd->add_option("--nproc", a->nproc, "number of workers (ranks) to start")
      ->check(CLI::Range(1, kMaxLocalRanks))
      ->required()
      ->group(g);
  cmd->add_option("--port", a->port, "coordinator port (0: any free port)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--token", a->token, "the job's shared secret (default: a random one)")->group(g);
  cmd->add_option("--job-id", a->job_id, "name of the job")->group(g)->capture_default_str();
  cmd->add_flag("--tls", a->tls,
                "TLS with a throw-away CA made in the job's temporary directory: mutual TLS on the "
                "control plane, HTTPS for the dashboard")
      ->group(g);
  add_health_flags(*cmd, a->health, g);
  add_restart_flags(*cmd, a->restarts, a->train.min_nproc, g);
  add_dashboard_flags(*cmd, a->dashboard);
  add_training_flags(*cmd, a->train);
  add_checkpoint_flags(*cmd, a->train);
  add_ddp_flags(*cmd, a->train);
  cmd->callback([a] { run_job(*a); });
}

}  // namespace mddp::cli
