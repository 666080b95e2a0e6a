#include "cli/child_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "core/common/check.h"

namespace mddp::cli {

pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
            const std::string& log, bool append) {
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env_store) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int log_fd = -1;
  if (!log.empty()) {  // 0600: the coordinator's log holds the dashboard's login URL
    log_fd =
        ::open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0600);
    if (log_fd < 0) throw Error(str("cannot write ", log, ": ", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(str("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    ::execve("/proc/self/exe", argv.data(), envp.data());
    const char msg[] = "microddp run: exec of /proc/self/exe failed\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  return pid;
}

std::string error_line(const std::string& log) {
  if (log.empty()) return "";
  std::ifstream in(log);
  std::string line, last;
  const std::string prefix = "microddp: error: ";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) last = line.substr(prefix.size());
  return last;
}

ChildProcesses::~ChildProcesses() {
  for (auto& c : children_)
    if (!c.state.done) ::kill(c.pid, SIGKILL);
  for (auto& c : children_)
    if (!c.state.done) ::waitpid(c.pid, nullptr, 0);
}

std::size_t ChildProcesses::add(Child c) {
  children_.push_back(std::move(c));
  return children_.size() - 1;
}

std::vector<ChildState> ChildProcesses::states() const {
  std::vector<ChildState> out;
  for (const auto& c : children_) out.push_back(c.state);
  return out;
}

void ChildProcesses::poll(std::chrono::milliseconds timeout) {
  const timespec ts{static_cast<time_t>(timeout.count() / 1000),
                    static_cast<long>(timeout.count() % 1000) * 1'000'000};
  if (signals_.pending() == 0) ::nanosleep(&ts, nullptr);
  if (signals_.pending() != 0 && !signal_) signal_ = signals_.pending();
  int status = 0;
  for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;)
    for (auto& c : children_)
      if (c.pid == pid)
        c.state = {true, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
}

bool ChildProcesses::all_done() const {
  for (const auto& c : children_)
    if (!c.state.done) return false;
  return true;
}

void ChildProcesses::signal(int sig, std::size_t first) {
  for (std::size_t i = first; i < children_.size(); ++i)
    if (!children_[i].state.done) ::kill(children_[i].pid, sig);
}

}  // namespace mddp::cli
