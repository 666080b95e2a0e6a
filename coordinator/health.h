// Health: who is alive and where each rank is.
//
// Every rank sends a heartbeat each `interval` carrying its progress (step,
// phase, the collective it entered last). Two things are derived from them:
//  * a rank silent for longer than `timeout` fails the job:
//      "rank 1 (host b) stopped sending heartbeats: the last came 10.2 s ago ..."
//  * when no rank's progress changed for more than 2 intervals, a roll call
//    says where everyone is, grouping ranks that are at the same place:
//      "ranks 0, 2, 3 wait in all_reduce #1042 (bucket 7); rank 1 was last seen in forward of step
//      1042"
//    (repeated every 10 intervals while the stall lasts).
// A rank that leaves with a failure fails the job, named; when all ranks have
// left with success the job succeeded. Thread-safe; time comes from the caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/outcome.h"

namespace mddp::coordinator {

struct Progress {
  int64_t step = 0;
  std::string phase =
      "setup";  // setup | data | forward | backward | sync | optimizer | eval | checkpoint | done
  int64_t collective_entered = 0;    // sequence number of the last collective entered
  int64_t collective_completed = 0;  // ... and of the last completed
  std::string op;                    // the collective entered last
  int bucket = -1;                   // its gradient bucket, -1: none
  int64_t total_steps = 0;           // steps the job will run (0: not known yet)

  bool operator==(const Progress&) const = default;
};

struct RankHealth {
  int rank = 0;
  std::string host;
  TimePoint last_seen{};
  Progress progress;
  int64_t heartbeats = 0;
  bool left = false, left_ok = false;
  std::string leave_message;
};

// A failure to report: the rank at fault (-1: none) and one line.
struct Failure {
  int rank = -1;
  std::string message;
};

class Health {
 public:
  struct Options {
    std::chrono::milliseconds interval{1000};
    std::chrono::milliseconds timeout{10000};
  };
  struct LeaveResult {
    std::optional<Failure> failure;  // the rank left with ok = false
    bool all_left = false;
    bool all_ok = false;  // every rank left with ok = true
  };
  struct CheckResult {
    std::optional<Failure> failure;        // a rank went silent (reported once per rank)
    std::optional<std::string> roll_call;  // "no progress for 2.1 s: ranks ..."
  };

  explicit Health(Options options);

  // Starts watching ranks 0..hosts.size()-1 (the rendezvous completed): each
  // counts as seen at `now`.
  void start(const std::vector<std::string>& hosts, TimePoint now);
  // Records a heartbeat; ignored for a rank out of range or before start().
  void heartbeat(int rank, const Progress& progress, TimePoint now);
  LeaveResult leave(int rank, bool ok, const std::string& message, TimePoint now);
  // Called periodically (a few times per interval).
  CheckResult check(TimePoint now);

  // Where every rank is, grouped (see above). "" before start().
  std::string roll_call(TimePoint now) const;
  std::vector<RankHealth> ranks() const;

 private:
  std::string roll_call_locked(TimePoint now) const;

  const Options options_;
  mutable std::mutex mu_;
  std::vector<RankHealth> ranks_;
  std::vector<bool> reported_silent_;
  TimePoint last_progress_{};                // last time any rank's progress changed
  std::optional<TimePoint> next_roll_call_;  // set while a stall was reported
};

}  // namespace mddp::coordinator
