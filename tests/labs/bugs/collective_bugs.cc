// The collective Labs' planted bugs (bugs.h): small variations of a
// correct student solution, each the mistake its name says.
#include <bit>
#include <cstring>
#include <vector>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/reduce_kernels.h"
#include "tests/labs/bugs/bugs.h"

namespace mddp::labs::bugs {
namespace {

// A plain ring reduce-scatter, one exchange per step; `shift` moves the
// block index (0 is right), `accumulate` false sends its own input on.
void ring_rs(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks, comm::DataType t,
             comm::ReduceOp op, int shift, bool accumulate) {
  const int n = ctx.size;
  if (n == 1 || blocks.count == 0) return;
  std::vector<std::byte> own(comm::bytes_of(blocks.count, t));
  std::memcpy(own.data(), data, own.size());
  for (int s = 0; s < n - 1; ++s) {
    const int send_b = ctx.peer(-s - 1 + shift), recv_b = ctx.peer(-s - 2 + shift);
    std::vector<std::byte> in(comm::bytes_of(blocks.size(recv_b), t));
    const void* from = accumulate ? comm::at(data, blocks.begin(send_b), t)
                                  : comm::at(own.data(), blocks.begin(send_b), t);
    ctx.exchange(ctx.right(), from, comm::bytes_of(blocks.size(send_b), t), ctx.left(), in.data(),
                 in.size());
    void* mine = comm::at(data, blocks.begin(recv_b), t);
    comm::reduce(mine, mine, in.data(), static_cast<std::size_t>(blocks.size(recv_b)), t, op);
  }
}

}  // namespace

namespace ring_off_by_one {
void ring_reduce_scatter(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                         comm::DataType t, comm::ReduceOp op) {
  ring_rs(ctx, data, blocks, t, op, /*shift=*/1, /*accumulate=*/true);
}
}  // namespace ring_off_by_one

namespace ring_no_accumulate {
void ring_reduce_scatter(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                         comm::DataType t, comm::ReduceOp op) {
  ring_rs(ctx, data, blocks, t, op, /*shift=*/0, /*accumulate=*/false);
}
}  // namespace ring_no_accumulate

namespace tree_wrong_parent {
void tree_reduce(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                 comm::ReduceOp op, int root) {
  const int n = ctx.size, v = ctx.vrank(root);
  if (count == 0 || n == 1) return;
  const std::size_t bytes = comm::bytes_of(count, t);
  std::vector<std::byte> in(bytes);
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (v & mask) break;
    if (v + mask >= n) continue;
    ctx.recv(ctx.real(v + mask, root), in.data(), bytes);
    comm::reduce(data, data, in.data(), static_cast<std::size_t>(count), t, op);
  }
  if (v != 0) {
    ctx.send(ctx.real(v - 1, root), data, bytes);  // the bug: the parent is v - lowbit(v)
  } else if (op == comm::ReduceOp::kAvg) {
    comm::divide(data, static_cast<std::size_t>(count), t, static_cast<float>(n));
  }
}
}  // namespace tree_wrong_parent

namespace naive_early_result {
void all_reduce_naive(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                      comm::ReduceOp op) {
  const int n = ctx.size;
  if (count == 0 || n == 1) return;
  const std::size_t bytes = comm::bytes_of(count, t);
  if (ctx.rank != 0) {
    ctx.send(0, data, bytes);
    ctx.recv(0, data, bytes);
    return;
  }
  std::vector<std::byte> in(bytes);
  for (int q = 1; q < n; ++q) {
    ctx.recv(q, in.data(), bytes);
    ctx.send(q, data, bytes);  // the bug: answers each rank before it has heard from the rest
    comm::reduce(data, data, in.data(), static_cast<std::size_t>(count), t, op);
  }
  if (op == comm::ReduceOp::kAvg)
    comm::divide(data, static_cast<std::size_t>(count), t, static_cast<float>(n));
}
}  // namespace naive_early_result

}  // namespace mddp::labs::bugs
