// How `microddp lab check` checks (its flags; the tests narrow them).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/comm/types.h"

namespace mddp::labs {

struct CheckOptions {
  std::vector<int> world_sizes{1, 2, 3, 4, 7};  // each a group of real processes
  std::vector<comm::TransportKind> transports{comm::TransportKind::kTcp, comm::TransportKind::kShm};
  std::chrono::milliseconds timeout{10'000};  // bound on each collective: a deadlock fails after it
  int speed_ranks = 2;                        // ranks of the speed comparison; 0 skips it
  comm::TransportKind speed_transport = comm::TransportKind::kShm;
  std::string work_dir;  // my_work/ (Lab 10 reads its answers there)
  std::string root_dir;  // the repository (Lab 10's run path is relative to it)
};

// "world 4 over tcp"
std::string group_name(int world, comm::TransportKind kind);

}  // namespace mddp::labs
