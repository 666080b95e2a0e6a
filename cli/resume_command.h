// What `run` and `coordinator` print when a job fails or is stopped: the
// command that resumes it (docs/recovery.md, "Resuming by hand"), built
// from this process's own command line.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace mddp::cli {

// Set by `run` for its coordinator: run prints the resume command, with
// its own flags, and the coordinator's (run's internal flags) would mislead.
inline constexpr const char* kNoResumeHintEnv = "MICRODDP_NO_RESUME_HINT";

// This process's arguments as it was started (/proc/self/cmdline), argv[0] first.
std::vector<std::string> own_command_line();

// `argv` less the flags named in `with_value` ("--flag v" and "--flag=v")
// and in `switches` ("--flag").
std::vector<std::string> without_flags(const std::vector<std::string>& argv,
                                       const std::set<std::string>& with_value,
                                       const std::set<std::string>& switches = {});

// `arg` as one word for a POSIX shell: as is when it is made only of
// characters no shell treats specially, else in single quotes.
std::string shell_word(const std::string& arg);

// One line for the user: the command `argv` with its --resume replaced by
// --resume RUN_DIR when RUN_DIR holds a complete checkpoint (or kept, when
// the run itself was resumed and wrote none since); else why nothing can be
// resumed. Never throws.
std::string resume_line(const std::vector<std::string>& argv, const std::string& run_dir);

}  // namespace mddp::cli
