// The one helper that runs N ranks in a test: as threads of this process
// (run_threads) or as forked processes (run_processes), every wait bounded.
//
//   run_threads(4, [&](int rank) { ... }, 30s);
//
// A rank fails by throwing (or, in run_threads, by a failed EXPECT/ASSERT
// inside fn). Each failed rank becomes one GoogleTest failure naming the rank
// and the error. A rank still running after `timeout` is a bug (every wait in
// microddp has its own, shorter deadline): run_threads prints which ranks hang
// and aborts the test binary (the threads reference the caller's stack, so it
// cannot return); run_processes SIGKILLs them and reports them.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/common/check.h"

namespace mddp::test {

// Runs fn(0) .. fn(n-1) on n threads; returns once all finished. Returns each
// rank's exception (null when it succeeded) for tests that expect failures;
// tests that expect none use run_threads.
inline std::vector<std::exception_ptr> run_threads_collect(int n,
                                                           const std::function<void(int rank)>& fn,
                                                           std::chrono::seconds timeout) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<bool> done(static_cast<std::size_t>(n), false);
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::exception_ptr error;
      try {
        fn(r);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mu);
      errors[static_cast<std::size_t>(r)] = error;
      done[static_cast<std::size_t>(r)] = true;
      ++finished;
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return finished == n; })) {
      std::string hung;
      for (int r = 0; r < n; ++r)
        if (!done[static_cast<std::size_t>(r)]) hung.append(" ").append(std::to_string(r));
      std::fprintf(
          stderr,
          "run_threads: rank(s)%s still running after %lld s: a wait has no deadline; aborting\n",
          hung.c_str(), static_cast<long long>(timeout.count()));
      std::fflush(stderr);
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Runs fn on n threads; every rank that throws is reported as a test failure.
inline void run_threads(int n, const std::function<void(int rank)>& fn,
                        std::chrono::seconds timeout) {
  auto errors = run_threads_collect(n, fn, timeout);
  for (int r = 0; r < n; ++r)
    if (errors[static_cast<std::size_t>(r)])
      ADD_FAILURE() << "rank " << r << " of " << n
                    << " failed: " << what_of(errors[static_cast<std::size_t>(r)]);
}

// How one forked rank ended.
struct ProcessStatus {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal killed it
  bool timed_out = false;
  bool ok() const { return exit_code == 0 && signal == 0 && !timed_out; }
  std::string describe() const {
    if (timed_out) return "still running at the timeout (killed)";
    if (signal != 0) return std::string("killed by signal ") + ::strsignal(signal);
    return "exited with code " + std::to_string(exit_code);
  }
};

// Forks n children; child r runs fn(r) and _exits 0, or prints the exception
// (or notes a failed EXPECT) and _exits 1. Children die with the parent
// (PR_SET_PDEATHSIG). The parent waits up to `timeout`, SIGKILLs leftovers and
// returns each rank's status. Call it from a test's main thread with no other
// threads running (fork copies only the calling thread).
inline std::vector<ProcessStatus> spawn_processes(int n, const std::function<void(int rank)>& fn,
                                                  std::chrono::seconds timeout) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      ADD_FAILURE() << "fork failed: " << std::strerror(errno);
      return std::vector<ProcessStatus>(static_cast<std::size_t>(n));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(3);
      int code = 0;
      try {
        fn(r);
        if (::testing::Test::HasFailure()) {
          std::fprintf(stderr, "rank %d: a test expectation failed (see above)\n", r);
          code = 1;
        }
      } catch (...) {
        std::fprintf(stderr, "rank %d: %s\n", r, what_of(std::current_exception()).c_str());
        code = 1;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<ProcessStatus> status(static_cast<std::size_t>(n));
  std::vector<bool> reaped(static_cast<std::size_t>(n), false);
  int left = n;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Reaping promptly matters: a zombie still answers kill(pid, 0), so a peer
  // checking whether a dead rank is alive would wrongly think so.
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (int r = 0; r < n; ++r) {
      int ws = 0;
      if (reaped[static_cast<std::size_t>(r)] ||
          ::waitpid(pids[static_cast<std::size_t>(r)], &ws, WNOHANG) <= 0)
        continue;
      auto& s = status[static_cast<std::size_t>(r)];
      if (WIFEXITED(ws)) s.exit_code = WEXITSTATUS(ws);
      if (WIFSIGNALED(ws)) s.signal = WTERMSIG(ws);
      reaped[static_cast<std::size_t>(r)] = true;
      --left;
      any = true;
    }
    if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int r = 0; r < n; ++r) {
    if (reaped[static_cast<std::size_t>(r)]) continue;
    ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
    ::waitpid(pids[static_cast<std::size_t>(r)], nullptr, 0);
    status[static_cast<std::size_t>(r)].timed_out = true;
  }
  return status;
}

// Forks n ranks; every rank that did not exit 0 is reported as a test failure.
inline void run_processes(int n, const std::function<void(int rank)>& fn,
                          std::chrono::seconds timeout) {
  auto status = spawn_processes(n, fn, timeout);
  for (int r = 0; r < n; ++r)
    if (!status[static_cast<std::size_t>(r)].ok())
      ADD_FAILURE() << "rank " << r << " of " << n << " (process) "
                    << status[static_cast<std::size_t>(r)].describe();
}

}  // namespace mddp::test
