// kAuto: the flat all-reduce the alpha-beta model says is cheapest for a
// message of S bytes on n ranks: ring, tree or (small messages) doubling.
//
// Spec. A step costs alpha + (bytes it moves)/beta, and a step that
// combines what it received costs (bytes it reduces)/beta_r more: the
// reduction is a pass over memory, not free (beta_r ~ one core's memory
// bandwidth). Along each algorithm's critical path (L = ceil(log2 n),
// D = floor(log2 n), e = 1 when n is not a power of two, else 0):
//
//     ring      2(n-1)(alpha + S/(n beta)) + (n-1) S/(n beta_r)
//     tree      2L (alpha + S/beta)        + L S/beta_r
//     doubling  (D+2e)(alpha + S/beta)     + (D+e) S/beta_r
//
// auto picks the cheapest, doubling only up to kDoublingMaxBytes, ties to
// the ring. Consequences:
//   * n <= 3: the tree takes as many steps as the ring and moves more
//     bytes, so it never wins there.
//   * doubling never costs more than the tree in this model (D+2e <= 2L
//     steps, the same reductions), so below kDoublingMaxBytes the choice is
//     ring or doubling, and the tree is left the band between
//     kDoublingMaxBytes and its crossover with the ring on many ranks
//     (up to 53 KiB at n = 8, 100 KiB at n = 16).
//   * the model's doubling-vs-ring crossover with the constants below:
//     221 KiB at n = 2 (the same bytes, one latency less, S/2 more reduced),
//     16 KiB at n = 3, 148 KiB at n = 4, 42-88 KiB at n = 5..7, 189 KiB at
//     n = 8. With shared memory's constants (alpha ~1.8 us, beta ~11 GB/s)
//     it is 35 KiB at n = 2, 6 KiB at n = 3 and 41 KiB at n = 4.
//     kDoublingMaxBytes caps it, because the model's links are independent
//     and doubling's rounds have all n ranks send S at once, which ranks
//     sharing a host's cores or memory bus pay for; measure it.
//
// The constants are to be set from measurement (`microddp bench allreduce
// --algo ring|tree|doubling` over the sizes around the crossover, on a host
// with a core per rank); change them here only. Every rank computes the same
// choice from the same (S, n), so the ranks never disagree.
#include <bit>
#include <cstddef>

#include "core/comm/algorithms/algorithms.h"

namespace mddp::comm {
namespace {

// alpha * beta for the transports here. Measured on loopback TCP
// (bench/allreduce_vs_mpi_gloo.sh, quiet 2-core machine,
// bench/results/2026-11-22-epyc-avx2.md):
// a 2-rank 4 KiB all-reduce takes 24 us for two dependent exchanges, so
// alpha ~ 12 us, and large messages reach beta ~ 2.9 GB/s: alpha*beta ~ 35 KB.
// (Shared memory: alpha ~ 1.8 us, beta ~ 11 GB/s, ~ 20 KB.) The direct n = 4
// tree-vs-ring comparison on 2 cores was dominated by oversubscription and is
// not used.
constexpr double kAlphaBetaBytes = 32.0 * 1024;
// beta, the link's bandwidth (loopback TCP, as above), and beta_r, the rate
// one core reduces at (~ its memory bandwidth; a message this small is in
// cache, so this is conservative). Only their ratio enters the rule.
constexpr double kLinkBytesPerSecond = 2.9e9;
constexpr double kReduceBytesPerSecond = 10e9;
// Largest message auto sends by recursive doubling: the crossover to
// measure (see the spec). 32 KiB sits at the model's crossover for shared
// memory at n = 2 and 4 and below it for TCP.
constexpr std::size_t kDoublingMaxBytes = 32 * 1024;

// An algorithm's critical path: `steps` messages, `wire` times S sent and
// `reduced` times S combined, one after another.
struct Path {
  double steps, wire, reduced;
  // In units of alpha: steps + (wire S)/(alpha beta) + (reduced S)/(alpha beta_r).
  double cost(double bytes) const {
    return steps +
           (wire + reduced * kLinkBytesPerSecond / kReduceBytesPerSecond) * bytes / kAlphaBetaBytes;
  }
};

}  // namespace

Algorithm choose_all_reduce_algorithm(std::size_t bytes, int world) {
  if (world <= 1) return Algorithm::kRing;
  const auto un = static_cast<unsigned>(world);
  const double n = world;
  const double L = std::bit_width(un - 1);  // ceil(log2 n)
  const double D = std::bit_width(un) - 1;  // floor(log2 n)
  const double e = std::has_single_bit(un) ? 0 : 1;
  const double S = static_cast<double>(bytes);
  const Path ring{2 * (n - 1), 2 * (n - 1) / n, (n - 1) / n};
  const Path tree{2 * L, 2 * L, L};
  const Path doubling{D + 2 * e, D + 2 * e, D + e};

  Algorithm best = Algorithm::kRing;
  double best_cost = ring.cost(S);
  if (tree.cost(S) < best_cost) {
    best = Algorithm::kTree;
    best_cost = tree.cost(S);
  }
  if (bytes <= kDoublingMaxBytes && doubling.cost(S) < best_cost) best = Algorithm::kDoubling;
  return best;
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
