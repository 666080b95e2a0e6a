// How many CPUs this worker's process may run on: what it reports to the
// coordinator (proto Resources.cpus) so that `microddp analyze` and the
// dashboard can tell when the ranks of a host run more compute threads than
// it has CPUs for them (core/perf/host_load.h).
#pragma once

#include <filesystem>
#include <string_view>

namespace mddp::worker {

// The CPUs in this process' affinity mask (sched_getaffinity: taskset,
// cpusets, docker --cpuset-cpus), capped by the CPU quota of its cgroup v2
// and the cgroups above it (cpu.max: docker --cpus, systemd CPUQuota),
// rounded up. std::thread::hardware_concurrency() when the mask cannot be
// read; at least 1.
int usable_cpus();

// The CPU count a cgroup v2 `cpu.max` allows ("200000 100000" -> 2,
// "150000 100000" -> 2, rounded up); 0 for no limit ("max 100000") or text
// that is not a quota.
int cpus_of_cpu_max(std::string_view content);

// The smallest cpu.max limit from the cgroup `dir` up to `root` (both
// included); 0 when none limits. `dir` must be `root` or below it.
int cgroup_cpu_limit(const std::filesystem::path& root, const std::filesystem::path& dir);

}  // namespace mddp::worker
