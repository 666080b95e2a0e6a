// Naive all-reduce = gather to a root + broadcast from it, one peer at a time.
//
// Spec. Every rank other than the root (rank 0) sends its whole buffer to the
// root and waits. The root receives the n-1 buffers one after another,
// combines each into its own (16-bit types: in an fp32 scratch, rounded once),
// divides by n for kAvg, and then sends the result to each rank in turn.
//
// Cost, all of it at the root:  T_naive = 2(n-1)(alpha + S/beta).
// The root receives (n-1)S and sends (n-1)S while every other rank moves
// only S each way, so the root's link is the bottleneck and the time grows
// linearly with n, where the ring's stays near 2S/beta. Kept because it is
// the obvious first design (a reduce to the root, then a broadcast), and
// the benchmark shows why it loses.
#include "core/comm/algorithms/algorithms.h"
#include "core/comm/reduce_kernels.h"

namespace mddp::comm {

void all_reduce_naive(const AlgoContext& ctx, void* data, int64_t count, DataType t, ReduceOp op) {
  constexpr int kRoot = 0;
  const int n = ctx.size;
  if (count == 0 || n == 1) return;
  const auto elems = static_cast<std::size_t>(count);
  const std::size_t bytes = bytes_of(count, t);

  const auto b = static_cast<int64_t>(bytes);
  if (ctx.rank != kRoot) {
    int64_t t0 = ctx.step_clock();
    ctx.send(kRoot, data, bytes);
    ctx.traced({.phase = StepPhase::kReduce, .send_peer = kRoot, .send_bytes = b}, t0, data);
    t0 = ctx.step_clock();
    ctx.recv(kRoot, data, bytes);
    ctx.traced({.phase = StepPhase::kBroadcast, .recv_peer = kRoot, .recv_bytes = b}, t0, data);
    return;
  }

  const bool wide = t != DataType::kFloat32;
  float* acc = wide ? ctx.scratch.floats(Scratch::kAccum, elems) : nullptr;
  if (wide) to_float(acc, data, elems, t);
  void* incoming = ctx.scratch.get(Scratch::kRecv, bytes);
  for (int q = 1; q < n; ++q) {
    const int64_t t0 = ctx.step_clock();
    ctx.recv(q, incoming, bytes);
    if (wide) {
      accumulate(acc, incoming, elems, t, op);
    } else {
      reduce(data, data, incoming, elems, t, op);
    }
    ctx.traced({.phase = StepPhase::kReduce, .index = q - 1, .recv_peer = q, .recv_bytes = b}, t0,
               data);
  }
  const float divisor = op == ReduceOp::kAvg ? static_cast<float>(n) : 1.0f;
  if (wide) {
    from_float(data, acc, elems, t, divisor);
  } else {
    divide(data, elems, t, divisor);
  }
  for (int q = 1; q < n; ++q) {
    const int64_t t0 = ctx.step_clock();
    ctx.send(q, data, bytes);
    ctx.traced({.phase = StepPhase::kBroadcast, .index = q - 1, .send_peer = q, .send_bytes = b},
               t0, data);
  }
}

}  // namespace mddp::comm
