// Oversubscription: the ranks of one host together running more compute
// threads than the host has CPUs for them. They then take turns on the
// CPUs: a rank descheduled mid-step holds everyone else in the next
// all-reduce, so the wait shows up as exposed communication and stragglers
// although neither the network nor that rank is at fault.
//
// The rule (one place for the coordinator's warning, the dashboard's rank
// table and `microddp analyze`): ranks are on one host when their host names
// are equal; a host's compute threads are the sum of its ranks' --threads (a
// rank that did not report its threads counts as one: every rank computes on
// at least one); its CPUs are the most any of its ranks may run on (ranks of
// one host normally share one affinity mask and cgroup); it is oversubscribed
// when its threads exceed its CPUs. No rank of the host reported its CPUs
// (a run of an older microddp): unknown, never oversubscribed.
#pragma once

#include <string>
#include <vector>

namespace mddp::perf {

// One rank as the coordinator's members list it (job.json, /api/ranks).
struct RankPlacement {
  int rank = 0;
  std::string host;
  int threads = 0;  // compute threads (--threads); 0: not reported
  int cpus = 0;     // CPUs its process may run on; 0: not reported
};

struct HostLoad {
  std::string host;
  std::vector<int> ranks;         // ascending
  std::vector<int> rank_threads;  // each rank's reported threads (0: not reported), as `ranks`
  int threads = 0;                // compute threads of its ranks, summed (see the rule above)
  int cpus = 0;                   // 0: unknown

  bool cpus_known() const { return cpus > 0; }
  bool oversubscribed() const { return cpus > 0 && threads > cpus; }
  // "host a: 4 ranks (0-3) x 1 compute thread = 4 threads on 2 CPUs, 2x oversubscribed"
  std::string describe() const;
};

// One entry per host, in order of each host's lowest rank.
std::vector<HostLoad> host_loads(const std::vector<RankPlacement>& ranks);

// "0-3", "0, 2, 5-7"
std::string rank_list(const std::vector<int>& ascending);

}  // namespace mddp::perf
