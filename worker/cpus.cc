#include "worker/cpus.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace mddp::worker {
namespace {

// CPUs in the affinity mask; 0 when it cannot be read.
int affinity_cpus() {
  for (int n = 1024; n <= (1 << 16); n *= 2) {  // the kernel's mask may exceed cpu_set_t
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) return 0;
    const std::size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set);
    const int rc = sched_getaffinity(0, size, set);
    const int count = rc == 0 ? CPU_COUNT_S(size, set) : 0;
    const bool too_small = rc != 0 && errno == EINVAL;
    CPU_FREE(set);
    if (!too_small) return count;
  }
  return 0;
}

// This process' cgroup v2 path ("/system.slice/x.service"), "" without one.
std::string own_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

}  // namespace

int cpus_of_cpu_max(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  const auto space = s.find(' ');
  if (space == std::string_view::npos) return 0;
  const std::string_view q = s.substr(0, space), p = s.substr(space + 1);
  long long quota = 0, period = 0;
  if (std::from_chars(q.data(), q.data() + q.size(), quota).ptr != q.data() + q.size())
    return 0;  // "max"
  if (std::from_chars(p.data(), p.data() + p.size(), period).ptr != p.data() + p.size()) return 0;
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<int>(std::min<long long>((quota + period - 1) / period, 1 << 20));
}

int cgroup_cpu_limit(const std::filesystem::path& root, const std::filesystem::path& dir) {
  int limit = 0;
  for (std::filesystem::path d = dir;; d = d.parent_path()) {
    std::ifstream in(d / "cpu.max");
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      const int n = cpus_of_cpu_max(text.str());
      if (n > 0) limit = limit == 0 ? n : std::min(limit, n);
    }
    if (d == root || d == d.parent_path() || d.string().size() <= root.string().size()) break;
  }
  return limit;
}

int usable_cpus() {
  int n = affinity_cpus();
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  const std::string cgroup = own_cgroup();
  if (!cgroup.empty()) {
    const std::filesystem::path root = "/sys/fs/cgroup";
    std::filesystem::path dir = root;
    for (const auto& part : std::filesystem::path(cgroup).relative_path())
      if (!part.empty()) dir /= part;
    const int limit = cgroup_cpu_limit(root, dir);
    if (limit > 0 && (n <= 0 || limit < n)) n = limit;
  }
  return std::max(1, n);
}

}  // namespace mddp::worker
