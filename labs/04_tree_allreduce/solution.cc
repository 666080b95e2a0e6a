// Lab 4's reference solution: core's binomial trees
// (core/comm/algorithms/tree_reduce.cc, tree_broadcast.cc, tree_all_reduce.cc).
#include "core/comm/algorithms/algorithms.h"
#include "labs/04_tree_allreduce/lab.h"

namespace mddp::labs::impl {

void tree_reduce(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                 comm::ReduceOp op, int root) {
  comm::reduce_tree(ctx, data, count, t, op, root);
}

void tree_broadcast(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                    int root) {
  comm::broadcast_tree(ctx, data, count, t, root);
}

void all_reduce_tree(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                     comm::ReduceOp op) {
  comm::all_reduce_tree(ctx, data, count, t, op);
}

}  // namespace mddp::labs::impl
