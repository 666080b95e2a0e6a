// `microddp run --nproc N ...`: a whole job on this machine, like torchrun's
// standalone mode. Starts a coordinator and N workers as child processes of
// this binary (child_processes.h): the coordinator gets the training flags
// given here, the workers join it. Rank 0's output is shown (its progress);
// the coordinator's and the other ranks' go to log files in the run
// directory (or a temporary one, kept when the job fails). The token lives
// in a private directory that no way out leaves behind (PrivateRunDir).
//
// Cleanup: children live in their own process group and die with this
// process, so none is left behind, nor their shared-memory segments (the
// names of children killed in set-up are removed at the end). Restarts
// (--max-restarts K, handed to the coordinator), the elastic size
// (--min-nproc) and the order in which children are stopped are
// run_policy.h's, which this file carries out.
// Exit status: 0 when every rank finished (elastic: every rank of the last
// attempt); 1 with one line (the coordinator's verdict naming the failed
// rank) when the job failed; 3 when records were lost; 130 / 143 after
// SIGINT / SIGTERM (RunOutcome::exit_code). A job that failed or was
// interrupted is told how to resume (resume_command.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/child_processes.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/job_flags.h"
#include "cli/local_ranks.h"
#include "cli/log_follower.h"
#include "cli/replay.h"
#include "cli/resume_command.h"
#include "cli/run_policy.h"
#include "cli/run_private_dir.h"
#include "cli/train_flags.h"
#include "control/certs.h"
#include "control/exit_status.h"
#include "core/comm/transport/shm/segment.h"
#include "core/common/check.h"
#include "core/common/files.h"
#include "core/common/strings.h"
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
  std::string replay;  // --replay RUN_DIR: the membership changes to run again (replay.h)
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
  std::vector<std::string> argv = own_command_line();
  const auto run = std::find(argv.begin(), argv.end(), "run");
  argv.erase(argv.begin(), run == argv.end() ? run : run + 1);
  return without_flags(argv, kOwnFlags, kOwnSwitches);
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

// The files of one run: its logs (a directory of their own without
// --run-dir, removed when the job succeeds and kept, named in the error,
// when it does not), the token and the coordinator's address and URL in
// the private directory, and with --tls a throw-away CA and certificate.
struct RunFiles {
  std::string logs;
  bool temp_logs = false;
  std::string token, address, http_url;
  std::vector<std::string> coordinator_tls, worker_tls;  // their flags
};

// Rank 0's output is shown; the other ranks' go to their logs.
std::string rank_log(const RunFiles& f, int r) {
  return r == 0 ? "" : str(f.logs, "/worker-", r, ".log");
}

// The coordinator's warnings and errors, shown on the console as they come.
void show_warnings(LogFollower& coordinator_log) {
  coordinator_log.poll([](const std::string& line) {
    if (is_warning_or_error(line)) std::fprintf(stderr, "%s\n", line.c_str());
  });
}

