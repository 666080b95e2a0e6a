#include "cli/commands.h"

namespace mddp::cli {

// `microddp demo <what>`: the course's small runnable examples.
void register_demo(CLI::App& app) {
  register_group(app, "demo",
                 "Small runnable lessons (collectives, a ring step by step, manual DP, hooks)",
                 {register_demo_manual, register_demo_hooks, register_demo_bucketing,
                  register_demo_collectives, register_demo_ring});
}

}  // namespace mddp::cli
