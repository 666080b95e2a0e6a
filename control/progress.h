// Where a rank is: the progress it sends in every heartbeat (step, phase,
// the collective it entered last). The coordinator's health tracking
// (coordinator/health.h) reads it for its verdicts and roll calls; the
// worker's heartbeat (worker/heartbeat.h) fills it.
#pragma once

#include <cstdint>
#include <string>

namespace mddp::control {

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

// What a rank was last seen doing, for verdicts: "backward of step 204",
// "sync of step 204, in all_reduce #1042 of bucket 7", "setup".
std::string describe(const Progress& p);

}  // namespace mddp::control
