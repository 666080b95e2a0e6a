// N ranks of this host as forked processes: the one launcher behind
// `bench`, `verify` and the demos (cli/local_ranks.h), the Labs' checkers
// (labs/support/ranks.h) and the tests' process ranks (tests/support/ranks.h).
// Each caller decides what a rank's exit means; this file forks, reaps
// promptly (a zombie still answers kill(pid, 0), so a peer asking whether a
// dead rank lives would be told yes), bounds the wait and stops the rest.
//
// The children are forked without exec: they share nothing but the memory
// image of the moment, so fork from a thread with no others running, before
// CUDA (Note [CUDA and fork] in core/tensor/cuda_status.h). They die with
// the parent (PR_SET_PDEATHSIG).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace mddp::comm {

// How one forked rank ended.
struct RankExit {
  int exit_code = -1;      // when it exited
  int signal = 0;          // when a signal ended it
  bool timed_out = false;  // still running at the limit: killed
  bool ok() const { return exit_code == 0 && signal == 0 && !timed_out; }
  // As a shell says it: the exit code, or 128 + the signal.
  int code() const { return signal != 0 ? 128 + signal : exit_code; }
  // "exited with code 1", "killed by signal Killed", "still running at the timeout (killed)".
  std::string describe() const;
};

struct ForkOptions {
  // Ranks still running this long after the fork are SIGKILLed (timed_out);
  // zero: no limit.
  std::chrono::milliseconds limit{0};
  // The first rank to fail gets the others SIGTERMed: they would otherwise
  // wait for it until their own timeouts.
  bool stop_others_on_failure = false;
};

struct ForkResult {
  std::vector<RankExit> ranks;  // by rank
  int first_failed = -1;        // the rank whose failure was reaped first; -1: none failed
};

// Runs child(rank) in n forked processes and returns once every one ended.
// The child's return value is its exit code; an exception escaping it
// prints "rank R: error: WHAT" and exits 1. Throws mddp::Error when a fork
// fails (the ranks forked before it are killed).
ForkResult fork_ranks(int n, const std::function<int(int rank)>& child,
                      const ForkOptions& options = {});

}  // namespace mddp::comm
