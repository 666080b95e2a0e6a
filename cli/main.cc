// microddp: one binary, one subcommand per job (see `microddp --help`).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

#include "cli/commands.h"
#include "control/exit_status.h"
#include "core/comm/nccl/transport_log.h"
#include "core/common/check.h"
#include "core/common/log.h"
#include "mddp/config.h"

namespace {

// MDDP_PARSE_ONLY=1, a test seam: the command line is parsed (every flag,
// its value and its checks) and nothing runs; tests/docs/
// readme_commands_test.py checks the README's long commands this way. A
// subcommand's parse-complete callback runs after its flags were converted
// and checked, before the command's own callback (which stays: it owns the
// flags' storage).
struct ParsedOnly {};
void parse_only(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    sub->parse_complete_callback([] { throw ParsedOnly{}; });
    parse_only(*sub);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: it may set NCCL's logging variables.
  mddp::comm::nccl::capture_nccl_log();
  CLI::App app{"microddp " MDDP_VERSION
               " - distributed data-parallel training from first principles"};
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
  mddp::cli::register_data(app);
  mddp::cli::register_gpu(app);
  mddp::cli::register_lab(app);
  mddp::cli::register_sample(app);
  if (const char* p = std::getenv("MDDP_PARSE_ONLY"); p && std::string(p) == "1") parse_only(app);
  try {
    app.parse(argc, argv);
  } catch (const ParsedOnly&) {
    return 0;
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; every other
    // parse error is bad input: one line, exit 1, like any other.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "microddp: error: %s (see --help)\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(
        stderr,
        "microddp: error: out of memory: the sizes asked for (model, batch, dataset) do not fit "
        "in this machine's memory; make them smaller\n");
    return 1;
  } catch (const mddp::control::RestartError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "microddp: restart: %s\n", e.what());
    return mddp::control::kExitRestart;
  } catch (const mddp::control::RecordsLostError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "microddp: error: %s\n", e.what());
    return mddp::control::kExitRecordsLost;
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
