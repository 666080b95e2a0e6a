// Health: who is alive and where each rank is.
//
// Every rank sends a heartbeat each `interval` carrying its progress (step,
// phase, the collective it entered last), and holds a Watch stream open from
// its join to its leave. From these, and from what ranks report of each
// other's data-plane connections, check() derives the job's verdict (See
// Note [Who is at fault]):
//  * a process that died is seen within milliseconds when its connection
//    to the coordinator closes without a Leave and a peer lost its
//    data-plane connection to it too (or a peer on its host saw it exit),
//    else within the reconnect grace (min(interval, 1 s)):
//      "rank 1 (host b, pid 4242) died (last seen in backward of step 204): ..."
//  * a data-plane connection that broke between two ranks that are both
//    still alive is a network fault, not a lost rank:
//      "the data-plane connection between rank 0 (host a) and rank 1 (host b) broke while both ..."
//  * a rank silent for longer than `timeout` with its connection open (hung,
//    stopped, cut off):
//      "rank 1 (host b, pid 4242) stopped sending heartbeats: the last came 10.2 s ago ..."
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

#include "control/progress.h"
#include "control/verdict.h"
#include "coordinator/outcome.h"
#include "core/comm/types.h"

namespace mddp::coordinator {

struct RankHealth {
  int rank = 0;
  std::string host;
  int64_t pid = 0;
  TimePoint last_seen{};
  Progress progress;
  int64_t heartbeats = 0;
  bool left = false, left_ok = false;  // a rank whose process died counts as left with a failure
  std::string leave_message;
  // Its Watch stream ended without a Leave and was not reopened since.
  std::optional<TimePoint> disconnected;
};

// A rank's report that its data-plane connection to `peer` failed.
struct PeerReport {
  int reporter = -1, peer = -1;
  comm::PeerFault fault = comm::PeerFault::kUnknown;
  std::string detail;  // the transport's line
  TimePoint at{};
  int64_t peer_heartbeats = 0;  // the peer's heartbeat count then (two more: it was alive after)
};

class Health {
 public:
  struct Options {
    std::chrono::milliseconds interval{1000};
    std::chrono::milliseconds timeout{10000};
  };
  struct LeaveResult {
    std::optional<Verdict> failure;  // the rank left with ok = false
    bool all_left = false;
    bool all_ok = false;  // every rank left with ok = true
  };
  struct CheckResult {
    std::optional<Verdict> failure;        // the first verdict found (each reported once)
    std::optional<std::string> roll_call;  // "no progress for 2.1 s: ranks ..."
  };

  explicit Health(Options options);

  // Starts watching ranks 0..hosts.size()-1 (the rendezvous completed): each
  // counts as seen at `now`. `pids` (optional) name their processes in verdicts.
  void start(const std::vector<std::string>& hosts, TimePoint now,
             const std::vector<int64_t>& pids = {});
  // Records a heartbeat; ignored for a rank out of range or before start().
  void heartbeat(int rank, const Progress& progress, TimePoint now);
  LeaveResult leave(int rank, bool ok, const std::string& message, TimePoint now);
  // The rank's Watch stream opened (again): it is connected. Returns how
  // long it had been disconnected (zero when it was not).
  Clock::duration connected(int rank, TimePoint now);
  // The rank's Watch stream ended without a Leave: its process may be gone.
  // Ignored once the rank left.
  void disconnected(int rank, TimePoint now);
  // Rank `reporter` lost its data-plane connection to `peer` (kUnknown
  // faults are not evidence of anything and are ignored).
  void peer_fault(int reporter, int peer, comm::PeerFault fault, const std::string& detail,
                  TimePoint now);
  // For a job that is over: marks every rank disconnected for the grace as
  // gone (left with a failure); returns whether all ranks have left now.
  bool sweep_disconnected(TimePoint now);
  // The coordinator itself did not run until `now` (its ticker found a gap):
  // what ranks did not do meanwhile does not count against them; their
  // silence and disconnect clocks start again at `now`.
  void forgive(TimePoint now);
  // Called periodically (a few times per interval).
  CheckResult check(TimePoint now);

  // Where every rank is, grouped (see above). "" before start().
  std::string roll_call(TimePoint now) const;
  std::vector<RankHealth> ranks() const;

 private:
  std::string roll_call_locked(TimePoint now) const;
  std::string who(const RankHealth& h) const;
  std::optional<Verdict> died_locked(TimePoint now);
  std::optional<Verdict> link_broken_locked();
  std::optional<Verdict> silent_locked(TimePoint now);

  const Options options_;
  const Clock::duration grace_;  // a dropped connection may come back this long
  mutable std::mutex mu_;
  std::vector<RankHealth> ranks_;
  std::vector<PeerReport> reports_;
  std::vector<bool> reported_silent_;
  TimePoint last_progress_{};                // last time any rank's progress changed
  std::optional<TimePoint> next_roll_call_;  // set while a stall was reported
};

}  // namespace mddp::coordinator
