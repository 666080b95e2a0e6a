// Tree all-reduce = binomial-tree reduce to rank 0 + binomial-tree broadcast
// from rank 0 (tree_reduce.cc, tree_broadcast.cc).
//
// Spec. The partial results flow up the binomial tree rooted at rank 0 in
// ceil(log2 n) rounds; the finished result (kAvg: divided by n at the root)
// flows back down the same tree in ceil(log2 n) rounds.
//
// Cost: 2 ceil(log2 n) (alpha + S/beta). Against the ring's
// 2(n-1)(alpha + S/(n beta)) it pays fewer latencies (log n against n) but
// moves whole messages: it wins for small S on many ranks, the ring wins for
// large S. For n <= 3 the two take the same number of steps and the ring
// moves fewer bytes, so the tree never wins there. See
// choose_all_reduce_algorithm (auto_select.cc) for the crossover.
//
// Per-rank traffic: the root receives and sends S once per child
// (ceil(log2 n) S each way); leaves send and receive S once.
#include "core/comm/algorithms/algorithms.h"

namespace mddp::comm {

void all_reduce_tree(const AlgoContext& ctx, void* data, int64_t count, DataType t, ReduceOp op) {
  if (count == 0) return;
  constexpr int kRoot = 0;
  reduce_tree(ctx, data, count, t, op, kRoot);
  broadcast_tree(ctx, data, count, t, kRoot);
}

}  // namespace mddp::comm
