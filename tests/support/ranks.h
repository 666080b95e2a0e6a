// The one helper that runs N ranks in a test: as threads of this process
// (run_threads) or as forked processes (run_processes, over comm::fork_ranks),
// every wait bounded.
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

#include "core/comm/fork_ranks.h"
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

// How one forked rank ended (comm::fork_ranks).
using ProcessStatus = comm::RankExit;

// Forks n children; child r runs fn(r) and _exits 0, or prints the exception
// (or notes a failed EXPECT) and _exits 1. Children die with the parent
// (PR_SET_PDEATHSIG). The parent waits up to `timeout`, SIGKILLs leftovers and
// returns each rank's status. Call it from a test's main thread with no other
// threads running (fork copies only the calling thread).
inline std::vector<ProcessStatus> spawn_processes(int n, const std::function<void(int rank)>& fn,
                                                  std::chrono::seconds timeout) {
  const auto child = [&](int r) {
    try {
      fn(r);
    } catch (...) {
      std::fprintf(stderr, "rank %d: %s\n", r, what_of(std::current_exception()).c_str());
      return 1;
    }
    if (!::testing::Test::HasFailure()) return 0;
    std::fprintf(stderr, "rank %d: a test expectation failed (see above)\n", r);
    return 1;
  };
  return comm::fork_ranks(n, child, {.limit = timeout}).ranks;
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
