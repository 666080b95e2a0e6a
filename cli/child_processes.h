// The children of `microddp run`: fresh runs of this binary (fork + exec of
// /proc/self/exe, which resets our signal handlers), each in a process
// group of its own (a Ctrl-C reaches only `run`, which then stops them in
// order) and dying with `run` (PR_SET_PDEATHSIG), so none is left behind.
// Reaped and signalled here; what to do with them is run_policy.h's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "cli/run_policy.h"
#include "core/common/stop_signals.h"

namespace mddp::cli {

struct Child {
  std::string name;  // "coordinator", "rank 2"
  pid_t pid = -1;
  std::string log;  // "" = inherits our stdout/stderr
  ChildState state;
};

// Starts `args` (argv[0] included) as a child of this binary with `extra_env`
// added to ours; its output goes to `log` (0600, appended to when `append`),
// or to ours when "".
pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
            const std::string& log, bool append = false);

// The last "microddp: error: ..." line of a log, without the prefix ("" if none).
std::string error_line(const std::string& log);

// Every child of the run. SIGINT and SIGTERM are caught while it lives; the
// destructor SIGKILLs and reaps what is still running.
class ChildProcesses {
 public:
  ChildProcesses() = default;
  ~ChildProcesses();
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

  std::size_t add(Child c);
  Child& child(std::size_t i) { return children_[i]; }
  std::size_t size() const { return children_.size(); }
  std::vector<ChildState> states() const;
  int interrupted() const { return signal_; }  // the signal caught, or 0

  // Sleeps up to `timeout` (a signal cuts it short); reaps children.
  void poll(std::chrono::milliseconds timeout);
  bool all_done() const;
  // Sends `sig` to every child still running from index `first` on.
  void signal(int sig, std::size_t first = 0);

 private:
  StopSignals signals_;  // SIGINT/SIGTERM, read by poll()
  std::vector<Child> children_;
  int signal_ = 0;
};

}  // namespace mddp::cli
