// Reduce over a binomial tree: the broadcast tree of tree_broadcast.cc with
// the arrows reversed.
//
// Spec. Ranks are numbered by vrank (the root is 0). In round k = 0, 1, ...
// every vrank whose lowest set bit is 2^k sends its partial result to its
// parent v - 2^k and drops out; a vrank v still in, with v + 2^k < n,
// receives that child's partial result and combines it into its own:
//
//   round 0: 1 -> 0, 3 -> 2, 5 -> 4, 7 -> 6     round 1: 2 -> 0, 6 -> 4     round 2: 4 -> 0
//
// After ceil(log2 n) rounds the root holds the reduction over all ranks (for
// kAvg divided by n there, once).
//
// Cost: ceil(log2 n)(alpha + S/beta) at the root, which receives one whole
// message per round; the combining work is S per child.
//
// 16-bit types: a rank with children accumulates them in an fp32 scratch and
// rounds once before it sends (and the root once at the end), so a value
// passes through at most ceil(log2 n) roundings and only the wire is 16-bit.
#include <bit>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/reduce_kernels.h"

namespace mddp::comm {

void reduce_tree(const AlgoContext& ctx, void* data, int64_t count, DataType t, ReduceOp op,
                 int root) {
  const int n = ctx.size;
  if (count == 0) return;
  const int v = ctx.vrank(root);
  const auto elems = static_cast<std::size_t>(count);
  const std::size_t bytes = bytes_of(count, t);
  const bool wide = t != DataType::kFloat32;  // accumulate in fp32 scratch
  float* acc = nullptr;

  int mask = 1;
  int children = 0;
  for (; mask < n; mask <<= 1) {
    if (v & mask) break;  // our turn to send to the parent
    if (v + mask >= n) continue;
    void* incoming = ctx.scratch.get(Scratch::kRecv, bytes);
    const int64_t t0 = ctx.step_clock();
    const int child = ctx.real(v + mask, root);
    ctx.recv(child, incoming, bytes);
    if (wide) {
      if (acc == nullptr) {
        acc = ctx.scratch.floats(Scratch::kAccum, elems);
        to_float(acc, data, elems, t);
      }
      accumulate(acc, incoming, elems, t, op);
    } else {
      reduce(data, data, incoming, elems, t, op);
    }
    ++children;
    ctx.traced({.phase = StepPhase::kReduce,
                .index = std::countr_zero(static_cast<unsigned>(mask)),
                .recv_peer = child,
                .recv_bytes = static_cast<int64_t>(bytes)},
               t0, data);
  }

  const float divisor = (v == 0 && op == ReduceOp::kAvg) ? static_cast<float>(n) : 1.0f;
  if (acc != nullptr) {
    from_float(data, acc, elems, t, divisor);
  } else {
    divide(data, elems, t, divisor);
  }
  if (v != 0) {
    const int64_t t0 = ctx.step_clock();
    const int parent = ctx.real(v - mask, root);  // mask is v's lowest set bit
    ctx.send(parent, data, bytes);
    ctx.traced({.phase = StepPhase::kReduce,
                .index = std::countr_zero(static_cast<unsigned>(mask)),
                .send_peer = parent,
                .send_bytes = static_cast<int64_t>(bytes)},
               t0, data);
  } else {
    // The spec's claim: the root heard from one child per round.
    int rounds = 0;
    while ((1 << rounds) < n) ++rounds;
    MDDP_CHECK_EQ(children, rounds);
  }
}

}  // namespace mddp::comm
