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

// alpha * beta for the transports here. Measured on loopback TCP
// (bench/allreduce_vs_mpi_gloo.sh, docs/allreduce.md, quiet 2-core machine):
// a 2-rank 4 KiB all-reduce takes 24 us for two dependent exchanges, so
// alpha ~ 12 us, and large messages reach beta ~ 2.9 GB/s: alpha*beta ~ 35 KB.
// (Shared memory: alpha ~ 1.8 us, beta ~ 11 GB/s, ~ 20 KB.) The direct n = 4
// tree-vs-ring comparison on 2 cores was dominated by oversubscription and is
// not used; change the constant here only.
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

// The enum's flat algorithms as functions (algorithms.h).
AllReduceFn flat_all_reduce(Algorithm a) {
  switch (a) {
    case Algorithm::kRing:
      return all_reduce_ring;
    case Algorithm::kNaive:
      return all_reduce_naive;
    case Algorithm::kTree:
      return all_reduce_tree;
    case Algorithm::kDoubling:
      return all_reduce_doubling;
    case Algorithm::kAuto:
    case Algorithm::kHierarchical:
      break;
  }
  MDDP_CHECK(false, "not a flat all-reduce algorithm: ", to_string(a));
  return nullptr;
}

}  // namespace mddp::comm
