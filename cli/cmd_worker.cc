// `microddp worker`: one rank of a job. Joins the coordinator, trains with
// the job's config (the coordinator's training flags), streams its timings,
// leaves. Exits 0 when the job finished on this rank; else 1 with one line:
// the coordinator's verdict naming the rank at fault, or this rank's error.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/job_flags.h"
#include "cli/tls_flags.h"
#include "cli/train_flags.h"
#include "core/common/check.h"
#include "core/common/log.h"
#include "worker/worker.h"

namespace mddp::cli {
namespace {

struct WorkerArgs {
  worker::WorkerOptions o;
  std::string token_file, log_level = "info";
  coordinator::TlsFlags tls;
  double join_timeout_s = 360, connect_timeout_s = 60;
};


// MASTER_ADDR:MASTER_PORT (torchrun's variables) when --coordinator is not given.
std::string coordinator_from_env() {
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (addr && *addr && port && *port) return str(addr, ":", port);
  return "";
}

void run(WorkerArgs& a) {
  log::set_level(a.log_level);
  if (a.o.coordinator.empty()) a.o.coordinator = coordinator_from_env();
  if (a.o.coordinator.empty())
    throw InputError(
        "give the coordinator's address: --coordinator HOST:PORT (or MASTER_ADDR and MASTER_PORT)");
  if (!a.token_file.empty()) a.o.token = read_token_file(a.token_file);
  a.o.tls = coordinator::load_tls(a.tls, coordinator::TlsRole::kClient);
  a.o.join_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.join_timeout_s * 1000.0));
  a.o.connect_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(a.connect_timeout_s * 1000.0));
  a.o.on_start = [](const train::TrainConfig& cfg, nn::Sequential& model) {
    print_config(cfg, model.num_parameters(), model.describe());
  };
  worker::run_worker(a.o);
}

}  // namespace

void register_worker(CLI::App& app) {
  auto a = std::make_shared<WorkerArgs>();
  auto* cmd =
      app.add_subcommand("worker", "Run one rank of a job started by `microddp coordinator`");
  const char* g = "Worker";
  cmd->add_option("--coordinator", a->o.coordinator,
                  "HOST:PORT of the coordinator (default: MASTER_ADDR:MASTER_PORT)")
      ->group(g);
  auto* token = cmd->add_option("--token", a->o.token, "the job's shared secret")
                    ->envname("MDDP_TOKEN")
                    ->group(g);
  cmd->add_option("--token-file", a->token_file, "read the token from this file")
      ->excludes(token)
      ->group(g);
  cmd->add_option("--job-id", a->o.job_id, "the job to join (the coordinator's --job-id)")
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
  cmd->add_option("--connect-timeout-s", a->connect_timeout_s,
                  "give up when the coordinator does not accept connections this long")
      ->check(finite_above(0))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--join-timeout-s", a->join_timeout_s,
                  "give up when the job has not formed this long after joining")
      ->check(finite_above(0))
      ->group(g)
      ->capture_default_str();
  cmd->add_option("--log-level", a->log_level, "trace, debug, info, warn, error or off")
      ->group(g)
      ->capture_default_str();
  add_tls_flags(*cmd, a->tls, coordinator::TlsRole::kClient);
  cmd->callback([a] { run(*a); });
}

}  // namespace mddp::cli
