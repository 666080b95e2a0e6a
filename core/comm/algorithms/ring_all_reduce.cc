// Ring all-reduce = ring reduce-scatter + ring all-gather.
//
// Spec. data[count] is split into n blocks (Blocks). The reduce-scatter
// (ring_reduce_scatter.cc) leaves rank r holding the full reduction of block
// r; for kAvg rank r then divides that one block by n (n times less work than
// dividing everything, and every rank gets the same bits); the all-gather
// (ring_all_gather.cc) then passes the finished blocks round the ring until
// every rank has all of them.
//
// Cost: 2(n-1) steps, each moving one block of S/n bytes:
//
//     T_ring = 2(n-1) (alpha + S/(n beta))
//
// Each rank sends and receives 2(n-1)S/n bytes, about 2S whatever n is, and
// every link of the ring is busy in every step: the bandwidth-optimal
// all-reduce. The price is 2(n-1) latencies, so for small messages on many
// ranks the tree (tree_all_reduce.cc) wins; choose_all_reduce_algorithm
// decides.
//
// Counts not divisible by n give blocks one element apart; count < n gives
// empty blocks, which are simply not sent (both ends know their sizes).
#include "core/comm/algorithms/algorithms.h"
#include "core/comm/reduce_kernels.h"

namespace mddp::comm {

void all_reduce_ring(const AlgoContext& ctx, void* data, int64_t count, DataType t, ReduceOp op) {
  if (count == 0) return;
  const Blocks blocks{count, ctx.size};
  ring_reduce_scatter_inplace(ctx, data, blocks, t, op);
  if (op == ReduceOp::kAvg) {
    divide(at(data, blocks.begin(ctx.rank), t), static_cast<std::size_t>(blocks.size(ctx.rank)), t,
           static_cast<float>(ctx.size));
  }
  ring_all_gather_inplace(ctx, data, blocks, t);
}

}  // namespace mddp::comm
