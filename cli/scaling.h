// Scaling-study words shared by `microddp model` (predicted) and `microddp
// scale` (measured), so both say the same thing by the same formulas:
//   strong scaling: the global batch is fixed; n ranks each do 1/n of it.
//   weak scaling:   the per-rank batch is fixed; the global batch grows n-fold.
//   speedup(n)    = throughput(n) / throughput(1)   (samples/s, global)
//   efficiency(n) = speedup(n) / n                   (1 = perfect scaling)
#pragma once

#include <string>
#include <vector>

namespace mddp::cli {

enum class Scaling { kStrong, kWeak };

// "strong" | "weak"; InputError otherwise.
Scaling parse_scaling(const std::string& s);
const char* scaling_name(Scaling s);

// "1,2,4" -> {1, 2, 4}: positive, strictly increasing; InputError naming `flag` otherwise.
std::vector<int> parse_world_sizes(const std::string& list, const std::string& flag);

// Throughput ratio; 0 when either is not positive (not measured).
double speedup(double throughput_n, double throughput_1);
// speedup / world_size; 0 when world_size < 1.
double efficiency(double speedup, int world_size);

// Compute per step and rank at `world_size`, from compute_n1 at one rank:
// compute_n1 / n (strong: each rank does 1/n of the batch) or compute_n1 (weak).
double compute_per_rank(Scaling s, double compute_n1, int world_size);

// Speedup from step times: a step of n ranks processes the same samples as
// one rank's (strong) or n times them (weak), so
//   strong: step_1 / step_n        weak: n step_1 / step_n
// 0 when either step is not positive.
double speedup_from_steps(Scaling s, double step_1, double step_n, int world_size);

}  // namespace mddp::cli
