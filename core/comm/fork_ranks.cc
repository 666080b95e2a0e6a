#include "core/comm/fork_ranks.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "core/common/check.h"

namespace mddp::comm {
namespace {

// In the child: runs the rank and never returns.
[[noreturn]] void run_child(int rank, pid_t parent, const std::function<int(int rank)>& child) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(3);  // the parent died before prctl
  int code = 1;
  try {
    code = child(rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

std::vector<pid_t> fork_all(int n, const std::function<int(int rank)>& child) {
  std::fflush(stdout);  // or the children print what the parent buffered, again
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) run_child(r, parent, child);
    if (pid < 0) {
      const int err = errno;
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw Error(str("fork of rank ", r, " failed: ", std::strerror(err)));
    }
    pids.push_back(pid);
  }
  return pids;
}

RankExit exit_of(int status) {
  RankExit e;
  if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  return e;
}

}  // namespace

std::string RankExit::describe() const {
  if (timed_out) return "still running at the timeout (killed)";
  if (signal != 0) return str("killed by signal ", ::strsignal(signal));
  return str("exited with code ", exit_code);
}

ForkResult fork_ranks(int n, const std::function<int(int rank)>& child,
                      const ForkOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.limit;
  const std::vector<pid_t> pids = fork_all(n, child);
  ForkResult result;
  result.ranks.resize(pids.size());
  std::vector<bool> reaped(pids.size(), false);
  std::size_t left = pids.size();
  while (left > 0) {
    bool any = false;
    for (std::size_t r = 0; r < pids.size(); ++r) {
      int status = 0;
      if (reaped[r] || ::waitpid(pids[r], &status, WNOHANG) <= 0) continue;
      reaped[r] = true;
      --left;
      any = true;
      result.ranks[r] = exit_of(status);
      if (result.ranks[r].ok() || result.first_failed >= 0) continue;
      result.first_failed = static_cast<int>(r);
      if (options.stop_others_on_failure)
        for (std::size_t q = 0; q < pids.size(); ++q)
          if (!reaped[q]) ::kill(pids[q], SIGTERM);
    }
    if (options.limit.count() > 0 && std::chrono::steady_clock::now() >= deadline) break;
    if (!any && left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (std::size_t r = 0; r < pids.size(); ++r) {  // past the limit
    if (reaped[r]) continue;
    ::kill(pids[r], SIGKILL);
    ::waitpid(pids[r], nullptr, 0);
    result.ranks[r].timed_out = true;
    if (result.first_failed < 0) result.first_failed = static_cast<int>(r);
  }
  return result;
}

}  // namespace mddp::comm
