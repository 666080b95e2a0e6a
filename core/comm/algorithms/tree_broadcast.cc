// Broadcast over a binomial tree.
//
// Spec. Ranks are numbered by vrank (the root is 0). In round k = 0, 1, ...
// every vrank v < 2^k that already has the data sends it to v + 2^k:
//
//   round 0: 0 -> 1     round 1: 0 -> 2, 1 -> 3     round 2: 0 -> 4, 1 -> 5, 2 -> 6, 3 -> 7
//
// so the number of ranks holding the data doubles each round. Seen from one
// rank: vrank v's parent is v minus its lowest set bit, from which it
// receives once; it then sends to v + 2^j for every 2^j below that bit,
// largest subtree first (the root: below the first power of two >= n).
//
// Cost: ceil(log2 n) rounds of a whole message: ceil(log2 n)(alpha + S/beta),
// against (n-1)(alpha + S/beta) for a root that sends to everyone itself.
// The root and inner ranks send S once per child; leaves only receive.
// Latency-optimal; for large S a pipelined or scatter + all-gather broadcast
// would move fewer bytes per rank, which microddp does not need (broadcast is
// for parameters at start-up and small control values).
#include <bit>

#include "core/comm/algorithms/algorithms.h"

namespace mddp::comm {

void broadcast_tree(const AlgoContext& ctx, void* data, int64_t count, DataType t, int root) {
  const int n = ctx.size;
  if (count == 0 || n == 1) return;
  const int v = ctx.vrank(root);
  const std::size_t bytes = bytes_of(count, t);

  int mask = 1;  // ends at v's lowest set bit (the root: the first power of two >= n)
  const auto round = [](int m) { return std::countr_zero(static_cast<unsigned>(m)); };
  for (; mask < n; mask <<= 1) {
    if (v & mask) {
      const int64_t t0 = ctx.step_clock();
      const int parent = ctx.real(v - mask, root);
      ctx.recv(parent, data, bytes);
      ctx.traced({.phase = StepPhase::kBroadcast,
                  .index = round(mask),
                  .recv_peer = parent,
                  .recv_bytes = static_cast<int64_t>(bytes)},
                 t0, data);
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask >= n) continue;
    const int64_t t0 = ctx.step_clock();
    const int child = ctx.real(v + mask, root);
    ctx.send(child, data, bytes);
    ctx.traced({.phase = StepPhase::kBroadcast,
                .index = round(mask),
                .send_peer = child,
                .send_bytes = static_cast<int64_t>(bytes)},
               t0, data);
  }
}

}  // namespace mddp::comm
