#include "cli/commands.h"

namespace mddp::cli {

// `microddp demo <what>`: the course's small runnable examples.
void register_demo(CLI::App& app) {
  auto* demo = app.add_subcommand("demo", "Small runnable lessons (collectives, manual DP, hooks)");
  demo->require_subcommand(1);
  register_demo_manual(*demo);
  register_demo_hooks(*demo);
  register_demo_bucketing(*demo);
  register_demo_collectives(*demo);
}

}  // namespace mddp::cli
