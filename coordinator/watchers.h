// The open Watch streams of a job (proto: Watch), each with the attempt and
// rank it watches: who hears that the job ended or that an attempt ended,
// and when a rank's last stream closes (its process may be gone:
// Note [Who is at fault] in health.cc). Thread-safe; the callbacks are
// called outside its lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "control/job_status.h"

namespace mddp::coordinator {

class Watchers {
 public:
  // `finished`: nothing more will come, the stream may close.
  using Callback = std::function<void(const control::JobStatus& status, bool finished)>;
  void add(uint64_t id, int attempt, int rank, Callback on_change);
  // Removes stream `id`; returns the (attempt, rank) it watched when it was
  // that rank's last open stream, else nullopt.
  std::optional<std::pair<int, int>> remove(uint64_t id);
  // Whether `rank` of `attempt` holds a Watch stream open.
  bool watching(int attempt, int rank) const;
  // Calls every watcher of `attempt` (-1: all) with `status`.
  void notify(int attempt, const control::JobStatus& status, bool finished) const;

 private:
  struct Watcher {
    int attempt, rank;
    Callback on_change;
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Watcher> watchers_;     // open Watch streams by id
  std::map<std::pair<int, int>, int> open_;  // (attempt, rank) -> its open streams
};

}  // namespace mddp::coordinator
