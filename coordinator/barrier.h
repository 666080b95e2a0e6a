// Named barriers over the job's N ranks. Each name counts generations: a
// generation completes when all N ranks arrived, and the next arrival opens
// the next one. When one waiter's deadline passes, the whole generation
// fails: every rank waiting in it hears which ranks did not arrive, e.g.
//   "barrier 'start' (generation 0) timed out after 30.0 s: ranks 1, 3 did not arrive (0, 2 did)"
// and the generation starts over empty. A rank arriving twice in one
// generation is refused. Waits follow Note [Waits complete exactly once]
// (outcome.h). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/outcome.h"

namespace mddp::coordinator {

class Barrier {
 public:
  // Completion gets the generation that completed (0 for the first).
  using Callback = std::function<void(Outcome, int64_t generation)>;
  explicit Barrier(int world_size);

  Ticket arrive(const std::string& name, int rank, TimePoint deadline, TimePoint now,
                Callback done);
  void cancel(uint64_t id);
  void expire(TimePoint now);
  void abort(const std::string& why);

  int64_t generation(const std::string& name) const;  // completed generations of `name`

 private:
  struct Arrival {
    int rank;
    TimePoint deadline, since;
    Callback done;
    uint64_t id;
  };
  struct Named {
    int64_t generation = 0;
    std::map<int, Arrival> arrived;  // rank -> arrival
  };

  const int world_size_;
  mutable std::mutex mu_;
  std::map<std::string, Named> barriers_;
  std::optional<std::string> aborted_;
};

// "1, 3" (for messages naming ranks).
std::string rank_list(const std::vector<int>& ranks);

}  // namespace mddp::coordinator
