// A stand-in for the microddp binary with only the coordinator command
// (cli/cmd_coordinator.cc), so the command can be tested as a process before
// (and independently of) its wiring into cli/main.cc. Mirrors main.cc's
// error handling: one line, exit 1.
#include <cstdio>

#include "cli/commands.h"
#include "core/common/check.h"
#include "core/common/log.h"

namespace mddp::cli {
void register_coordinator(CLI::App& app);
}

int main(int argc, char** argv) {
  CLI::App app{"microddp (coordinator only, for tests)"};
  app.require_subcommand(1);
  mddp::log::init("coordinator");
  mddp::cli::register_coordinator(app);
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
