// Barrier, dissemination (Hensgen, Finkel and Manber, 1988).
//
// Spec. In round k = 0 .. ceil(log2 n)-1 every rank r sends a one-byte token
// to r + 2^k and waits for the token of r - 2^k (both at once, send_recv).
// After round k, rank r has heard, directly or through the ranks it heard
// from, from the 2^(k+1) ranks r, r-1, ..., r-2^(k+1)+1; after the last round
// from all n, so no rank leaves before every rank has arrived.
//
// Cost: ceil(log2 n) alpha, no bytes to speak of, and no root: every rank
// does the same work in every round (a tree barrier costs 2 ceil(log2 n)
// alpha: up to the root and back down).
//
// The token carries the round number; a mismatch means the ranks' message
// streams are out of step (they did not all issue the same collectives), which
// is reported rather than passed over.
#include <cstdint>

#include "core/comm/algorithms/algorithms.h"

namespace mddp::comm {

void barrier_dissemination(const AlgoContext& ctx) {
  int round = 0;
  for (int distance = 1; distance < ctx.size; distance <<= 1, ++round) {
    const auto token = static_cast<uint8_t>(round);
    uint8_t got = 0xff;
    const int to = ctx.peer(distance), from = ctx.peer(-distance);
    ctx.exchange(to, &token, 1, from, &got, 1);
    if (got != token) {
      throw CommError(str("barrier round ", round, ": rank ", from, " sent token ", int{got},
                          ", expected ", int{token},
                          ": the ranks' collectives are out of step "
                          "(every rank must issue the same collectives in the same order)"));
    }
  }
}

}  // namespace mddp::comm
