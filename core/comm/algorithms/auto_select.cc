// kAuto: tree below a crossover size, ring above it, by world size.
//
// Spec. From the alpha-beta costs (L = ceil(log2 n)):
//
//     tree  2L (alpha + S/beta)        ring  2(n-1)(alpha + S/(n beta))
//
// the tree is cheaper exactly when
//
//     S < alpha*beta * ((n-1) - L) / (L - (n-1)/n)  =:  crossover(n)
//
// For n <= 3, (n-1) == L: both take as many steps and the ring moves fewer
// bytes, so the crossover is 0 (always ring). It then grows with n: about
// 0.8 alpha*beta at n=4, 1.9 at n=8, 3.6 at n=16.
//
// alpha*beta is the one machine constant: the bytes one message could carry
// in the time its fixed cost takes (kAlphaBetaBytes).
#include <cstddef>

#include "core/comm/algorithms/algorithms.h"

namespace mddp::comm {
namespace {

// alpha * beta for the transports here: loopback TCP has alpha of order 15 us
// and beta of order 3 GB/s (shared/ANCHORS.md), about 45 KB. A placeholder from
// those published figures until `microddp bench allreduce --algo tree/ring`
// measures the crossover on this machine; change it here only.
constexpr double kAlphaBetaBytes = 32.0 * 1024;

}  // namespace

Algorithm choose_all_reduce_algorithm(std::size_t bytes, int world) {
  if (world <= 3) return Algorithm::kRing;
  int log_n = 0;
  while ((1 << log_n) < world) ++log_n;
  const double n = world;
  const double crossover = kAlphaBetaBytes * ((n - 1) - log_n) / (log_n - (n - 1) / n);
  return static_cast<double>(bytes) < crossover ? Algorithm::kTree : Algorithm::kRing;
}

}  // namespace mddp::comm
