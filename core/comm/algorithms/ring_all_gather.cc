// Ring all-gather.
//
// Spec. The ring of ring_reduce_scatter.cc run without arithmetic. The buffer
// is split into n blocks (Blocks) and rank r starts owning block r. In step
// s = 0 .. n-2, rank r
//
//   sends    block (r - s) mod n      to the right (its own at s = 0, then
//                                      the one it received in step s-1),
//   receives block (r - s - 1) mod n  from the left, straight into place,
//
// so every block travels n-1 hops round the ring and after n-1 steps every
// rank holds all n blocks. Each block moves in one send_recv: with no
// arithmetic between transfers there is nothing for segments to interleave
// with (compare ring_reduce_scatter.cc).
//
// Cost: (n-1)(alpha + S/(n beta)) for S the gathered size; each rank sends
// and receives (n-1)S/n bytes. No scratch: received bytes land in place.
#include <cstring>

#include "core/comm/algorithms/algorithms.h"

namespace mddp::comm {

void ring_all_gather_inplace(const AlgoContext& ctx, void* data, Blocks blocks, DataType t) {
  MDDP_CHECK_EQ(blocks.parts, ctx.size);
  const int n = ctx.size;
  if (blocks.count == 0 || n == 1) return;
  auto* base = static_cast<std::byte*>(data);

  for (int s = 0; s < n - 1; ++s) {
    const int send_b = ctx.peer(-s);
    const int recv_b = ctx.peer(-s - 1);
    const std::size_t send_bytes = bytes_of(blocks.size(send_b), t);
    const std::size_t recv_bytes = bytes_of(blocks.size(recv_b), t);
    const int64_t t0 = ctx.step_clock();
    ctx.exchange(ctx.right(), at(base, blocks.begin(send_b), t), send_bytes, ctx.left(),
                 at(base, blocks.begin(recv_b), t), recv_bytes);
    ctx.traced({.phase = StepPhase::kAllGather,
                .index = s,
                .send_peer = ctx.right(),
                .recv_peer = ctx.left(),
                .send_block = send_b,
                .recv_block = recv_b,
                .send_bytes = static_cast<int64_t>(send_bytes),
                .recv_bytes = static_cast<int64_t>(recv_bytes)},
               t0, data);
  }
  // The spec's claim: the last block received is the right neighbour's, the
  // only one that had not yet come round.
  MDDP_CHECK_EQ(ctx.peer(-(n - 2) - 1), ctx.right());
}

void all_gather_ring(const AlgoContext& ctx, const void* in, void* out, int64_t count, DataType t) {
  if (count == 0) return;
  void* mine = at(out, count * ctx.rank, t);
  if (mine != in) std::memmove(mine, in, bytes_of(count, t));
  ring_all_gather_inplace(ctx, out, Blocks{count * ctx.size, ctx.size}, t);
}

}  // namespace mddp::comm
