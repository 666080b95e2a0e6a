// Lab 2 — naive all-reduce: gather to rank 0, combine, send the result back.
// Read labs/02_naive_allreduce/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check naive_allreduce
#include "core/comm/reduce_kernels.h"
#include "labs/02_naive_allreduce/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {

void all_reduce_naive(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                      comm::ReduceOp op) {
  // EXERCISE: every rank but 0 sends its whole buffer to rank 0 and receives
  // the result back. Rank 0 receives each other rank's buffer (into
  // ctx.scratch, not over its own data), combines it into data with
  // comm::reduce(out, a, b, count, t, op), divides by the world size for
  // ReduceOp::kAvg (comm::divide), then sends data to every other rank.
  // Sizes: comm::bytes_of(count, t). Messages: ctx.send(peer, ptr, bytes),
  // ctx.recv(peer, ptr, bytes).
  MDDP_LAB_TODO("all_reduce_naive");
}

}  // namespace mddp::labs::impl
