// `microddp worker`: one rank of a job. Joins the coordinator, trains with
// the job's config (the coordinator's training flags), streams its timings,
// leaves. Exits 0 when the job finished on this rank; else 1 with one line:
// the coordinator's verdict naming the rank at fault, or this rank's error.
// When this rank's attempt ended because another rank died and the job
// re-forms (coordinator --max-restarts), it exits 75 (EX_TEMPFAIL: start me
// again), or with --restart starts itself again (exec) and re-joins.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/job_flags.h"
#include "cli/tls_flags.h"
#include "cli/train_flags.h"
#include "control/exit_status.h"
#include "core/common/check.h"
#include "core/common/log.h"
#include "worker/slurm_env.h"
#include "worker/worker.h"

namespace mddp::cli {
namespace {

struct WorkerFlags {
  worker::WorkerOptions o;
  std::string token_file, log_level = "info";
  control::TlsFlags tls;
  double join_timeout_s = 360, connect_timeout_s = 60;
  int coordinator_port = 29500;  // with SLURM: the port on the allocation's first node
  bool restart = false;
};

// Replaces this process by a fresh run of the same command line: a new
// worker with nothing of the old attempt (threads, sockets, segments).
[[noreturn]] void start_again() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv("/proc/self/exe", argv.data());
  throw Error(str("--restart: cannot start this worker again (exec /proc/self/exe: ",
                  std::strerror(errno), ")"));
}

// Where the coordinator is when --coordinator is not given:
// MASTER_ADDR:MASTER_PORT (torchrun's variables), else, in a task started by
// srun, the first node of the allocation (deploy/slurm/ starts it there) at
// --coordinator-port. Under srun the job's world size must be SLURM_NTASKS.
void coordinator_from_env(WorkerFlags& a) {
  const std::optional<worker::SlurmTask> slurm = worker::slurm_task();
  if (slurm) {
    a.o.expected_world_size = slurm->ntasks;
    spdlog::info("SLURM task {} (local {}) of {} on {} node(s)", slurm->rank, slurm->local_rank,
                 slurm->ntasks, slurm->nodes.size());
  }
  if (!a.o.coordinator.empty()) return;
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (addr && *addr && port && *port) {
    a.o.coordinator = str(addr, ":", port);
  } else if (slurm && !slurm->nodes.empty()) {
    a.o.coordinator = str(slurm->nodes.front(), ":", a.coordinator_port);
  }
}

void run(WorkerFlags& a) {
  log::set_level(a.log_level);
  coordinator_from_env(a);
  if (a.o.coordinator.empty())
    throw InputError(
        "give the coordinator's address: --coordinator HOST:PORT (or MASTER_ADDR and MASTER_PORT, "
        "or run "
        "under srun, which names the allocation's nodes in SLURM_JOB_NODELIST)");
  if (!a.token_file.empty()) a.o.token = read_token_file(a.token_file);
  a.o.tls = control::load_tls(a.tls, control::TlsRole::kClient);
  a.o.join_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.join_timeout_s * 1000.0));
  a.o.connect_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(a.connect_timeout_s * 1000.0));
  a.o.on_start = [](const train::TrainConfig& cfg, nn::Module& model) {
    print_config(cfg, model.num_parameters(), model.describe());
  };
  try {
    worker::run_worker(a.o);
  } catch (const control::RestartError& e) {
    if (!a.restart) throw;
    std::fprintf(stderr, "microddp: restart: %s; joining the job again (--restart)\n", e.what());
    start_again();
  }
}

}  // namespace

void register_worker(CLI::App& app) {
  auto a = std::make_shared<WorkerFlags>();
  auto* cmd =
      app.add_subcommand("worker", "Run one rank of a job started by `microddp coordinator`");
  const char* g = "Worker";
  cmd->add_option(
         "--coordinator", a->o.coordinator,
         "HOST:PORT of the coordinator (default: MASTER_ADDR:MASTER_PORT, else under srun the "
         "first node of SLURM_JOB_NODELIST at --coordinator-port)")
      ->group(g);
  cmd->add_option("--coordinator-port", a->coordinator_port,
                  "under srun without --coordinator or MASTER_ADDR: the coordinator's port on the "
                  "allocation's first node (deploy/slurm/)")
      ->check(CLI::Range(1, 65535))
      ->group(g)
      ->capture_default_str();
  auto* token = cmd->add_option("--token", a->o.token, "the job's shared secret")
                    ->envname("MDDP_TOKEN")
                    ->group(g);
  cmd->add_option("--token-file", a->token_file, "read the token from this file")
      ->excludes(token)
      ->group(g);
  cmd->add_option("--job-id", a->o.job_id, "the job to join (the coordinator's --job-id)")
      ->check(job_id_check())
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--device", a->o.device,
                  "cpu or cuda:K (default: the job's --device; 'cuda' means cuda:LOCAL_RANK)")
      ->group(g);
  auto* addr = cmd->add_option("--data-addr", a->o.data_addr,
                               "address the data plane binds and publishes (default: the interface "
                               "on the route to the coordinator)")
                   ->group(g);
  cmd->add_option("--iface", a->o.iface, "network interface whose IPv4 address the data plane uses")
      ->excludes(addr)
      ->group(g);
  cmd->footer(kTimeoutsHelp);
  cmd->add_option("--connect-timeout-s", a->connect_timeout_s,
                  "give up when the coordinator does not accept connections this long")
      ->check(timeout_seconds())
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--join-timeout-s", a->join_timeout_s,
                  "give up when the job has not formed this long after joining")
      ->check(timeout_seconds())
      ->group(g)
      ->capture_default_str();
  cmd->add_flag("--restart", a->restart,
                "when the job re-forms after another rank died (coordinator --max-restarts), start "
                "again and re-join instead of exiting 75")
      ->group(g);
  cmd->add_option("--log-level", a->log_level, "trace, debug, info, warn, error or off")
      ->group(g)
      ->capture_default_str();
  add_tls_flags(*cmd, a->tls, control::TlsRole::kClient);
  cmd->callback([a] { run(*a); });
}

}  // namespace mddp::cli
