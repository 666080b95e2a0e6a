#include "cli/scaling.h"

#include <sstream>

#include "core/common/check.h"

namespace mddp::cli {

Scaling parse_scaling(const std::string& s) {
  if (s == "strong") return Scaling::kStrong;
  if (s == "weak") return Scaling::kWeak;
  throw InputError(
      str("unknown scaling '", s, "' (strong: fixed global batch, weak: fixed per-rank batch)"));
}

const char* scaling_name(Scaling s) {
  return s == Scaling::kStrong ? "strong" : "weak";
}

std::vector<int> parse_world_sizes(const std::string& list, const std::string& flag) {
  std::vector<int> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t pos = 0;
    int n = 0;
    try {
      n = std::stoi(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != item.size() || n < 1)
      throw InputError(str(flag, " '", list, "': '", item, "' is not a positive integer (e.g. ",
                           flag, " 1,2,4)"));
    if (!out.empty() && n <= out.back())
      throw InputError(str(flag, " '", list, "' must be strictly increasing"));
    out.push_back(n);
  }
  if (out.empty()) throw InputError(str(flag, " is empty (e.g. ", flag, " 1,2,4)"));
  return out;
}

double speedup(double throughput_n, double throughput_1) {
  return throughput_n > 0 && throughput_1 > 0 ? throughput_n / throughput_1 : 0.0;
}

double efficiency(double speedup, int world_size) {
  return world_size > 0 ? speedup / world_size : 0.0;
}

double compute_per_rank(Scaling s, double compute_n1, int world_size) {
  MDDP_CHECK(world_size >= 1, "world size ", world_size);
  return s == Scaling::kStrong ? compute_n1 / world_size : compute_n1;
}

double speedup_from_steps(Scaling s, double step_1, double step_n, int world_size) {
  if (!(step_1 > 0 && step_n > 0)) return 0.0;
  const double samples_ratio = s == Scaling::kStrong ? 1.0 : world_size;  // per step, n vs 1
  return speedup(samples_ratio / step_n, 1.0 / step_1);
}

}  // namespace mddp::cli
