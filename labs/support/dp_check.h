// The frame of the data-parallel Labs' checks (naive DP, hooks, bucketing,
// DDP, sync primitives): every world size and transport of CheckOptions as a
// group of real processes, each rank with a Communicator (watched through a
// WatchedGroup), running the Lab's cases in order until the first failure.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/comm/communicator.h"
#include "labs/support/options.h"
#include "labs/support/ranks.h"
#include "labs/support/report.h"
#include "labs/support/watched_group.h"

namespace mddp::labs {

// One rank of a group, as a Lab's body sees it.
class DpRank {
 public:
  DpRank(int rank, int world, comm::TransportKind kind, std::unique_ptr<comm::Communicator> comm,
         CaseLog& log);
  int rank() const { return rank_; }
  int world() const { return world_; }
  comm::Communicator& comm() { return *comm_; }
  WatchedGroup& group() { return *group_; }
  // Runs one case, named "<what>, world W over KIND"; false: stop (some rank failed it).
  bool run(const std::string& what, const std::function<CaseResult()>& fn);

 private:
  int rank_, world_;
  comm::TransportKind kind_;
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<WatchedGroup> group_;
  CaseLog& log_;
};

// Runs body on every rank of every group; reports each passed group, or the
// first failure (and returns false).
bool check_dp_groups(const CheckOptions& o, Report& report,
                     const std::function<void(DpRank&)>& body);

}  // namespace mddp::labs
