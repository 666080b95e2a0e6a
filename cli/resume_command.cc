#include "cli/resume_command.h"

#include <fstream>

#include "core/common/check.h"
#include "core/train/checkpoint.h"

namespace mddp::cli {

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
  return argv;
}

std::string shell_word(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./:=,+@%") == std::string::npos;
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\\''";  // end the quote, an escaped quote, quote again
    else
      out += c;
  }
  out += '\'';
  return out;
}

namespace {

// The words of a command line, each quoted for the shell, separated by spaces.
std::string command_text(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_word(w);
  }
  return out;
}

}  // namespace

std::vector<std::string> without_flags(const std::vector<std::string>& argv,
                                       const std::set<std::string>& with_value,
                                       const std::set<std::string>& switches) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    const std::string name = a.substr(0, a.find('='));
    if (switches.count(name)) continue;
    if (with_value.count(name)) {
      if (name == a) ++i;  // "--flag value": its value too
      continue;
    }
    out.push_back(a);
  }
  return out;
}

std::string resume_line(const std::vector<std::string>& argv, const std::string& run_dir) {
  std::vector<std::string> args = without_flags(argv, {"--resume"});
  const bool had_resume = args.size() != argv.size();
  std::string checkpoint;
  if (!run_dir.empty()) {
    try {
      checkpoint = train::find_checkpoint(run_dir);
    } catch (const std::exception&) {
      // none complete in it
    }
  }
  if (checkpoint.empty() && !had_resume)
    return run_dir.empty() ? "no checkpoint to resume from: without --run-dir nothing is saved"
                           : str("no checkpoint to resume from: ", run_dir,
                                 " holds none (--checkpoint-every N writes one every N steps)");
  if (checkpoint.empty())  // resumed, and failed before its first checkpoint: the same again
    return str("resume the run (from where it was resumed; no checkpoint since) with: ",
               command_text(argv));
  args.push_back("--resume");
  args.push_back(run_dir);
  return str("resume the run (from ", checkpoint, ") with: ", command_text(args));
}

}  // namespace mddp::cli
