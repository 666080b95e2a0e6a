// A stand-in for the microddp binary with the service commands only
// (coordinator, worker, run), so the fault tests run real processes before
// (and independently of) their wiring into cli/main.cc. Mirrors main.cc's
// error handling: one line, exit 1.
#include <cstdio>

#include "cli/commands.h"
#include "core/common/check.h"
#include "core/common/log.h"

namespace mddp::cli {
void register_coordinator(CLI::App& app);
void register_worker(CLI::App& app);
void register_run(CLI::App& app);
}  // namespace mddp::cli

int main(int argc, char** argv) {
  CLI::App app{"microddp (service commands only, for tests)"};
  app.require_subcommand(1);
  mddp::log::init("main");
  mddp::cli::register_coordinator(app);
  mddp::cli::register_worker(app);
  mddp::cli::register_run(app);
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
