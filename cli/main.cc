// microddp: one binary, one subcommand per job (see `microddp --help`).
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/common/check.h"
#include "core/comm/nccl/transport_log.h"
#include "core/common/log.h"
#include "mddp/config.h"

int main(int argc, char** argv) {
  // Before any thread starts: it may set NCCL's logging variables.
  mddp::comm::nccl::capture_nccl_log();
  CLI::App app{"microddp " MDDP_VERSION " - distributed data-parallel training from first principles"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "microddp " MDDP_VERSION);
  mddp::log::init("main");
  mddp::cli::register_train(app);
  mddp::cli::register_run(app);
  mddp::cli::register_coordinator(app);
  mddp::cli::register_worker(app);
  mddp::cli::register_bench(app);
  mddp::cli::register_demo(app);
  mddp::cli::register_verify(app);
  mddp::cli::register_model(app);
  mddp::cli::register_scale(app);
  mddp::cli::register_analyze(app);
  mddp::cli::register_certs(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const mddp::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "microddp: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "microddp: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