RunFiles prepare_files(const RunFlags& a, const PrivateRunDir& secrets) {
  RunFiles f;
  f.temp_logs = a.train.run_dir.empty();
  f.logs = f.temp_logs ? make_run_logs_dir() : a.train.run_dir;
  make_dirs(f.logs, "--run-dir");
  f.token = secrets.path() + "/token";
  write_private(f.token, a.token.empty() ? random_token() : a.token);
  f.address = secrets.path() + "/address";
  f.http_url = secrets.path() + "/http_url";
  // --tls: one certificate for 127.0.0.1 (where the coordinator listens),
  // served by the coordinator and presented by every worker (mutual TLS).
  if (a.tls) {
    const std::string dir = secrets.path() + "/tls", cert = dir + "/127.0.0.1.pem",
                      key = dir + "/127.0.0.1.key", ca = dir + "/ca.pem";
    control::make_lab_certs(dir, {.hosts = {"127.0.0.1"}, .days = 2});
    f.coordinator_tls = {"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, "--tls-client-auth"};
    f.worker_tls = {"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key};
  }
  return f;
}

// The coordinator, child 0: the flags given to run (less run's own) and
// run's health settings and files. It says no resume line: run says its own.
void start_coordinator(const RunFlags& a, const RunFiles& f, ChildProcesses& children) {
  std::vector<std::string> args = {"microddp", "coordinator"};
  const std::vector<std::string> forwarded = forwarded_args();
  args.insert(args.end(), forwarded.begin(), forwarded.end());
  for (const std::string& s :
       {std::string("--world-size"), std::to_string(a.nproc), std::string("--port"),
        std::to_string(a.port), std::string("--token-file"), f.token, std::string("--address-file"),
        f.address, std::string("--http-url-file"), f.http_url, std::string("--heartbeat-ms"),
        std::to_string(a.health.heartbeat_ms), std::string("--heartbeat-timeout-ms"),
        std::to_string(a.health.heartbeat_timeout_ms), std::string("--rendezvous-timeout-s"),
        std::to_string(a.health.rendezvous_timeout_s)})
    args.push_back(s);
  args.insert(args.end(), f.coordinator_tls.begin(), f.coordinator_tls.end());
  const std::string log = f.logs + "/coordinator.log";
  children.add({"coordinator", spawn(args, {str(kNoResumeHintEnv, "=1")}, log), log, {}});
}

// The coordinator's address, once it listens (it writes the file then);
// exits 128 + signal when run is interrupted meanwhile.
std::string wait_for_address(const RunFiles& f, ChildProcesses& children, PrivateRunDir& secrets) {
  const Child& coordinator = children.child(0);
  const auto deadline = Clock::now() + 30s;
  for (;;) {
    children.poll(20ms);
    std::string address;
    std::ifstream in(f.address);
    std::getline(in, address);
    if (!address.empty()) return address;
    if (coordinator.state.done) {
      const std::string why = error_line(coordinator.log);
      throw Error(str("the coordinator did not start", why.empty() ? "" : ": " + why,
                      " (log: ", coordinator.log, ")"));
    }
    if (children.interrupted()) {
      secrets.remove();
      std::exit(128 + children.interrupted());  // ~ChildProcesses is skipped: children die with us
    }
    if (Clock::now() > deadline)
      throw Error(str("the coordinator did not start within 30 s (log: ", coordinator.log, ")"));
  }
}

void announce(const RunFlags& a, const RunFiles& f, const std::string& address) {
  std::printf("microddp run: coordinator at %s, %d workers (job '%s'); logs in %s\n",
              address.c_str(), a.nproc, a.job_id.c_str(), f.logs.c_str());
  std::string dashboard_url;  // written before the address: ready now
  std::ifstream url_in(f.http_url);
  std::getline(url_in, dashboard_url);
  if (!dashboard_url.empty()) std::printf("microddp run: dashboard at %s\n", dashboard_url.c_str());
  std::fflush(stdout);
}

// Rank r's worker; a restarted rank's log goes on where the attempt before left it.
pid_t start_rank(const RunFlags& a, const RunFiles& f, const std::string& address, int r,
                 bool again) {
  std::vector<std::string> args = {"microddp",     "worker", "--coordinator", address,
                                   "--token-file", f.token,  "--job-id",      a.job_id};
  args.insert(args.end(), f.worker_tls.begin(), f.worker_tls.end());
  return spawn(args, {str("RANK=", r), str("LOCAL_RANK=", r), str("LOCAL_WORLD_SIZE=", a.nproc)},
               rank_log(f, r), again);
}

// Runs the children until every one ended, doing what the policy says
// (run_policy.h) and showing the coordinator's warnings as they come.
void supervise(const RunFlags& a, const RunFiles& f, const std::string& address,
               ChildProcesses& children, LogFollower& coordinator_log) {
  const auto linger = std::chrono::duration_cast<RunClock::duration>(
      std::chrono::duration<double>(a.dashboard.http_port >= 0 ? a.dashboard.http_linger_s : 0));
  // A worker gone for good is the coordinator's to decide about when the job
  // may go on without it (--min-nproc; --on-failure shrink, heal).
  const bool elastic = a.train.min_nproc > 0 || a.train.survivors_train_on();
  RunPolicy policy(a.nproc, {.max_restarts = a.restarts.max_restarts,
                             .elastic = elastic,
                             .shrink = a.train.on_failure == "shrink",
                             .grace = std::chrono::milliseconds(a.health.heartbeat_timeout_ms) + 5s,
                             .linger = linger});
  while (!children.all_done()) {
    children.poll(100ms);
    show_warnings(coordinator_log);
    const RunActions act =
        policy.tick(children.states(), children.interrupted() != 0, Clock::now());
    for (int i : act.restart) {
      Child& c = children.child(static_cast<std::size_t>(i));
      std::printf("microddp run: %s %s; starting it again (%d of --max-restarts %d)\n",
                  c.name.c_str(),
                  c.state.status == control::kExitRestart
                      ? "left its ended attempt"
                      : str("died (signal ", c.state.status - 128, ")").c_str(),
                  policy.restarts(i), a.restarts.max_restarts);
      std::fflush(stdout);
      c.pid = start_rank(a, f, address, i - 1, true);
      c.state = {};
    }
    if (act.stop_workers) children.signal(SIGTERM, 1);
    if (act.say_linger) {
      std::printf(
          "microddp run: the workers are done; the dashboard stays up for %g s "
          "(--http-linger; Ctrl-C to stop)\n",
          a.dashboard.http_linger_s);
      std::fflush(stdout);
    }
    if (act.stop_all) children.signal(SIGTERM);
    if (act.kill_all) children.signal(SIGKILL);
  }
  show_warnings(coordinator_log);
}

// "rank 1 (exit 1)", "rank 2 (signal 9)"; "rank 1: WHY" for records lost.
std::string describe_children(ChildProcesses& children, const std::vector<int>& which, bool lost) {
  return join(which, lost ? "; " : ", ", [&](int i) {
    const Child& c = children.child(static_cast<std::size_t>(i));
    const int st = c.state.status;
    if (lost) return c.log.empty() ? c.name + " (see above)" : str(c.name, ": ", error_line(c.log));
    return str(c.name, " (", st > 128 ? str("signal ", st - 128) : str("exit ", st), ")");
  });
}

// Says how the run ended and ends it so: returns on success, exits 128 +
// signal when interrupted, throws RecordsLostError or Error otherwise.
void finish(const RunFlags& a, const RunFiles& f, ChildProcesses& children,
            PrivateRunDir& secrets) {
  const RunOutcome o =
      run_outcome(children.states(), a.train.min_nproc > 0 || a.train.survivors_train_on(),
                  children.interrupted());
  const auto say_how_to_resume = [&] {
    std::fflush(stdout);
    std::fprintf(stderr, "microddp run: %s\n",
                 resume_line(own_command_line(), a.train.run_dir).c_str());
  };
  switch (o.end) {
    case RunOutcome::End::kInterrupted:
      std::fflush(stdout);
      std::fprintf(stderr, "microddp run: interrupted (%s); all processes stopped; logs in %s\n",
                   o.signal == SIGINT ? "SIGINT" : "SIGTERM", f.logs.c_str());
      say_how_to_resume();
      secrets.remove();
      std::exit(o.exit_code());
    case RunOutcome::End::kSucceeded:
      std::printf(
          "microddp run: %s%s\n",
          o.gone.empty()
              ? str("all ", a.nproc, " ranks finished").c_str()
              : str("the job finished without ", describe_children(children, o.gone, false), ": ",
                    a.train.survivors_train_on() ? "--on-failure " + a.train.on_failure
                                                 : str("--min-nproc ", a.train.min_nproc),
                    " let it go on with fewer ranks")
                    .c_str(),
          a.train.run_dir.empty() ? ""
                                  : (", metrics in " + a.train.run_dir + "/metrics.jsonl").c_str());
      if (f.temp_logs) std::filesystem::remove_all(f.logs);
      return;
    case RunOutcome::End::kRecordsLost:
      throw control::RecordsLostError(str(
          "all ", a.nproc,
          " ranks finished, but records were lost: ", describe_children(children, o.lost, true)));
    case RunOutcome::End::kFailed:
      break;
  }
  std::string why = error_line(children.child(0).log);
  for (std::size_t i = 1; why.empty() && i < children.size(); ++i)
    why = error_line(children.child(i).log);
  say_how_to_resume();
  throw Error(str(why.empty() ? "the job failed" : why, " [failed: ",
                  describe_children(children, o.failed, false), "; logs in ", f.logs, "]"));
}

void check_run_flags(const RunFlags& a) {
  if (a.nproc < 1) throw InputError("give the number of workers: --nproc N");
  a.train.validate();
  validate_health(a.health, a.train.dist.timeout_ms);
  validate_elastic(a.restarts, a.train.min_nproc, a.nproc, a.health);
  validate_on_failure(a.restarts, a.train.on_failure);
  tensor::require_gpu_per_local_rank(a.train.device, a.nproc);  // before any process starts
}

// --replay: the job in legs, each a `run` of its own (replay.h).
void replay_job(const RunFlags& a) {
  if (a.train.run_dir.empty())
    throw InputError("--replay writes the replayed run's checkpoints: give --run-dir");
  std::error_code ec;
  if (std::filesystem::equivalent(a.train.run_dir, a.replay, ec))
    throw InputError("--replay " + a.replay + ": give another --run-dir than the run replayed");
  check_same_job(a.replay, a.train);
  replay(replay_legs(a.replay), without_flags(own_command_line(), {"--replay"}), a.train.run_dir);
}

void run_job(const RunFlags& a) {
  if (!a.replay.empty()) return replay_job(a);
  check_run_flags(a);
  PrivateRunDir secrets;  // the token and the coordinator's address; removed on every way out
  const RunFiles files = prepare_files(a, secrets);
  ChildProcesses children;
  start_coordinator(a, files, children);
  LogFollower coordinator_log(children.child(0).log);
  const std::string address = wait_for_address(files, children, secrets);
  announce(a, files, address);
  for (int r = 0; r < a.nproc; ++r)
    children.add(
        {str("rank ", r), start_rank(a, files, address, r, false), rank_log(files, r), {}});
  supervise(a, files, address, children, coordinator_log);
  // A child killed during shared-memory set-up leaves its segment's name in
  // /dev/shm (Note [Orphaned segments]); none may outlive the job.
  comm::shm::Segment::remove_orphans();
  finish(a, files, children, secrets);
}

}  // namespace

void register_run(CLI::App& app) {
  auto a = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand(
      "run", "Run a whole job on this machine: a coordinator and N workers as child processes");
  const char* g = "Run";
  cmd->add_option("--nproc", a->nproc, "number of workers (ranks) to start")
      ->check(local_ranks())
      ->group(g);
  cmd->add_option("--replay", a->replay,
                  "run the job again with the membership changes of an earlier run (its run "
                  "directory, or its membership.jsonl) at the same steps, so that its final model "
                  "is that run's bit for bit: give that job's flags and a new --run-dir; --nproc "
                  "comes from the log (docs/recovery.md)")
      ->group(g);
  cmd->add_option("--port", a->port, "coordinator port (0: any free port)")
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--token", a->token, "the job's shared secret (default: a random one)")->group(g);
  cmd->add_option("--job-id", a->job_id, "name of the job")
      ->check(job_id_check())
      ->group(g)
      ->capture_default_str();
  cmd->add_flag("--tls", a->tls,
                "TLS with a throw-away CA made in the job's temporary directory: mutual TLS on the "
                "control plane, HTTPS for the dashboard")
      ->group(g);
  add_health_flags(*cmd, a->health, g);
  add_restart_flags(*cmd, a->restarts, a->train.min_nproc, a->train.on_failure, g);
  add_dashboard_flags(*cmd, a->dashboard);
  add_training_flags(*cmd, a->train);
  add_checkpoint_flags(*cmd, a->train);
  add_ddp_flags(*cmd, a->train);
  cmd->callback([a] { run_job(*a); });
}

}  // namespace mddp::cli
