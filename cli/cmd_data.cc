#include "cli/commands.h"

namespace mddp::cli {

// `microddp data <what>`: the datasets on disk.
void register_data(CLI::App& app) {
  register_group(app, "data", "Check the datasets on disk", {register_data_verify});
}

}  // namespace mddp::cli
