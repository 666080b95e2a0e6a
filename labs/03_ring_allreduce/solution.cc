// Lab 3's reference solution: core's ring, the one training runs
// (core/comm/algorithms/ring_reduce_scatter.cc, ring_all_gather.cc, ring_all_reduce.cc).
#include "core/comm/algorithms/algorithms.h"
#include "labs/03_ring_allreduce/lab.h"

namespace mddp::labs::impl {

void ring_reduce_scatter(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                         comm::DataType t, comm::ReduceOp op) {
  comm::ring_reduce_scatter_inplace(ctx, data, blocks, t, op);
}

void ring_all_gather(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                     comm::DataType t) {
  comm::ring_all_gather_inplace(ctx, data, blocks, t);
}

void all_reduce_ring(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                     comm::ReduceOp op) {
  comm::all_reduce_ring(ctx, data, count, t, op);
}

}  // namespace mddp::labs::impl
