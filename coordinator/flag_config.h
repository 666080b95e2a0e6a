// `--config job.toml` for a CLI11 command: every top-level key of the TOML
// file is a flag of the command, spelled without the dashes
// (world-size = 4, port = 0, model = "cnn", channels = [16, 32],
// no-eval = true). A flag given on the command line wins over the file.
// Lives here until cli/ grows a home for it; depends on CLI11 and toml++ only.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace mddp::coordinator {

// Applies `path` to the options of `cmd` not given on the command line (run
// it in the command's callback, after parsing). Throws InputError naming the
// file and key for a syntax error, an unknown key, a nested table or a value
// the flag rejects.
void apply_toml_config(CLI::App& cmd, const std::string& path);

}  // namespace mddp::coordinator
