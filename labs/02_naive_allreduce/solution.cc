// Lab 2's reference solution: core's naive all-reduce, the one `--algo
// naive` runs (core/comm/algorithms/naive_all_reduce.cc).
#include "core/comm/algorithms/algorithms.h"
#include "labs/02_naive_allreduce/lab.h"

namespace mddp::labs::impl {

void all_reduce_naive(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                      comm::ReduceOp op) {
  comm::all_reduce_naive(ctx, data, count, t, op);
}

}  // namespace mddp::labs::impl
