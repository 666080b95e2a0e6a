// Lab 4 — tree all-reduce = binomial-tree reduce + binomial-tree broadcast.
// Read labs/04_tree_allreduce/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check tree_allreduce
#include "core/comm/reduce_kernels.h"
#include "labs/04_tree_allreduce/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {

void tree_reduce(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                 comm::ReduceOp op, int root) {
  // EXERCISE: work in vranks, v = ctx.vrank(root) (the root is 0). For mask =
  // 1, 2, 4, ...: if v has the bit `mask` set, send data to the parent
  // ctx.real(v - mask, root) and stop; otherwise, if v + mask < n, receive
  // that child's partial result (into ctx.scratch) and combine it into data
  // (comm::reduce). The root divides by n at the end for ReduceOp::kAvg.
  MDDP_LAB_TODO("tree_reduce");
}

void tree_broadcast(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                    int root) {
  // EXERCISE: the reduce's tree backwards. A vrank v != 0 first receives from
  // its parent v - (lowest set bit of v); then every rank sends to v + m for
  // each power of two m below that bit (the root: below n), largest first.
  MDDP_LAB_TODO("tree_broadcast");
}

void all_reduce_tree(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                     comm::ReduceOp op) {
  // EXERCISE: reduce to rank 0, then broadcast from rank 0.
  MDDP_LAB_TODO("all_reduce_tree");
}

}  // namespace mddp::labs::impl
