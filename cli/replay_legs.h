// The legs of a replay (`microddp run --replay`, replay.h): a run's
// membership log (coordinator/membership_log.h) read as stretches of steps,
// each on one world size. Pure: tested on its own (tests/cli/replay_legs_test.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace mddp::cli {

struct ReplayLeg {
  int64_t from_step = 0;  // the state it starts from (a checkpoint's step, or 0)
  int64_t to_step = 0;    // the last step it trains; 0: to the job's end
  int world_size = 0;
  bool operator==(const ReplayLeg&) const = default;
};

// The legs of the membership log `path` (a run directory, or its
// membership.jsonl): a leg per line, those that trained nothing before the
// next line's step left out, and neighbours of one world size merged.
// Throws InputError naming the file and line of what cannot be read.
std::vector<ReplayLeg> replay_legs(const std::filesystem::path& path);

}  // namespace mddp::cli
