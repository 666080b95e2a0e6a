// Lab 3 — ring all-reduce = ring reduce-scatter + ring all-gather.
// Read labs/03_ring_allreduce/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check ring_allreduce
#include "core/comm/reduce_kernels.h"
#include "labs/03_ring_allreduce/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {

void ring_reduce_scatter(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                         comm::DataType t, comm::ReduceOp op) {
  // EXERCISE: n - 1 steps. In step s, rank r sends block (r - s - 1) mod n to
  // its right neighbour and receives block (r - s - 2) mod n from its left
  // one (into scratch), then reduces the received block into its own copy.
  // Both at once: ctx.exchange(ctx.right(), send_ptr, send_bytes,
  // ctx.left(), recv_ptr, recv_bytes). ctx.peer(k) is (r + k) mod n; block b
  // starts at element blocks.begin(b) and has blocks.size(b) elements
  // (comm::at(data, index, t) points at an element).
  MDDP_LAB_TODO("ring_reduce_scatter");
}

void ring_all_gather(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                     comm::DataType t) {
  // EXERCISE: n - 1 steps. In step s, rank r sends block (r - s) mod n to the
  // right and receives block (r - s - 1) mod n from the left, straight into
  // place.
  MDDP_LAB_TODO("ring_all_gather");
}

void all_reduce_ring(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                     comm::ReduceOp op) {
  // EXERCISE: split count into ctx.size blocks (comm::Blocks{count, ctx.size}),
  // reduce-scatter, divide your own block by n for ReduceOp::kAvg
  // (comm::divide), then all-gather.
  MDDP_LAB_TODO("all_reduce_ring");
}

}  // namespace mddp::labs::impl
