// A Lab's cases on real processes: `run_group` forks one process per rank
// (comm::fork_ranks; they meet through a FileStore, like `microddp bench`
// and the demos), and inside each rank a CaseLog runs the cases in order.
// After every case the ranks tell each other through the store whether it
// passed, so they all stop at the first case that failed anywhere; each
// rank then reports what it saw (RankFinding) and the parent picks the one
// to show the student.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/comm/store.h"
#include "labs/support/report.h"

namespace mddp::labs {

// How a case went wrong on one rank, most telling first: the exercise is
// not written, the rank crashed, a result was wrong, the student's code
// threw, a communication error (often only the echo of another rank's
// failure: a peer that stopped talking).
enum class Problem { kNone, kTodo, kCrash, kWrong, kException, kComm };

struct RankFinding {
  int rank = 0;
  int64_t cases = 0;  // cases passed
  Problem problem = Problem::kNone;
  std::string failed_case;  // the case it failed in ("" when none)
  std::string message;      // one line: what was wrong on this rank
  std::vector<std::string> details;
  nlohmann::json evidence;  // lab-specific, for the diagnosis (e.g. the exchanges it made)
};

// What a case's code returns on one rank: empty when right.
struct CaseResult {
  std::string message = {};
  std::vector<std::string> details = {};
  nlohmann::json evidence = {};
  static CaseResult ok() { return {}; }
};

// Runs fn, turning its exceptions into findings: LabTodo is "not written
// yet", a CommError is kComm, anything else "your code threw". Used for the
// cases a check runs in its own process too.
struct Guarded {
  Problem problem = Problem::kNone;  // kWrong when fn returned a failure
  CaseResult result;
};
Guarded run_guarded(const std::function<CaseResult()>& fn);

class CaseLog {
 public:
  // `timeout` bounds the wait for the other ranks after each case (make it
  // longer than the communication timeout, so a deadlock is reported by the
  // ranks stuck in it, not by the ranks waiting for them).
  CaseLog(int rank, int size, comm::Store& store, std::chrono::milliseconds timeout);

  // Runs one case. fn's exceptions are findings too (LabTodo, CommError,
  // anything else). On a failure here, teardown() runs first — it should
  // destroy this rank's transport, so peers blocked on it fail at once
  // instead of at their deadline. Returns true when every rank passed.
  // `evidence` (optional) is asked after fn either way, so that ranks
  // which passed a case another rank failed still show what they did.
  bool run(const std::string& name, const std::function<CaseResult()>& fn,
           const std::function<void()>& teardown,
           const std::function<nlohmann::json()>& evidence = {});

  const RankFinding& finding() const { return finding_; }

 private:
  int rank_, size_;
  comm::Store& store_;
  std::chrono::milliseconds timeout_;
  int64_t index_ = 0;
  RankFinding finding_;
};

// Runs fn(rank, store) in `n` forked processes of this host and returns
// every rank's finding in rank order. A rank that dies or is still running
// after `limit` is reported as a crash.
std::vector<RankFinding> run_group(
    int n, const std::function<RankFinding(int rank, comm::Store& store)>& fn,
    std::chrono::milliseconds limit);

// Runs a timing on n ranks like run_group; when a rank fails, notes
// "speed: not measured: ..." in `report` and returns nullopt.
std::optional<std::vector<RankFinding>> run_timing(
    int n, const std::function<RankFinding(int rank, comm::Store& store)>& fn,
    std::chrono::milliseconds limit, Report& report);

// The finding to show: the most telling failure (Problem order, then the
// lowest rank), or nullptr when every rank passed.
const RankFinding* worst_finding(const std::vector<RankFinding>& ranks);

}  // namespace mddp::labs
