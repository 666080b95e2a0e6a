#include "cli/replay.h"

#include <signal.h>

#include <cstdio>

#include "cli/child_processes.h"
#include "cli/resume_command.h"
#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::cli {
namespace {
using namespace std::chrono_literals;
}  // namespace

void replay(const std::vector<ReplayLeg>& legs, const std::vector<std::string>& args,
            const std::string& run_dir) {
  const std::vector<std::string> common =
      without_flags(args, {"--nproc", "--run-dir", "--stop-after-step"});
  std::string before;  // the leg before's run directory
  for (std::size_t k = 0; k < legs.size(); ++k) {
    const ReplayLeg& leg = legs[k];
    const bool last = k + 1 == legs.size();
    const std::string dir = last ? run_dir : str(run_dir, "/replay/leg-", k + 1);
    std::vector<std::string> cmd = before.empty() ? common : without_flags(common, {"--resume"});
    for (const std::string& a :
         {std::string("--nproc"), std::to_string(leg.world_size), std::string("--run-dir"), dir})
      cmd.push_back(a);
    if (!before.empty()) cmd.insert(cmd.end(), {"--resume", before});
    if (!last) cmd.insert(cmd.end(), {"--stop-after-step", std::to_string(leg.to_step)});
    std::printf("microddp run --replay: leg %zu of %zu: steps %lld to %s on %d rank%s\n", k + 1,
                legs.size(), static_cast<long long>(leg.from_step + 1),
                last ? "the end" : std::to_string(leg.to_step).c_str(), leg.world_size,
                leg.world_size == 1 ? "" : "s");
    std::fflush(stdout);
    ChildProcesses children;
    children.add({str("leg ", k + 1), spawn(cmd, {}, ""), "", {}});
    while (!children.all_done()) {
      children.poll(100ms);
      if (children.interrupted()) children.signal(SIGTERM);  // it stops its own children
    }
    const int status = children.child(0).state.status;
    if (children.interrupted()) std::exit(128 + children.interrupted());
    if (status != 0)
      throw Error(str("--replay: leg ", k + 1, " (", leg.world_size, " ranks",
                      last ? "" : str(", to step ", leg.to_step), ") failed (",
                      status > 128 ? str("signal ", status - 128) : str("exit ", status),
                      "); its run directory: ", dir));
    before = dir;
  }
}

}  // namespace mddp::cli
